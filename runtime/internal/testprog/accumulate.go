package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	rt "github.com/syncgen/syncgen/runtime"
)

// The accumulate plan registers itself here, beside main.go's table.
func init() { plans["accumulate"] = accumulatePlan }

// accumulatePlan ("accumulate:N:DT:OP[:scaled]"): a step of N
// micro-batches (gradient accumulation) of a forward (compute) and a
// backward, then the two buckets of DT gradients all-reduced with OP and
// updated with SGD once; with scaled, a dynamic loss scaler and an unscale
// before the update.
func accumulatePlan(arg string) (*rt.Plan, error) {
	parts := strings.Split(arg, ":")
	if len(parts) < 3 {
		return nil, fmt.Errorf("want accumulate:N:DTYPE:OP[:scaled]")
	}
	n, err := strconv.Atoi(parts[0])
	if err != nil || n < 1 {
		return nil, fmt.Errorf("micro-batches %q: want an integer >= 1", parts[0])
	}
	dt := dtypeOf(parts[1])
	if dt == rt.InvalidDType {
		return nil, fmt.Errorf("unknown dtype %q", parts[1])
	}
	op := rt.RedOp(slices.Index(opNames, parts[2]))
	if op <= 0 {
		return nil, fmt.Errorf("unknown op %q", parts[2])
	}
	scaled := len(parts) > 3 && parts[3] == "scaled"
	b := newBuilder("accumulate")
	b.p.Accumulate = n
	if scaled {
		b.p.Scaler = &rt.Scaler{Rule: rt.ScaleTorch, Init: 256, Interval: 3}
	}
	compute := b.stream("compute", rt.PriorityDefault)
	comm := b.stream("comm", rt.PriorityHigh)
	g0 := b.bucket("grads[0]", dt, b.tensor("l1.bias", dt, 10), b.tensor("l1.weight", dt, 10, 33))
	g1 := b.bucket("grads[1]", dt, b.tensor("l0.bias", dt, 33), b.tensor("l0.weight", dt, 33, 17))
	opt := rt.Optimizer{Kind: rt.SGD, LR: 0.125}
	b.p.Step = func(s *rt.Step) {
		s.Compute(src(10), compute, 500*time.Microsecond)
		s.Backward(src(11), compute, time.Millisecond)
		s.AllReduce(src(12), comm, op, rt.AfterReady(), g0, g1)
		if scaled {
			s.Unscale(src(13), compute, false, rt.AfterSynced(), g0, g1)
		}
		s.Update(src(14), compute, opt, rt.AfterSynced(), g0, g1)
		s.Wait(src(15), compute)
	}
	return b.p, nil
}
