package scaler

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

// run drives a scaler of spec through steps ('o' an overflow, '.' a clean
// step) and returns the scale of every step and, last, the scale after
// the last update.
func run(t *testing.T, spec Spec, steps string) []float64 {
	t.Helper()
	c := New(spec)
	var got []float64
	for _, r := range steps {
		got = append(got, c.Scale())
		switch r {
		case 'o':
			c.Update(true)
		case '.':
			c.Update(false)
		default:
			t.Fatalf("bad step %q in %q", r, steps)
		}
	}
	return append(got, c.Scale())
}

// The expected sequences below were worked out by hand, step by step, from
// the libraries' code as quoted in the comments of scaler.go; they are not
// computed by the code under test.
func TestSequences(t *testing.T) {
	p126 := math.Ldexp(1, 126)
	p127 := math.Ldexp(1, 127)
	tests := []struct {
		name  string
		spec  Spec
		steps string
		want  []float64 // the scale of every step, then the final scale
	}{
		{
			// growth_tracker 1, 2, 3 == interval: grow to 32 and restart;
			// every overflow halves at once and restarts the count.
			name:  "torch growth and backoff",
			spec:  Spec{Rule: Torch, Init: 16, Interval: 3},
			steps: "...o..oo...",
			want:  []float64{16, 16, 16, 32, 16, 16, 16, 8, 4, 4, 4, 8},
		},
		{
			// 4*0.5 = 2, then 2*0.5 = 1 is clamped to Min 2.
			name:  "torch min",
			spec:  Spec{Rule: Torch, Init: 4, Min: 2, Interval: 2000},
			steps: "ooo.",
			want:  []float64{4, 2, 2, 2, 2},
		},
		{
			// 8*4 = 32 is clamped to Max 16; 16*0.25 = 4; 4*4 = 16.
			name:  "torch max",
			spec:  Spec{Rule: Torch, Init: 8, Max: 16, Growth: 4, Backoff: 0.25, Interval: 1},
			steps: "..o.",
			want:  []float64{8, 16, 16, 4, 16},
		},
		{
			// 2^127*2 is inf in float32: PyTorch keeps the scale.
			name:  "torch float32 bound",
			spec:  Spec{Rule: Torch, Init: p126, Interval: 1},
			steps: "...",
			want:  []float64{p126, p127, p127, p127},
		},
		{
			// 2^126*4 is inf in float32: kept, not clamped to 2^127.
			name:  "torch float32 bound skips the growth",
			spec:  Spec{Rule: Torch, Init: p126, Growth: 4, Interval: 1},
			steps: "..",
			want:  []float64{p126, p126, p126},
		},
		{
			// hysteresis 2: the first overflow takes the tracker to 1, the
			// second to 0 and halves, the third to -1 and halves again.
			name:  "megatron hysteresis",
			spec:  Spec{Rule: Megatron, Init: 1024},
			steps: "ooo",
			want:  []float64{1024, 1024, 512, 256},
		},
		{
			// o: ht 1; .: gt 1; o: gt 0, ht 0, halve; o: ht -1, halve;
			// ...: gt 3 == interval, grow, ht 2; o: ht 1; .; o: ht 0, halve.
			name:  "megatron hysteresis refilled only by growth",
			spec:  Spec{Rule: Megatron, Init: 1024, Interval: 3},
			steps: "o.oo...o.o",
			want:  []float64{1024, 1024, 1024, 512, 256, 256, 256, 512, 512, 512, 256},
		},
		{
			// hysteresis 3: three overflows, not consecutive, back off.
			name:  "megatron hysteresis need not be consecutive",
			spec:  Spec{Rule: Megatron, Init: 64, Interval: 5, Hysteresis: 3},
			steps: "o.o.o",
			want:  []float64{64, 64, 64, 64, 64, 32},
		},
		{
			// max(4*0.5, 2) = 2, max(2*0.5, 2) = 2, ...; gt 2 == interval:
			// grow to 4.
			name:  "megatron min",
			spec:  Spec{Rule: Megatron, Init: 4, Min: 2, Interval: 2, Hysteresis: 1},
			steps: "ooo..",
			want:  []float64{4, 2, 2, 2, 2, 4},
		},
		{
			name:  "megatron max",
			spec:  Spec{Rule: Megatron, Init: 8, Max: 16, Interval: 1},
			steps: "...",
			want:  []float64{8, 16, 16, 16},
		},
		{
			// cur_hysteresis 2 -> 1 (no backoff), then 1: halve, halve.
			name:  "deepspeed hysteresis",
			spec:  Spec{Rule: DeepSpeed, Init: 1024},
			steps: "ooo",
			want:  []float64{1024, 1024, 512, 256},
		},
		{
			// iter 2: (2-(-1))%3 == 0, grow; iter 3: ch 2 -> 1, last 3;
			// iter 5: ch 1, halve, last 5; iter 6: halve, last 6; iter 9:
			// (9-6)%3 == 0, ch 2, grow; iter 10: ch 2 -> 1, last 10; iter
			// 13: (13-10)%3 == 0, ch 2, grow.
			name:  "deepspeed window from the last overflow",
			spec:  Spec{Rule: DeepSpeed, Init: 1024, Interval: 3},
			steps: "...o.oo...o...",
			want:  []float64{1024, 1024, 1024, 2048, 2048, 2048, 1024, 512, 512, 512, 1024, 1024, 1024, 1024, 2048},
		},
		{
			// delayed_shift 3: the third overflow, not consecutive, halves.
			name:  "deepspeed hysteresis need not be consecutive",
			spec:  Spec{Rule: DeepSpeed, Init: 64, Interval: 5, Hysteresis: 3},
			steps: "o.o.o",
			want:  []float64{64, 64, 64, 64, 64, 32},
		},
		{
			// delayed_shift 1: max(2/2, 1) = 1; at min DeepSpeed would raise,
			// here the scale stays 1; iter 4: (4-2)%2 == 0, grow.
			name:  "deepspeed min",
			spec:  Spec{Rule: DeepSpeed, Init: 2, Interval: 2, Hysteresis: 1},
			steps: "ooo..",
			want:  []float64{2, 1, 1, 1, 1, 2},
		},
		{
			// scale_window 1: every clean step grows; 32 is clamped to 16.
			name:  "deepspeed max",
			spec:  Spec{Rule: DeepSpeed, Init: 8, Max: 16, Interval: 1},
			steps: "..",
			want:  []float64{8, 16, 16},
		},
		{
			name:  "static",
			spec:  Spec{Rule: Static, Init: 256},
			steps: "o.o..",
			want:  []float64{256, 256, 256, 256, 256, 256},
		},
		{
			name:  "static preset",
			spec:  Spec{Rule: Static},
			steps: "o",
			want:  []float64{65536, 65536},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, tt.spec, tt.steps)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("steps %q:\n got %v\nwant %v", tt.steps, got, tt.want)
			}
		})
	}
}

