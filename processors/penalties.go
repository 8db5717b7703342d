package processors

import (
	"fmt"

	"github.com/loomlm/loom/core"
)

// Scope says which tokens of a sequence a penalty counts.
type Scope int

const (
	// ScopeAll counts prompt and generated tokens, as llama.cpp (its server and CLI feed the
	// prompt to the sampler, then keep the last repeat_last_n = 64), transformers
	// (repetition_penalty over the whole input) and vLLM's repetition_penalty do.
	ScopeAll Scope = iota
	// ScopeGenerated counts generated tokens only, as vLLM's (and OpenAI's) frequency and
	// presence penalties do.
	ScopeGenerated
)

// ParseScope reads a scope as written in pipelines: "all" or "generated".
func ParseScope(s string) (Scope, error) {
	switch s {
	case "all":
		return ScopeAll, nil
	case "generated":
		return ScopeGenerated, nil
	}
	return 0, &core.ParamError{Param: "scope", Value: s, Reason: `must be "all" or "generated"`}
}

// String returns the scope as written in pipelines.
func (s Scope) String() string {
	if s == ScopeGenerated {
		return "generated"
	}
	return "all"
}

// Window selects the tokens a penalty counts: those of Scope, and of them only the last LastN.
// LastN = WholeHistory (-1) counts every token of the scope and LastN = 0 disables the penalty,
// as llama.cpp's repeat_last_n (whose default, 64, is LastN = 64 here) and as DRY's
// penalty_last_n; any other negative value is an error. The zero Window is therefore a
// disabled one: write Window{LastN: WholeHistory} for the whole sequence.
type Window struct {
	Scope Scope
	LastN int
}

// Penalties penalises tokens that already occur in the sequence. With count(i) the number of
// occurrences of token i in the window (see Window), every token with count(i) ≥ 1 gets
//
//	repetition: logit > 0 ? logit / repeat : logit · repeat   (CTRL, Keskar et al. 2019)
//	frequency:  logit −= frequency · count(i)
//	presence:   logit −= presence
//
// in that order; tokens absent from the window are untouched. repeat = 1, frequency = 0 and
// presence = 0 disable each part; a window of LastN = 0 disables them all. A finite logit that
// the frequency or presence part pushes beyond the float32 range is clamped to the largest
// float32 (upwards; the count multiplies the penalty) or becomes -Inf, a ban (downwards), as
// DRY's penalty does. NewRepetitionPenalty, NewFrequencyPenalty and
// NewPresencePenalty build one part alone; NewPenalties all three in one pass, the same as
// the three in a chain with the same window (llama.cpp's combined sampler).
//
// Penalties is stateful: it keeps the counts of its window and follows the sequence through
// Accept, so a step costs O(distinct tokens in the window) — never a pass over the vocabulary
// or the sequence. The session clones it per sequence. On first use (and whenever the
// sequence is not the continuation of what it has seen, after a rollback say) it counts the
// window from seq.Tokens(). On a sorted sparse set the penalised logits may break the order,
// so the set is marked unsorted. NaN and ±Inf logits pass through.
type Penalties struct {
	name                   string
	repeat, freq, presence float32
	window                 Window
	counts                 tokenCounts
	seen                   int          // tokens of the sequence counted so far
	last                   core.TokenID // the last of them
	ready                  bool
	rev                    uint64 // the sequence's Revision when counted
}

// NewPenalties returns the combined penalty processor ("penalties"): repeat must be in
// [2^-126, 3.4e38] (a normal float32, so that dividing by it stays finite), frequency and
// presence within the float32 range (negative values encourage repetition), w.LastN ≥ -1.
func NewPenalties(repeat, frequency, presence float64, w Window) (*Penalties, error) {
	return newPenalties("penalties", repeat, frequency, presence, w, "repeat", "frequency", "presence")
}

// NewRepetitionPenalty returns the repetition penalty ("repetition_penalty"): positive logits
// of tokens in the window are divided by penalty, negative ones multiplied by it; penalty must
// be in [2^-126, 3.4e38] (1 disables, below 1 encourages repetition).
func NewRepetitionPenalty(penalty float64, w Window) (*Penalties, error) {
	return newPenalties("repetition_penalty", penalty, 0, 0, w, "penalty", "", "")
}

// NewFrequencyPenalty returns the frequency penalty ("frequency_penalty"): logit −= penalty ×
// count; penalty must be within the float32 range.
func NewFrequencyPenalty(penalty float64, w Window) (*Penalties, error) {
	return newPenalties("frequency_penalty", 1, penalty, 0, w, "", "penalty", "")
}

