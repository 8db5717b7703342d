package processors

import (
	"math"
	"math/bits"
	"math/rand/v2"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/fastmath"
)

// XTC is "exclude top choices" (from text-generation-webui, as in llama.cpp and koboldcpp): at a
// step chosen at random with the given probability, it removes every token whose probability
// is at least threshold except the least probable of them, steering generation away from the
// most predictable continuations while keeping one viable one:
//
//	A = { i : p(i) ≥ threshold };  with probability `probability`, when |A| ≥ 2:
//	remove A \ {a},  a = the member of A with the lowest logit (equal logits: the largest id)
//
// and only if at least minKeep tokens with a non-zero probability remain. A threshold above
// 0.5 disables it (at most one token can reach it), as does probability 0.
//
// The coin comes from the request's random scheme: sequence i of a request with seed s draws
// its coins in order from core.DeriveStream(s, i, "xtc"), one per step at which XTC runs,
// whatever else the step does — independent of the sampling stream, of other sequences and of
// the batch. XTC is therefore a core.StatefulProcessor: the session gives every sequence its own
// instance, which binds to that sequence's stream the first time it runs. A Clone keeps the
// position in the stream (so a speculative rollback replays the same coins); a clone that then
// runs for another sequence — a fork: a new sample or beam, with its own index — starts that
// sequence's stream from its beginning. Without a sequence (nil) the stream of seed 0, index 0
// is used.
//
// Cost when the coin says no: nothing but the draw. Otherwise a maximum, an exponential pass for
// the normaliser and one vectorised pass for the members of A (at most 1/threshold of them),
// which are banned in place on a dense row or removed from a sparse set (a sorted set stays
// sorted). NaN or +Inf logits and an all-banned set are errors when it acts.
type XTC struct {
	threshold, probability float64
	lnThreshold            float64
	minKeep                int

	// The coin stream of the sequence the instance runs for.
	bound bool
	seed  uint64
	index int
	draws int
	rng   *rand.Rand // nil after Clone until the next draw re-derives it
}

// NewXTC returns an XTC processor: threshold in (0, 1], probability in [0, 1], minKeep ≥ 1.
func NewXTC(threshold, probability float64, minKeep int) (*XTC, error) {
	if err := checkFloat("threshold", threshold, halfOpenUnit, "above 0.5 disables"); err != nil {
		return nil, err
	}
	if err := checkFloat("probability", probability, unitInterval, "0 disables"); err != nil {
		return nil, err
	}
	if err := checkMinKeep(minKeep); err != nil {
		return nil, err
	}
	return &XTC{threshold: threshold, probability: probability, lnThreshold: math.Log(threshold), minKeep: minKeep}, nil
}

// Name implements core.LogitsProcessor.
func (p *XTC) Name() string { return "xtc" }

func (p *XTC) enabled() bool { return p.probability > 0 && p.threshold <= 0.5 }

// Process implements core.LogitsProcessor.
func (p *XTC) Process(seq *core.Sequence, c *core.Candidates) error {
	if !p.enabled() {
		return nil
	}
	if p.coin(seq) >= p.probability {
		return nil
	}
	return p.exclude(c)
}

// coin returns the sequence's next draw in [0, 1).
func (p *XTC) coin(seq *core.Sequence) float64 {
	var seed uint64
	index := 0
	if seq != nil {
		seed, index = seq.Seed(), seq.Index()
	}
	switch {
	case !p.bound || p.seed != seed || p.index != index:
		p.bound, p.seed, p.index, p.draws = true, seed, index, 0
		p.rng = core.DeriveStream(seed, index, "xtc")
	case p.rng == nil:
		p.rng = core.DeriveStream(seed, index, "xtc")
		for range p.draws {
			p.rng.Uint64() // Float64 consumes one Uint64 per draw
		}
	}
	p.draws++
	return p.rng.Float64()
}

// exclude removes the top choices from c.
func (p *XTC) exclude(c *core.Candidates) error {
	n := c.Len()
	if n == 0 {
		return core.ErrNoCandidates
	}
	logits := c.Logits()
	m, err := finiteMax(logits, c)
	if err != nil {
		return err
	}
	logZ, _, _ := logNormaliser(c, logits, m)
	// p(i) ≥ threshold ⇔ logit(i) ≥ log Z + ln threshold.
	thr := float32(logZ + p.lnThreshold)
	if float64(thr) < logZ+p.lnThreshold {
		thr = math.Nextafter32(thr, float32(math.Inf(1)))
	}
	below := math.Nextafter32(thr, negInf)
	// At most ⌊1/threshold⌋ tokens reach the threshold; rounding may admit one more.
	top := c.ScratchItems(min(n, int(1/p.threshold)+2))[:0]
	if row := c.Dense(); row != nil {
		var words [maskChunk / 64]uint64
		for base := 0; base < len(row); base += maskChunk {
			end := min(base+maskChunk, len(row))
			fastmath.MaskAbove(words[:], row[base:end], below)
			for k, word := range words[:(end-base+63)/64] {
				for ; word != 0; word &= word - 1 {
					i := base + 64*k + bits.TrailingZeros64(word)
					top = append(top, core.Candidate{ID: core.TokenID(i), Logit: row[i]})
				}
			}
		}
	} else {
		for _, it := range c.Items() {
			if it.Logit > below {
				top = append(top, it)
			}
		}
	}
	if len(top) < 2 {
		return nil
	}
	// Keep the lowest-ranked member of A; remove the others.
	keep := 0
	for i, it := range top {
		if ranksBelow(it, top[keep]) {
			keep = i
		}
	}
	top[keep] = top[len(top)-1]
	top = top[:len(top)-1]
	if p.minKeep > 1 && countFinite(c)-len(top) < p.minKeep {
		return nil
	}
	if row := c.Dense(); row != nil {
		for _, it := range top {
			row[it.ID] = negInf
		}
		return nil
	}
	removeIDs(c, top)
	return nil
}

// countFinite counts the entries of c that are not banned.
func countFinite(c *core.Candidates) int {
	n := 0
	for _, v := range c.Logits() {
		if v > negInf {
			n++
		}
	}
	return n
}

// Accept implements core.StatefulProcessor; XTC follows its coin stream, not the tokens.
func (p *XTC) Accept(*core.Sequence, core.TokenID) {}

// Clone implements core.StatefulProcessor: the copy keeps the position in the coin stream and
// re-derives the stream when it next draws.
func (p *XTC) Clone() core.StatefulProcessor {
	c := *p
	c.rng = nil
	return &c
}
