package costmodel

// BusFactor is nccl-tests' factor from algorithm bandwidth (bytes over
// time) to bus bandwidth for collective coll on n ranks: 2(n-1)/n for
// allreduce, (n-1)/n for allgather and reducescatter, 1 for broadcast and
// reduce. It is the rule of the runtime's report (plan.CollInfo's
// BusFactor; a test holds them equal), so that a predicted busbw reads
// like a measured one: at one rank, 0 for allreduce, allgather and
// reducescatter, which move nothing between ranks. (0 for n < 1.)
func BusFactor(coll string, n int) float64 {
	if n < 1 {
		return 0
	}
	switch coll {
	case "allreduce":
		return 2 * float64(n-1) / float64(n)
	case "allgather", "reducescatter":
		return float64(n-1) / float64(n)
	}
	return 1
}

// costFactor is the bus factor of the cost model: BusFactor, but 1 at one
// rank, where a collective is a copy of its bytes, so that a profile
// measured at one rank keeps its bandwidth as the copy's and a one-rank
// prediction still pays for the bytes.
func costFactor(coll string, n int) float64 {
	if n <= 1 {
		return 1
	}
	return BusFactor(coll, n)
}

// Steps is the number of a ring algorithm's steps for collective coll on
// n ranks, as NCCL's tuning model counts them: 2(n-1) for allreduce, n-1
// for allgather and reducescatter, n for broadcast and reduce.
func Steps(coll string, n int) int {
	if n <= 1 {
		return 0
	}
	switch coll {
	case "allreduce":
		return 2 * (n - 1)
	case "allgather", "reducescatter":
		return n - 1
	}
	return n
}

// Us returns the segment's time in microseconds for a collective coll of
// bytes on n ranks.
func (s *Segment) Us(coll string, bytes int64, n int) float64 {
	t := s.AlphaUs + s.StepUs*float64(Steps(coll, n))
	if s.BusGBs > 0 {
		t += float64(bytes) * costFactor(coll, n) / (s.BusGBs * 1e3)
	}
	return t
}

// Us returns the curve's time in microseconds for bytes on n ranks.
func (c *Curve) Us(bytes int64, n int) float64 {
	lat, bw := c.split(bytes, n)
	return lat + bw
}

// CollectiveUs returns the predicted time in microseconds of collective
// coll (op, on dtype) of bytes on n ranks.
func (p *Profile) CollectiveUs(coll, op, dtype string, bytes int64, n int) (float64, error) {
	c, err := p.Curve(coll, op, dtype)
	if err != nil {
		return 0, err
	}
	return c.Us(bytes, n), nil
}

// MemUs returns the time in microseconds of memory work that reads and
// writes bytes in all, at the profile's memory bandwidth (0 when the
// profile has none: not modelled).
func (p *Profile) MemUs(bytes int64) float64 {
	if p.MemGBs <= 0 {
		return 0
	}
	return float64(bytes) / (p.MemGBs * 1e3)
}
