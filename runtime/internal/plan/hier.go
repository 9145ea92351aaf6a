package plan

// Hierarchical reports whether any collective of the program (init, step,
// groups included) is an allreduce with `algo hierarchical`.
// A nil program has none.
func (p *Program) Hierarchical() bool {
	if p == nil {
		return false
	}
	var has func(ss []Stmt) bool
	has = func(ss []Stmt) bool {
		for _, s := range ss {
			if s.Hier || has(s.Body) {
				return true
			}
		}
		return false
	}
	return has(p.Init) || has(p.Step)
}
