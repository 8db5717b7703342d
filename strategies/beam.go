package strategies

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
)

// BeamConfig configures beam search.
type BeamConfig struct {
	// NumBeams is the number of live hypotheses kept per step (≥ 1).
	NumBeams int
	// NumReturn is how many finished sequences are returned, best first (1 ≤ NumReturn ≤
	// NumBeams). A request for more than one sample (core.Request.N > 1) gets N instead, and
	// fails when N > NumBeams.
	NumReturn int
	// LengthPenalty α ranks a finished sequence by sum(logprobs) / length^α, length counting
	// the generated tokens (a final EOS included). α = 0 ranks by raw sums; α > 0 favours
	// longer sequences.
	LengthPenalty float64
	// EarlyStopping chooses when the search ends:
	//   - false (default): when NumReturn sequences have finished and no live beam can beat the
	//     worst of them any more — a live beam's sum only decreases, so its best possible
	//     score is sum / max_length^α for α > 0 and sum / length^α otherwise. The result is
	//     then exactly the best NumReturn sequences beam search can reach.
	//   - true: as soon as NumReturn sequences have finished (the first complete set).
	EarlyStopping bool
	// NoRepeatNGram, when > 0, bans any token that would repeat an n-gram of that size already
	// in the beam (prompt included).
	NoRepeatNGram int
	// DoSample draws the 2·NumBeams candidates of each step without replacement from the
	// softmax of the beams' cumulative scores (beam multinomial sampling) instead of taking the
	// best ones; draws come from sequence 0's stream.
	DoSample bool
	// CopyForks makes every new beam a full copy of its parent's cache instead of a
	// copy-on-write fork, where the model's state supports it (for measuring what sharing
	// saves).
	CopyForks bool
}

// Beam is beam search. At every step each live beam's logits go through the pipeline's
// processors (without DoSample, a temperature of 0 is not applied: see greedyTemperature); candidates are ranked by the beam's summed log-probability plus the processed
// log-probability of the token; the best 2·NumBeams (beam, token) pairs are walked in order: a
// pair ending in an end-of-generation token (among the first NumBeams) is set aside as a
// finished sequence, the others become the next beams until NumBeams are live. New beams fork
// their parent (the cache shares the prefix copy-on-write) and run as rows of one batched
// forward. A beam finished by a stopping criterion or the token limit is set aside too.
type Beam struct {
	cfg      BeamConfig
	noRepeat *processors.NoRepeatNGram
}

