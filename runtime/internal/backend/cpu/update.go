package cpu

// The training step's element-wise operations on the CPU: loss scaling,
// setting values, and the optimizer update, as Go loops over C memory
// (optim's, which the checker's reference shares).

import (
	"fmt"

	"github.com/syncgen/syncgen/runtime/internal/backend"
	"github.com/syncgen/syncgen/runtime/internal/elem"
	"github.com/syncgen/syncgen/runtime/internal/optim"
)

// trainOp is the operand of opScale, opSet, opUpdate and opDivide.
type trainOp struct {
	buf    []byte
	dtype  elem.DType
	factor float64 // opScale's factor, opSet's value
	flag   []byte  // the overflow flag (4 bytes) or nil
	mem    optim.Memory
	hyper  optim.Hyper
}

func (s *cpuStream) Scale(buf backend.Span, factor float64, flag backend.Span) error {
	if !buf.DType.IsFloat() {
		return fmt.Errorf("scale: %s is not a float dtype", buf.DType)
	}
	b, err := spanBytes(buf)
	if err != nil {
		return fmt.Errorf("scale: %w", err)
	}
	f, err := flagBytes(flag)
	if err != nil {
		return fmt.Errorf("scale: %w", err)
	}
	return s.enqueue(cpuOp{kind: opScale, train: &trainOp{buf: b, dtype: buf.DType, factor: factor, flag: f}})
}

func (s *cpuStream) Set(dst backend.Span, v float64) error {
	b, err := spanBytes(dst)
	if err != nil {
		return fmt.Errorf("set: %w", err)
	}
	return s.enqueue(cpuOp{kind: opSet, train: &trainOp{buf: b, dtype: dst.DType, factor: v}})
}

func (s *cpuStream) Update(u backend.UpdateOp) error {
	n := u.Grad.N
	spans := [...]backend.Span{u.Grad, u.Param, u.State[0], u.State[1], u.Out}
	var bytes [len(spans)][]byte
	for i, sp := range spans {
		if sp.N != 0 && sp.N != n {
			return fmt.Errorf("update: %d gradients but a span of %d elements", n, sp.N)
		}
		if sp.N != 0 && !sp.DType.IsFloat() {
			return fmt.Errorf("update: %s is not a float dtype", sp.DType)
		}
		if sp.N == 0 {
			continue // a state the optimizer does not keep, no Out
		}
		b, err := spanBytes(sp)
		if err != nil {
			return fmt.Errorf("update: %w", err)
		}
		bytes[i] = b
	}
	if u.Param.N != n {
		return fmt.Errorf("update: %d gradients and %d parameters", n, u.Param.N)
	}
	f, err := flagBytes(u.Flag)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	op := &trainOp{flag: f, hyper: u.Hyper, mem: optim.Memory{
		Grad: bytes[0], Param: bytes[1], State: [2][]byte{bytes[2], bytes[3]}, Out: bytes[4],
		GradDT: u.Grad.DType, ParamDT: u.Param.DType, OutDT: u.Out.DType,
	}}
	return s.enqueue(cpuOp{kind: opUpdate, train: op})
}

// flagBytes returns the memory of an overflow flag, nil for none.
func flagBytes(flag backend.Span) ([]byte, error) {
	if flag.N == 0 {
		return nil, nil
	}
	if flag.N != 1 || flag.DType != elem.I32 {
		return nil, fmt.Errorf("the overflow flag must be one i32, not %d %s", flag.N, flag.DType)
	}
	return spanBytes(flag)
}

// flagSet reports whether an overflow flag is set.
func flagSet(f []byte) bool {
	return f != nil && (f[0]|f[1]|f[2]|f[3]) != 0
}

// runTrain runs opScale, opSet or opUpdate.
func runTrain(kind opKind, op *trainOp) {
	switch kind {
	case opScale:
		if optim.ScaleBytes(op.buf, op.dtype, op.factor) && op.flag != nil {
			op.flag[0], op.flag[1], op.flag[2], op.flag[3] = 1, 0, 0, 0 // little-endian int32 1
		}
	case opSet:
		var one [1]float64
		one[0] = op.factor
		size := int(op.dtype.Size())
		for i := 0; i < len(op.buf); i += size {
			elem.StoreAll(op.buf[i:i+size], op.dtype, one[:])
		}
	case opDivide:
		divideAvg(op.buf, op.dtype, int(op.factor))
	case opUpdate:
		if flagSet(op.flag) {
			return
		}
		optim.UpdateBytes(&op.hyper, &op.mem)
	}
}