// TestPresetGrowth runs the presets through their whole first interval:
// the scale grows on the Interval-th clean step, not before.
func TestPresetGrowth(t *testing.T) {
	tests := []struct {
		rule         Rule
		clean        int
		before, then float64
	}{
		{Torch, 2000, 65536, 131072},
		{Megatron, 1000, 1 << 32, 1 << 33},
		{DeepSpeed, 1000, 65536, 131072},
	}
	for _, tt := range tests {
		c := New(Spec{Rule: tt.rule})
		for i := 1; i < tt.clean; i++ {
			c.Update(false)
		}
		if c.Scale() != tt.before {
			t.Errorf("%s after %d clean steps: scale %v, want %v", tt.rule, tt.clean-1, c.Scale(), tt.before)
		}
		c.Update(false)
		if c.Scale() != tt.then {
			t.Errorf("%s after %d clean steps: scale %v, want %v", tt.rule, tt.clean, c.Scale(), tt.then)
		}
	}
}

func TestPreset(t *testing.T) {
	want := map[Rule]Spec{
		NoRule:    {},
		Static:    {Rule: Static, Init: 65536, Min: 1},
		Torch:     {Rule: Torch, Init: 65536, Growth: 2, Backoff: 0.5, Interval: 2000, Hysteresis: 1, Min: 1},
		Megatron:  {Rule: Megatron, Init: 4294967296, Growth: 2, Backoff: 0.5, Interval: 1000, Hysteresis: 2, Min: 1},
		DeepSpeed: {Rule: DeepSpeed, Init: 65536, Growth: 2, Backoff: 0.5, Interval: 1000, Hysteresis: 2, Min: 1},
	}
	for r, w := range want {
		if got := Preset(r); got != w {
			t.Errorf("Preset(%s) = %+v, want %+v", r, got, w)
		}
		if r != NoRule {
			if err := Preset(r).Validate(); err != nil {
				t.Errorf("Preset(%s) is not valid: %v", r, err)
			}
		}
	}
}

