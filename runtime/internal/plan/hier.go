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

// AllAllreducesHierarchical reports whether the program has allreduces and
// every one of them (init, step, groups included) has `algo hierarchical`.
func (p *Program) AllAllreducesHierarchical() bool {
	if p == nil {
		return false
	}
	any, all := false, true
	var walk func(ss []Stmt)
	walk = func(ss []Stmt) {
		for _, s := range ss {
			if s.Kind != StmtGroup && s.Coll == CollAllReduce {
				any = true
				all = all && s.Hier
			}
			walk(s.Body)
		}
	}
	walk(p.Init)
	walk(p.Step)
	return any && all
}
