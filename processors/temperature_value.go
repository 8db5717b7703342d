package processors

// T returns the processor's temperature (0 means greedy).
func (p *Temperature) T() float64 { return float64(p.t) }