func TestString(t *testing.T) {
	want := map[Rule]string{NoRule: "none", Static: "static", Torch: "torch", Megatron: "megatron", DeepSpeed: "deepspeed", 9: "rule(9)"}
	for r, w := range want {
		if got := r.String(); got != w {
			t.Errorf("Rule(%d).String() = %q, want %q", r, got, w)
		}
	}
}

func TestWithDefaults(t *testing.T) {
	tests := []struct {
		in, want Spec
	}{
		{
			Spec{Rule: Megatron, Interval: 10},
			Spec{Rule: Megatron, Init: 4294967296, Growth: 2, Backoff: 0.5, Interval: 10, Hysteresis: 2, Min: 1},
		},
		{
			Spec{Rule: Torch, Init: 1024, Max: 4096},
			Spec{Rule: Torch, Init: 1024, Growth: 2, Backoff: 0.5, Interval: 2000, Hysteresis: 1, Min: 1, Max: 4096},
		},
		{
			Spec{Rule: DeepSpeed, Growth: 4, Backoff: 0.25, Min: 8},
			Spec{Rule: DeepSpeed, Init: 65536, Growth: 4, Backoff: 0.25, Interval: 1000, Hysteresis: 2, Min: 8},
		},
		{ // DeepSpeed's one factor: given alone, it sets the other.
			Spec{Rule: DeepSpeed, Growth: 4},
			Spec{Rule: DeepSpeed, Init: 65536, Growth: 4, Backoff: 0.25, Interval: 1000, Hysteresis: 2, Min: 1},
		},
		{
			Spec{Rule: DeepSpeed, Backoff: 0.125},
			Spec{Rule: DeepSpeed, Init: 65536, Growth: 8, Backoff: 0.125, Interval: 1000, Hysteresis: 2, Min: 1},
		},
		{ // Torch's two are apart.
			Spec{Rule: Torch, Growth: 4},
			Spec{Rule: Torch, Init: 65536, Growth: 4, Backoff: 0.5, Interval: 2000, Hysteresis: 1, Min: 1},
		},
		{
			Spec{Rule: Static, Init: 8},
			Spec{Rule: Static, Init: 8, Min: 1},
		},
		{Spec{}, Spec{}},
	}
	for _, tt := range tests {
		if got := tt.in.WithDefaults(); got != tt.want {
			t.Errorf("%+v.WithDefaults() = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		spec Spec // given to WithDefaults first
		want string
	}{
		{Spec{}, "scaler rule none is not a rule: use static, torch, megatron or deepspeed"},
		{Spec{Rule: 7}, "scaler rule rule(7) is not a rule: use static, torch, megatron or deepspeed"},
		{Spec{Rule: Torch, Init: 1000}, "init 1000 is not a power of two: scaled gradients stay exact only with powers of two; use 1024"},
		{Spec{Rule: Torch, Init: 3000}, "init 3000 is not a power of two: scaled gradients stay exact only with powers of two; use 2048"},
		{Spec{Rule: Torch, Init: -4}, "init -4 is not a power of two: scaled gradients stay exact only with powers of two; use 65536"},
		{Spec{Rule: Torch, Init: math.NaN()}, "init NaN is not a power of two: scaled gradients stay exact only with powers of two; use 65536"},
		{Spec{Rule: Torch, Init: math.Ldexp(1, 128)}, "init 3.402823669209385e+38 is above 2^127, the largest power of two a float32 holds: the libraries keep the scale in float32; use 1.7014118346046923e+38 or less"},
		{Spec{Rule: Megatron, Min: 0.5}, "min 0.5 is below 1: a scale below 1 shifts the scaled gradients down and loses their low bits; use 1"},
		{Spec{Rule: Megatron, Min: 3}, "min 3 is not a power of two: scaled gradients stay exact only with powers of two; use 4"},
		{Spec{Rule: Torch, Init: 1024, Min: 2048}, "min 2048 is above init 1024: the scale starts at init and never goes below min; use min 1024 or less"},
		{Spec{Rule: Torch, Init: 1024, Max: 512}, "init 1024 is above max 512: the scale never goes above max; use init 512 or less, or max 1024 or more"},
		{Spec{Rule: Torch, Max: 100000}, "max 100000 is not a power of two: scaled gradients stay exact only with powers of two; use 131072"},
		{Spec{Rule: Torch, Growth: 3}, "growth 3 is not a power of two: scaled gradients stay exact only with powers of two; use 4"},
		{Spec{Rule: Torch, Growth: 1}, "growth 1 is not above 1: the scale would never grow; use 2"},
		{Spec{Rule: Torch, Growth: 0.5}, "growth 0.5 is not above 1: the scale would never grow; use 2"},
		{Spec{Rule: Torch, Growth: -2}, "growth -2 is not a power of two: scaled gradients stay exact only with powers of two; use 2"},
		{Spec{Rule: Megatron, Backoff: 0.3}, "backoff 0.3 is not a power of two in (0, 1): scaled gradients stay exact only with powers of two; use 0.25"},
		{Spec{Rule: Megatron, Backoff: 0.75}, "backoff 0.75 is not a power of two in (0, 1): scaled gradients stay exact only with powers of two; use 0.5"},
		{Spec{Rule: Megatron, Backoff: 1}, "backoff 1 is not below 1: the scale would never back off; use 0.5"},
		{Spec{Rule: Megatron, Backoff: 2}, "backoff 2 is not below 1: the scale would never back off; use 0.5"},
		{Spec{Rule: Megatron, Interval: -1}, "interval -1 is below 1: it counts the clean steps before the scale grows; use 1000"},
		{Spec{Rule: DeepSpeed, Hysteresis: -2}, "hysteresis -2 is below 1: it counts the overflows before the scale backs off; use 2"},
		{Spec{Rule: Torch, Hysteresis: 2}, "torch has no hysteresis, so hysteresis 2 would be ignored: PyTorch backs off at every overflow; use 1, or megatron or deepspeed for hysteresis"},
		{Spec{Rule: DeepSpeed, Growth: 2, Backoff: 0.25}, "deepspeed backoff 0.25 is not 1/growth: DeepSpeed has one scale_factor, it multiplies by it to grow and divides by it to back off; use backoff 0.5"},
		{Spec{Rule: DeepSpeed, Growth: 4, Backoff: 0.5}, "deepspeed backoff 0.5 is not 1/growth: DeepSpeed has one scale_factor, it multiplies by it to grow and divides by it to back off; use backoff 0.25"},
		{Spec{Rule: Static, Growth: 2}, "static scale has growth 2, backoff 0, interval 0, hysteresis 0: a static scale never changes; leave them out, or use torch, megatron or deepspeed"},
		{Spec{Rule: Static, Init: 6}, "init 6 is not a power of two: scaled gradients stay exact only with powers of two; use 8"},
	}
	for _, tt := range tests {
		err := tt.spec.WithDefaults().Validate()
		if err == nil {
			t.Errorf("%+v: no error, want %q", tt.spec, tt.want)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("%+v:\n got %q\nwant %q", tt.spec, err.Error(), tt.want)
		}
	}

	valid := []Spec{
		{Rule: Torch, Init: 1, Min: 1, Max: 1},
		{Rule: Torch, Init: math.Ldexp(1, 127)},
		{Rule: Megatron, Growth: 4, Backoff: 0.125, Interval: 1, Hysteresis: 1, Max: 1 << 40},
		{Rule: DeepSpeed, Growth: 8, Backoff: 0.125, Hysteresis: 5},
		{Rule: Static, Init: 1, Max: 2},
	}
	for _, s := range valid {
		if err := s.WithDefaults().Validate(); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
}

func TestNewPanicsOnInvalid(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New of an invalid spec did not panic")
		}
	}()
	New(Spec{Rule: Torch, Init: 1000})
}

// TestRestore saves the state of every rule in the middle of a sequence,
// through JSON as a checkpoint would, and checks that a fresh scaler
// restored from it continues exactly as the first.
func TestRestore(t *testing.T) {
	specs := []Spec{
		{Rule: Static, Init: 32},
		{Rule: Torch, Init: 1024, Interval: 3},
		{Rule: Megatron, Init: 1024, Interval: 3, Hysteresis: 3},
		{Rule: DeepSpeed, Init: 1024, Interval: 3, Hysteresis: 3},
	}
	const before, after = "..o.oo.", "o..o...oooo......o."
	for _, spec := range specs {
		a := New(spec)
		for _, r := range before {
			a.Update(r == 'o')
		}
		data, err := json.Marshal(a.State())
		if err != nil {
			t.Fatal(err)
		}
		var st State
		if err := json.Unmarshal(data, &st); err != nil {
			t.Fatal(err)
		}
		if st != a.State() {
			t.Fatalf("%s: state %+v came back from JSON %s as %+v", spec.Rule, a.State(), data, st)
		}
		b := New(spec)
		if err := b.Restore(st); err != nil {
			t.Fatalf("%s: %v", spec.Rule, err)
		}
		for i, r := range after {
			if a.Scale() != b.Scale() || a.State() != b.State() {
				t.Fatalf("%s: step %d after restoring: %+v, want %+v", spec.Rule, i, b.State(), a.State())
			}
			a.Update(r == 'o')
			b.Update(r == 'o')
		}
	}
}

// TestRestoreState pins the JSON names and the state mid-sequence.
func TestRestoreState(t *testing.T) {
	c := New(Spec{Rule: DeepSpeed, Init: 1024, Interval: 3})
	for _, r := range "...o." {
		c.Update(r == 'o')
	}
	// iter 2 grows to 2048, iter 3 overflows (ch 2 -> 1, last 3), iter 4
	// is clean: cur_iter 5.
	want := State{Scale: 2048, HysteresisTracker: 1, Iter: 5, LastOverflowIter: 3}
	if c.State() != want {
		t.Errorf("state %+v, want %+v", c.State(), want)
	}
	data, _ := json.Marshal(c.State())
	const wantJSON = `{"scale":2048,"growth_tracker":0,"hysteresis_tracker":1,"iter":5,"last_overflow_iter":3}`
	if string(data) != wantJSON {
		t.Errorf("JSON %s, want %s", data, wantJSON)
	}
}

func TestRestoreRejects(t *testing.T) {
	tests := []struct {
		spec Spec
		st   State
		want string
	}{
		{Spec{Rule: Torch, Init: 1024, Interval: 3}, State{Scale: 1000}, "restoring the torch scaler: scale 1000 is not a power of two in [1, 1.7014118346046923e+38]"},
		{Spec{Rule: Torch, Init: 1024, Max: 2048}, State{Scale: 4096}, "restoring the torch scaler: scale 4096 is not a power of two in [1, 2048]"},
		{Spec{Rule: Torch, Init: 1024, Interval: 3}, State{Scale: 1024, GrowthTracker: 3}, "restoring the torch scaler: growth tracker 3 is not in [0, 3)"},
		{Spec{Rule: Torch, Init: 1024}, State{Scale: 1024, HysteresisTracker: 1}, "restoring the torch scaler: a torch scaler keeps only its scale and growth tracker"},
		{Spec{Rule: Megatron, Init: 1024}, State{Scale: 1024, HysteresisTracker: 3}, "restoring the megatron scaler: hysteresis tracker 3 is above hysteresis 2"},
		{Spec{Rule: DeepSpeed, Init: 1024}, State{Scale: 1024, HysteresisTracker: 0, LastOverflowIter: -1}, "restoring the deepspeed scaler: hysteresis tracker 0 is not in [1, 2]"},
		{Spec{Rule: DeepSpeed, Init: 1024}, State{Scale: 1024, HysteresisTracker: 2, Iter: 4, LastOverflowIter: 4}, "restoring the deepspeed scaler: last overflow at 4 is not before iteration 4"},
		{Spec{Rule: Static, Init: 1024}, State{Scale: 1024, Iter: 1}, "restoring the static scaler: a static scaler keeps only its scale"},
	}
	for _, tt := range tests {
		c := New(tt.spec)
		before := c.State()
		err := c.Restore(tt.st)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%+v: Restore(%+v) = %v, want %q", tt.spec, tt.st, err, tt.want)
		}
		if c.State() != before {
			t.Errorf("%+v: a rejected Restore changed the state to %+v", tt.spec, c.State())
		}
	}
}