// NewBeam validates cfg and returns the strategy.
func NewBeam(cfg BeamConfig) (*Beam, error) {
	switch {
	case cfg.NumBeams < 1 || cfg.NumBeams > 256:
		return nil, &core.ParamError{Param: "num_beams", Value: cfg.NumBeams, Reason: "must be in [1, 256]"}
	case cfg.NumReturn == 0:
		cfg.NumReturn = 1
	}
	if cfg.NumReturn < 1 || cfg.NumReturn > cfg.NumBeams {
		return nil, &core.ParamError{Param: "num_return_sequences", Value: cfg.NumReturn, Reason: fmt.Sprintf("must be in [1, num_beams = %d]", cfg.NumBeams)}
	}
	if math.IsNaN(cfg.LengthPenalty) || math.IsInf(cfg.LengthPenalty, 0) {
		return nil, &core.ParamError{Param: "length_penalty", Value: cfg.LengthPenalty, Reason: "must be a finite number"}
	}
	if cfg.NoRepeatNGram < 0 {
		return nil, &core.ParamError{Param: "no_repeat_ngram_size", Value: cfg.NoRepeatNGram, Reason: "must not be negative"}
	}
	b := &Beam{cfg: cfg}
	if cfg.NoRepeatNGram > 0 {
		var err error
		if b.noRepeat, err = processors.NewNoRepeatNGram(cfg.NoRepeatNGram); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Name implements core.Strategy.
func (*Beam) Name() string { return "beam" }

type beam struct {
	seq *core.Sequence
	sum float64
}

type beamCandidate struct {
	parent int
	id     core.TokenID
	logp   float32
	sum    float64
}

type hypothesis struct {
	seq        *core.Sequence
	sum, score float64
	order      int
}

// Width bounds the sequences a beam search keeps at once for one request: its live beams, and
// as many finished hypotheses or forks being made. A server bounds the KV cache a request may
// fill by it.
func (b *Beam) Width() int { return 2 * b.cfg.NumBeams }

// Decode implements core.Strategy.
func (b *Beam) Decode(ctx context.Context, s *core.Session) error {
	R, err := b.Returns(s.Request().N)
	if err != nil {
		return err
	}
	s.DeferEvents()
	root, err := s.Prefill()
	if err != nil {
		return err
	}
	if root.Finished() {
		s.SetOutputs([]*core.Sequence{root})
		return s.EmitFinal([]*core.Sequence{root})
	}
	if !b.cfg.DoSample {
		neutraliseGreedyTemperature(root)
	}
	B := b.cfg.NumBeams
	eog := map[core.TokenID]bool{}
	if !s.Request().IgnoreEOS {
		for _, id := range s.Pipeline().Tokenizer.Special().EndOfGeneration {
			eog[id] = true
		}
	}
	maxLen := s.Request().MaxNewTokens
	beams := []beam{{seq: root}}
	var done []hypothesis
	var seqs []*core.Sequence
	var cands []beamCandidate
	rng := root.Rand()
	for len(beams) > 0 {
		seqs = seqs[:0]
		for _, bm := range beams {
			seqs = append(seqs, bm.seq)
		}
		processed, err := s.ProcessBatch(seqs)
		if err != nil {
			return err
		}
		cands = cands[:0]
		for i, c := range processed {
			if b.noRepeat != nil {
				if err := b.noRepeat.Process(beams[i].seq, c); err != nil {
					return fmt.Errorf("beam %d: %w", i, err)
				}
			}
			if cands, err = topCandidates(cands, c, i, beams[i].sum, 2*B); err != nil {
				return fmt.Errorf("beam %d: %w", i, err)
			}
		}
		if b.cfg.DoSample {
			cands = sampleCandidates(cands, 2*B, rng.Float64)
		} else {
			slices.SortStableFunc(cands, compareCandidates)
			cands = cands[:min(len(cands), 2*B)]
		}

		// Walk the ranked pairs: finished ones are set aside, the rest become the next beams.
		var next []beamCandidate
		for rank, c := range cands {
			if eog[c.id] {
				if rank < B {
					next = append(next, c) // forked and finished below, flagged by eog
				}
				continue
			}
			if countLive(next, eog) == B {
				break
			}
			next = append(next, c)
		}
		children, err := b.extend(s, beams, next)
		if err != nil {
			return err
		}
		beams = beams[:0]
		for _, ch := range children {
			if ch.seq.Finished() {
				done = append(done, b.hypothesis(ch, len(done)))
			} else {
				beams = append(beams, ch)
			}
		}
		if b.finished(done, beams, maxLen, R) {
			break
		}
		live := make([]*core.Sequence, len(beams))
		for i, bm := range beams {
			live[i] = bm.seq
		}
		if err := s.Forward(live...); err != nil {
			return err
		}
	}
	for _, bm := range beams { // live beams left when the search stopped early
		s.Finish(bm.seq, core.FinishLength, "beam search stopped: finished sequences cannot be beaten")
		done = append(done, b.hypothesis(bm, len(done)))
	}
	slices.SortStableFunc(done, func(x, y hypothesis) int { // best first, then finishing order
		return cmp.Or(cmp.Compare(y.score, x.score), x.order-y.order)
	})
	outs := make([]*core.Sequence, 0, R)
	for _, h := range done[:min(len(done), R)] {
		h.seq.SetScore(h.sum, h.score)
		outs = append(outs, h.seq)
	}
	s.SetOutputs(outs)
	return s.EmitFinal(outs)
}

// greedyTemperature stands in a beam's chain for a temperature of 0, which beam search without
// sampling does not apply: t = 0 keeps only the argmax, so every beam would have one candidate
// and the search would collapse to greedy decoding (and fail outright once no_repeat_ngram_size
// bans that one token). Beam search is already the deterministic search; it ranks by the
// distribution the rest of the chain leaves.
type greedyTemperature struct{}

func (greedyTemperature) Name() string { return "temperature (t = 0: not applied by beam search)" }

func (greedyTemperature) Process(*core.Sequence, *core.Candidates) error { return nil }

// neutraliseGreedyTemperature replaces the t = 0 temperatures of q's chain (forks inherit it).
func neutraliseGreedyTemperature(q *core.Sequence) {
	chain := q.Processors()
	for i, p := range chain {
		if t, ok := p.(*processors.Temperature); ok && t.T() == 0 {
			chain[i] = greedyTemperature{}
		}
	}
}

func countLive(next []beamCandidate, eog map[core.TokenID]bool) int {
	n := 0
	for _, c := range next {
		if !eog[c.id] {
			n++
		}
	}
	return n
}

// extend makes the next beams: each chosen (parent, token) pair forks its parent — the last
// pair of a parent takes the parent's sequence itself — and appends the token. Parents with no
// pair are discarded.
func (b *Beam) extend(s *core.Session, parents []beam, next []beamCandidate) ([]beam, error) {
	last := make([]int, len(parents))
	for i := range last {
		last[i] = -1
	}
	for i, c := range next {
		last[c.parent] = i
	}
	out := make([]beam, 0, len(next))
	for i, c := range next {
		p := parents[c.parent]
		q := p.seq
		if i != last[c.parent] {
			var err error
			if b.cfg.CopyForks {
				q, err = s.ForkCopy(p.seq)
			} else {
				q, err = s.Fork(p.seq)
			}
			if err != nil {
				return nil, err
			}
		}
		if err := s.Append(q, core.Choice{ID: c.id, Logprob: c.logp}); err != nil {
			return nil, err
		}
		out = append(out, beam{seq: q, sum: c.sum})
	}
	for i, p := range parents {
		if last[i] < 0 {
			s.Discard(p.seq)
		}
	}
	return out, nil
}

func (b *Beam) hypothesis(bm beam, order int) hypothesis {
	n := bm.seq.NumGenerated()
	return hypothesis{seq: bm.seq, sum: bm.sum, score: b.normalise(bm.sum, n), order: order}
}

func (b *Beam) normalise(sum float64, length int) float64 {
	if b.cfg.LengthPenalty == 0 || length == 0 {
		return sum
	}
	return sum / math.Pow(float64(length), b.cfg.LengthPenalty)
}

// Returns is how many sequences a request of n samples gets: the configured NumReturn, or n
// when the request asks for more than one (the OpenAI API's n, [generation] n, loom run --n),
// at most NumBeams.
func (b *Beam) Returns(n int) (int, error) {
	switch {
	case n <= 1:
		return b.cfg.NumReturn, nil
	case n > b.cfg.NumBeams:
		return 0, &core.ParamError{Param: "n", Value: n, Reason: fmt.Sprintf("beam search returns at most num_beams = %d sequences", b.cfg.NumBeams)}
	}
	return n, nil
}

// finished reports whether the search can stop, R sequences to return (see
// BeamConfig.EarlyStopping).
func (b *Beam) finished(done []hypothesis, live []beam, maxLen, R int) bool {
	if len(live) == 0 {
		return true
	}
	if len(done) < R {
		return false
	}
	if b.cfg.EarlyStopping {
		return true
	}
	scores := make([]float64, len(done))
	for i, h := range done {
		scores[i] = h.score
	}
	slices.Sort(scores)
	worstKept := scores[len(scores)-R]
	for _, bm := range live {
		length := bm.seq.NumGenerated()
		if b.cfg.LengthPenalty > 0 {
			length = maxLen
		}
		if b.normalise(bm.sum, length) > worstKept {
			return false
		}
	}
	return true
}

func compareCandidates(x, y beamCandidate) int { // best first, then by beam, then by id
	return cmp.Or(cmp.Compare(y.sum, x.sum), x.parent-y.parent, int(x.id)-int(y.id))
}

// topCandidates appends the n most probable tokens of c as candidates of beam parent, with
// their log-probabilities under the whole of c.
func topCandidates(dst []beamCandidate, c *core.Candidates, parent int, sum float64, n int) ([]beamCandidate, error) {
	_, logZ, err := c.Probs()
	if err != nil {
		return dst, err
	}
	if err := c.TopK(n); err != nil {
		return dst, err
	}
	for _, it := range c.Items() {
		if math.IsInf(float64(it.Logit), -1) {
			continue
		}
		lp := float64(it.Logit - logZ)
		dst = append(dst, beamCandidate{parent: parent, id: it.ID, logp: float32(lp), sum: sum + lp})
	}
	return dst, nil
}

// sampleCandidates draws n candidates without replacement with probability proportional to
// exp(sum), in draw order.
func sampleCandidates(cands []beamCandidate, n int, uniform func() float64) []beamCandidate {
	if len(cands) == 0 {
		return cands
	}
	maxSum := cands[0].sum
	for _, c := range cands {
		maxSum = math.Max(maxSum, c.sum)
	}
	w := make([]float64, len(cands))
	total := 0.0
	for i, c := range cands {
		w[i] = math.Exp(c.sum - maxSum)
		total += w[i]
	}
	out := make([]beamCandidate, 0, n)
	for len(out) < n && total > 0 {
		u := uniform() * total
		pick := -1
		for i, wi := range w {
			if wi == 0 {
				continue
			}
			pick = i
			if u < wi {
				break
			}
			u -= wi
		}
		out = append(out, cands[pick])
		total -= w[pick]
		w[pick] = 0
	}
	return out
}
