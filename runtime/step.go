package runtime

// Step is the handle the generated step function issues its work through.
type Step struct {
	e *engine
}

type engine struct{}