// FuzzScaler runs random specs through random overflow sequences. The
// scale must always be a power of two in [Min, Max] (Max 0: MaxScale);
// restoring the state at any step, through JSON, must give the same
// continuation; and, as their libraries' code makes them, Torch must run
// as Megatron with hysteresis 1, and Megatron as DeepSpeed when Backoff is
// 1/Growth (a cross-check of three separately written rules).
func FuzzScaler(f *testing.F) {
	f.Add(uint8(0), uint8(3), uint8(0), uint8(1), uint8(0), uint8(0), uint8(2), uint8(1), []byte{0x00, 0xff, 0x0f, 0x00, 0x00}, uint16(7))
	f.Add(uint8(1), uint8(10), uint8(2), uint8(2), uint8(1), uint8(1), uint8(0), uint8(0), []byte{0x81, 0x00, 0x00, 0x42}, uint16(12))
	f.Add(uint8(2), uint8(0x85), uint8(0), uint8(0), uint8(0), uint8(0), uint8(0), uint8(2), []byte{0x00, 0x00, 0x00, 0x00, 0x10, 0x00}, uint16(20))
	f.Add(uint8(3), uint8(15), uint8(7), uint8(4), uint8(2), uint8(2), uint8(4), uint8(3), []byte{0xaa, 0x55, 0x01}, uint16(3))
	f.Fuzz(func(t *testing.T, rule, initE, minE, maxE, growthE, backoffE, interval, hysteresis uint8, steps []byte, cut uint16) {
		s := Spec{Rule: Rule(1 + rule%4)}
		lo := int(minE % 8)
		in := lo + int(initE%16)
		if initE&0x80 != 0 {
			in = 120 + int(initE%8) // near float32's bound
		}
		s.Min = math.Ldexp(1, lo)
		s.Init = math.Ldexp(1, in)
		if maxE%3 != 0 {
			s.Max = math.Ldexp(1, min(in+int(maxE%8), 127))
		}
		if s.Rule != Static {
			s.Growth = math.Ldexp(1, 1+int(growthE%3))
			s.Backoff = math.Ldexp(1, -1-int(backoffE%3))
			s.Interval = 1 + int(interval%5)
			s.Hysteresis = 1 + int(hysteresis%4)
		}
		switch s.Rule {
		case Torch:
			s.Hysteresis = 1
		case DeepSpeed:
			s.Backoff = 1 / s.Growth
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("the fuzz built an invalid spec %+v: %v", s, err)
		}
		if len(steps) > 512 {
			steps = steps[:512]
		}
		overflows := make([]bool, 0, 8*len(steps))
		for _, b := range steps {
			for i := 0; i < 8; i++ {
				overflows = append(overflows, b>>i&1 == 1)
			}
		}

		// The twin runs the same sequence under another rule that the
		// libraries' code makes equivalent.
		var twin *Scaler
		switch {
		case s.Rule == Torch:
			m := s
			m.Rule = Megatron
			twin = New(m)
		case s.Rule == Megatron && s.Growth*s.Backoff == 1:
			d := s
			d.Rule = DeepSpeed
			twin = New(d)
		case s.Rule == DeepSpeed:
			m := s
			m.Rule = Megatron
			twin = New(m)
		}

		hi := s.Max
		if hi == 0 {
			hi = MaxScale
		}
		at := int(cut) % (len(overflows) + 1)
		a := New(s)
		var b *Scaler
		for i := 0; i <= len(overflows); i++ {
			x := a.Scale()
			if !isPow2(x) || x < s.Min || x > hi {
				t.Fatalf("%+v step %d: scale %v is not a power of two in [%v, %v]", s, i, x, s.Min, hi)
			}
			if twin != nil && twin.Scale() != x {
				t.Fatalf("%+v step %d: scale %v, but its %s twin has %v", s, i, x, twin.Spec().Rule, twin.Scale())
			}
			if i == at {
				data, err := json.Marshal(a.State())
				if err != nil {
					t.Fatal(err)
				}
				var st State
				if err := json.Unmarshal(data, &st); err != nil {
					t.Fatal(err)
				}
				b = New(s)
				if err := b.Restore(st); err != nil {
					t.Fatalf("%+v step %d: restoring its own state %+v: %v", s, i, st, err)
				}
			}
			if b != nil && b.State() != a.State() {
				t.Fatalf("%+v step %d: restored at step %d, state %+v, want %+v", s, i, at, b.State(), a.State())
			}
			if i == len(overflows) {
				break
			}
			a.Update(overflows[i])
			if b != nil {
				b.Update(overflows[i])
			}
			if twin != nil {
				twin.Update(overflows[i])
			}
		}
	})
}
