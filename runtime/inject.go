package runtime

// --overflow: overflows injected into gradients on demand, so that users
// and tests can watch the loss scaler skip steps and back off.

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/syncgen/syncgen/runtime/internal/engine"
	"github.com/syncgen/syncgen/runtime/internal/hetero"
	"github.com/syncgen/syncgen/runtime/internal/plan"
	"github.com/syncgen/syncgen/runtime/internal/proc"
)

// overflowFlag collects --overflow STEP:RANK:TENSOR[=inf|-inf|nan], a
// flag that may be given many times; the values are resolved against the
// plan by resolveInjections.
type overflowFlag struct{ specs *[]string }

func (f overflowFlag) String() string {
	if f.specs == nil {
		return ""
	}
	return strings.Join(*f.specs, ",")
}

func (f overflowFlag) Set(s string) error {
	*f.specs = append(*f.specs, s)
	return nil
}

// resolveInjections turns the --overflow values into injections: the
// tensor must exist and have float gradients, the step must be one the
// run has, the rank one the world has (where the launcher says its size
// before MPI starts; the runtime checks again after), and the plan must
// have a scaler to notice.
func resolveInjections(p *plan.Plan, specs []string, totalSteps int) ([]engine.Injection, error) {
	var out []engine.Injection
	for _, spec := range specs {
		in, err := parseInjection(p, spec, totalSteps)
		if err != nil {
			return nil, fmt.Errorf("--overflow %q: %w", spec, err)
		}
		out = append(out, in)
	}
	if len(out) > 0 && p.Scaler == nil {
		return nil, fmt.Errorf("--overflow: the plan has no scaler, so nothing would notice the overflow; declare one (scaler dynamic) and unscale the gradients")
	}
	return out, nil
}

func parseInjection(p *plan.Plan, spec string, totalSteps int) (engine.Injection, error) {
	const form = "want STEP:RANK:TENSOR[=inf|-inf|nan], e.g. 5:0:fc.weight=nan"
	parts := strings.SplitN(spec, ":", 3)
	if len(parts) != 3 {
		return engine.Injection{}, fmt.Errorf("%s", form)
	}
	step, err := strconv.Atoi(parts[0])
	if err != nil || step < 0 {
		return engine.Injection{}, fmt.Errorf("step %q is not a step number (counted from 0, warm-up included); %s", parts[0], form)
	}
	if step >= totalSteps {
		return engine.Injection{}, fmt.Errorf("step %d is past the run's last step, %d (warm-up included, counted from 0)", step, totalSteps-1)
	}
	rank, err := strconv.Atoi(parts[1])
	if err != nil || rank < 0 {
		return engine.Injection{}, fmt.Errorf("rank %q is not a rank number (from 0); %s", parts[1], form)
	}
	if size, ok := proc.LauncherSize(); ok && rank >= size {
		return engine.Injection{}, fmt.Errorf("rank %d is outside %s", rank, hetero.World(size))
	}
	name, value := parts[2], math.Inf(1)
	if i := strings.LastIndex(name, "="); i >= 0 {
		switch strings.ToLower(name[i+1:]) {
		case "inf", "+inf":
		case "-inf":
			value = math.Inf(-1)
		case "nan":
			value = math.NaN()
		default:
			return engine.Injection{}, fmt.Errorf("value %q: want inf, -inf or nan", name[i+1:])
		}
		name = name[:i]
	}
	for t, tn := range p.Tensors {
		if tn.Name != name {
			continue
		}
		switch {
		case tn.Frozen:
			return engine.Injection{}, fmt.Errorf("tensor %q is frozen: it has no gradient", name)
		case !tn.DType.IsFloat():
			return engine.Injection{}, fmt.Errorf("tensor %q is %s: only float gradients hold inf or NaN", name, tn.DType)
		}
		return engine.Injection{Tensor: t, Rank: rank, Step: step, Value: value, Spec: spec}, nil
	}
	return engine.Injection{}, fmt.Errorf("the plan has no tensor %q", name)
}

// checkInjectionRanks refuses injections on ranks outside the world of
// size, once MPI has said how large it is.
func checkInjectionRanks(in []engine.Injection, size int) error {
	for _, x := range in {
		if x.Rank >= size {
			return fmt.Errorf("--overflow: rank %d is outside %s", x.Rank, hetero.World(size))
		}
	}
	return nil
}

// injectionsFrom splits in into the injections at step first or later,
// which a run that starts at step first makes, and the flag values of
// those before it.
func injectionsFrom(in []engine.Injection, first int) (kept []engine.Injection, before []string) {
	for _, x := range in {
		if x.Step < first {
			before = append(before, strconv.Quote(x.Spec))
			continue
		}
		kept = append(kept, x)
	}
	return kept, before
}

// checkInjectionsAfter refuses injections into steps that a resumed run
// does not run: it starts at step first, after its checkpoint.
func checkInjectionsAfter(in []engine.Injection, first int) error {
	for _, x := range in {
		if x.Step < first {
			return fmt.Errorf("--overflow %q: step %d is before this run's first: it resumes from the checkpoint after %s (steps 0 to %d) and starts at step %d; give step %d or later", x.Spec, x.Step, stepCount(first), first-1, first, first)
		}
	}
	return nil
}