// NewPresencePenalty returns the presence penalty ("presence_penalty"): logit −= penalty for
// every token in the window, however often; penalty must be within the float32 range.
func NewPresencePenalty(penalty float64, w Window) (*Penalties, error) {
	return newPenalties("presence_penalty", 1, 0, penalty, w, "", "", "penalty")
}

func newPenalties(name string, repeat, freq, presence float64, w Window, repeatParam, freqParam, presenceParam string) (*Penalties, error) {
	if err := checkFloat(repeatParam, repeat, divisor32, "1 disables"); err != nil {
		return nil, err
	}
	if err := checkFloat(freqParam, freq, float32Range, "0 disables"); err != nil {
		return nil, err
	}
	if err := checkFloat(presenceParam, presence, float32Range, "0 disables"); err != nil {
		return nil, err
	}
	if err := checkLastN("last_n", w.LastN, "the whole scope"); err != nil {
		return nil, err
	}
	if w.Scope != ScopeAll && w.Scope != ScopeGenerated {
		return nil, &core.ParamError{Param: "scope", Value: int(w.Scope), Reason: "unknown scope"}
	}
	return &Penalties{name: name, repeat: float32(repeat), freq: float32(freq), presence: float32(presence), window: w}, nil
}

// Name implements core.LogitsProcessor.
func (p *Penalties) Name() string { return p.name }

func (p *Penalties) disabled() bool {
	return p.window.LastN == 0 || p.repeat == 1 && p.freq == 0 && p.presence == 0
}

// Process implements core.LogitsProcessor.
func (p *Penalties) Process(seq *core.Sequence, c *core.Candidates) error {
	if p.disabled() {
		return nil
	}
	p.follow(seq)
	if p.counts.n == 0 {
		return nil
	}
	if row := c.Dense(); row != nil {
		for i, id := range p.counts.ids {
			if id >= 0 && int(id) < len(row) {
				row[id] = p.penalise(row[id], p.counts.counts[i])
			}
		}
		return nil
	}
	items := c.Items()
	changed := false
	for i, it := range items {
		if n := p.counts.get(it.ID); n > 0 {
			items[i].Logit = p.penalise(it.Logit, n)
			changed = true
		}
	}
	if changed {
		c.MarkUnsorted()
	}
	return nil
}

// penalise applies the three parts to a logit seen count times. NaN and ±Inf pass through; a
// finite logit pushed past the float32 range is clamped to its largest value upwards and
// becomes -Inf (banned) downwards.
func (p *Penalties) penalise(v float32, count int32) float32 {
	if !(v > negInf && v <= maxFloat32) {
		return v
	}
	if p.repeat != 1 {
		if v > 0 {
			v = min(v/p.repeat, maxFloat32)
		} else {
			v *= p.repeat
			if v == negInf {
				return v
			}
		}
	}
	return min(v-(p.freq*float32(count)+p.presence), maxFloat32)
}

// Accept implements core.StatefulProcessor.
func (p *Penalties) Accept(seq *core.Sequence, _ core.TokenID) {
	if !p.disabled() {
		p.follow(seq)
	}
}

// Clone implements core.StatefulProcessor.
func (p *Penalties) Clone() core.StatefulProcessor {
	c := *p
	c.counts = p.counts.clone()
	return &c
}

// follow brings the counts up to date with seq's tokens: incrementally when seq continues what
// was counted, from scratch otherwise.
func (p *Penalties) follow(seq *core.Sequence) {
	tokens, promptLen := tokensOf(seq)
	var rev uint64
	if seq != nil {
		rev = seq.Revision()
	}
	start := 0
	if p.window.Scope == ScopeGenerated {
		start = promptLen
	}
	if !p.ready || p.rev != rev || p.seen > len(tokens) || (p.seen > 0 && tokens[p.seen-1] != p.last) {
		p.rev = rev
		if p.counts.ids == nil {
			p.counts.grow()
		}
		p.counts.reset()
		p.seen = len(tokens)
		from := start
		if n := p.window.LastN; n > 0 {
			from = max(from, len(tokens)-n)
		}
		for _, id := range tokens[min(from, len(tokens)):] {
			p.counts.add(id, 1)
		}
		p.ready = true
	}
	for j := p.seen; j < len(tokens); j++ {
		if j >= start {
			p.counts.add(tokens[j], 1)
		}
		if n := p.window.LastN; n > 0 && j-n >= start {
			p.counts.add(tokens[j-n], -1)
		}
	}
	p.seen = len(tokens)
	if p.seen > 0 {
		p.last = tokens[p.seen-1]
	}
}

// String describes the processor and its window, for traces and errors.
func (p *Penalties) String() string {
	return fmt.Sprintf("%s(repeat %g, frequency %g, presence %g, scope %s, last_n %d)",
		p.name, p.repeat, p.freq, p.presence, p.window.Scope, p.window.LastN)
}
