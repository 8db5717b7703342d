package strategies

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/loomlm/loom/core"
)

// SpeculativeConfig configures speculative decoding.
type SpeculativeConfig struct {
	// Draft is the draft model; nil drafts by prompt lookup instead (n-gram matching against
	// the sequence so far).
	Draft core.Model
	// K is the number of tokens drafted per step: the starting value with KAcceptance, and
	// half the largest with KCost (which chooses k in [0, 2·K]).
	K int
	// Policy chooses k each step (KFixed: always K).
	Policy KPolicy
	// Greedy verifies by argmax: a draft is kept when it is the target's most likely token
	// after processing, so the output is exactly greedy decoding's. Otherwise drafts are kept
	// by rejection sampling and the output is distributed exactly as sampling from the target.
	Greedy bool
	// NGram is the longest n-gram prompt lookup matches (it tries NGram down to 1).
	NGram int
}

// Speculative is speculative decoding: a cheap proposer drafts k tokens, the target model
// scores all of them in one forward (k+1 rows: one per draft and a bonus row), and the drafts
// are accepted left to right. With sampling, draft x at a position is kept with probability
// min(1, p(x)/q(x)), where p is the target's and q the draft's distribution at that position,
// both after the pipeline's processors; the first rejected position is resampled from
// norm(max(0, p − q)); when every draft is kept, one more token is sampled from the bonus row.
// The sequence is then distributed exactly as if every token had been sampled from the target.
// The target's cache is rolled back past the first rejection.
//
// The proposer is a draft model sharing the target's tokenizer, or prompt lookup, which drafts
// the tokens that followed the most recent earlier occurrence of the sequence's last n-gram
// (its q is a point mass, so a draft is kept with probability p(x)).
type Speculative struct{ cfg SpeculativeConfig }

// NewSpeculative validates cfg and returns the strategy.
func NewSpeculative(cfg SpeculativeConfig) (*Speculative, error) {
	if cfg.K < 1 || cfg.K > 64 {
		return nil, &core.ParamError{Param: "k", Value: cfg.K, Reason: "must be in [1, 64]"}
	}
	if cfg.Draft == nil {
		if cfg.NGram == 0 {
			cfg.NGram = 3
		}
		if cfg.NGram < 1 || cfg.NGram > 32 {
			return nil, &core.ParamError{Param: "ngram", Value: cfg.NGram, Reason: "must be in [1, 32]"}
		}
	}
	return &Speculative{cfg: cfg}, nil
}

// CheckSameTokenizer returns an error naming the first difference between the target's and
// the draft's vocabularies; speculative decoding compares their distributions token by token.
func CheckSameTokenizer(target, draft core.Tokenizer, targetModel, draftModel core.Model) error {
	if tv, dv := targetModel.Config().VocabSize, draftModel.Config().VocabSize; tv != dv {
		return fmt.Errorf("draft model has %d logits per row, the target %d: they must share a tokenizer", dv, tv)
	}
	if tv, dv := target.VocabSize(), draft.VocabSize(); tv != dv {
		return fmt.Errorf("draft tokenizer has %d tokens, the target's %d: they must be the same", dv, tv)
	}
	for id := core.TokenID(0); int(id) < target.VocabSize(); id++ {
		if target.Piece(id) != draft.Piece(id) {
			return fmt.Errorf("draft tokenizer differs from the target's at token %d (%q vs %q)", id, draft.Piece(id), target.Piece(id))
		}
		if tb, db := target.TokenBytes(id), draft.TokenBytes(id); !bytes.Equal(tb, db) {
			return fmt.Errorf("draft tokenizer differs from the target's at token %d (%q): it writes %q, the target %q", id, draft.Piece(id), db, tb)
		}
	}
	if ts, ds := target.Special(), draft.Special(); ts.BOS != ds.BOS || ts.EOS != ds.EOS {
		return fmt.Errorf("draft tokenizer's BOS/EOS (%d/%d) differ from the target's (%d/%d)", ds.BOS, ds.EOS, ts.BOS, ts.EOS)
	}
	return nil
}

// Name implements core.Strategy.
func (sp *Speculative) Name() string {
	if sp.cfg.Draft == nil {
		return "prompt_lookup"
	}
	return "speculative"
}

// Decode implements core.Strategy. The request's sequences run one after the other.
func (sp *Speculative) Decode(ctx context.Context, s *core.Session) error {
	seqs, err := s.Start(s.Request().N)
	if err != nil {
		return err
	}
	for _, q := range seqs {
		if err := sp.run(ctx, s, q); err != nil {
			return err
		}
	}
	return nil
}

// specRun is the per-sequence state of one speculative run.
type specRun struct {
	sp      *Speculative
	s       *core.Session
	q       *core.Sequence
	draft   core.State
	dTokens []core.TokenID    // tokens the draft state holds
	dists   []core.Candidates // the draft's processed distribution at each drafted position
	qDense  []float32         // scratch: a draft distribution by token id
	// dTime is the time the last propose spent in its draft forwards (with their processing
	// and selection) that proposed one token each, dForwards their number; a forward that
	// first caught up with more than the tokens of one step is not counted (see
	// kTuner.observe).
	dTime     time.Duration
	dForwards int
}

// catchUpRows is the most tokens a draft forward may take and still count as the ordinary
// cost of one drafted token: the last draft of the previous step and the token the target
// added after it.
const catchUpRows = 2

func (sp *Speculative) run(ctx context.Context, s *core.Session, q *core.Sequence) error {
	if q.Finished() {
		return nil
	}
	r := &specRun{sp: sp, s: s, q: q}
	if sp.cfg.Draft != nil {
		st, err := sp.cfg.Draft.NewState()
		if err != nil {
			return fmt.Errorf("draft model: %w", err)
		}
		r.draft = st
		defer st.Close()
	}
	// Every verification forward starts with the last committed token: make the prompt's last
	// token pending again.
	if err := s.RollbackState(q, len(q.Tokens())-1); err != nil {
		return err
	}
	k := sp.cfg.K
	var tuner *kTuner
	if sp.cfg.Policy == KCost {
		tuner = newKTuner(2 * sp.cfg.K)
	}
	maxNew := s.Request().MaxNewTokens
	ctxLen := s.Pipeline().Model.Config().ContextLength
	draftLen := 0 // a draft model with a shorter context drafts while it has room, then the target goes on alone
	if sp.cfg.Draft != nil {
		draftLen = sp.cfg.Draft.Config().ContextLength
	}
	for !q.Finished() {
		room := maxNew - q.NumGenerated() - 1
		if ctxLen > 0 {
			room = min(room, ctxLen-len(q.Tokens())-1)
		}
		if draftLen > 0 {
			room = min(room, draftLen-len(q.Tokens())-1)
		}
		if tuner != nil {
			k = tuner.choose(room)
		}
		drafts, err := r.propose(ctx, max(min(k, room), 0))
		if err != nil {
			return err
		}
		if len(drafts) == 0 {
			// No drafts (k = 0, no room, or no match for prompt lookup): a step of plain
			// decoding, without the verification's bookkeeping (the logits row kept aside,
			// the rollback) that would make it slower than the target alone.
			t1 := time.Now()
			if err := r.plainStep(); err != nil {
				return err
			}
			countStep(s.Stats(), 0)
			if tuner != nil {
				tuner.observe(0, 0, 0, 0, time.Since(t1))
			}
			continue
		}
		// The verification's cost, for the cost policy, is all that the step does after the
		// drafts: the target's forward, the rows' processing and selection, the rollback.
		t1 := time.Now()
		rows, err := s.ForwardAhead(q, drafts, true)
		if err != nil {
			return err
		}
		accepted, err := r.verify(drafts, rows)
		if err != nil {
			return err
		}
		st := s.Stats()
		st.Drafted += len(drafts)
		st.Accepted += accepted
		countStep(st, len(drafts))
		if !q.Finished() {
			if err := s.RollbackState(q, len(q.Tokens())-1); err != nil {
				return err
			}
		}
		switch {
		case tuner != nil:
			tuner.observe(len(drafts), accepted, r.dTime, r.dForwards, time.Since(t1))
		case sp.cfg.Policy == KAcceptance && len(drafts) > 0:
			if accepted == len(drafts) {
				k = min(k+1, 2*sp.cfg.K)
			} else {
				k = max(k-1, 1)
			}
		}
	}
	return nil
}

// plainStep decodes one token as the target alone would: the sequence's pending token (the
// last committed one) goes through the model, and the next is chosen from its row and
// appended, pending in turn.
func (r *specRun) plainStep() error {
	s, q := r.s, r.q
	if err := s.Forward(q); err != nil {
		return err
	}
	p, err := s.Process(q)
	if err != nil {
		return err
	}
	ch, err := r.choose(p)
	if err != nil {
		return err
	}
	return s.Append(q, ch)
}

// choose selects the target's token from its processed distribution p as the target alone
// would: the argmax (greedy verification) or a sample with the sequence's random stream.
func (r *specRun) choose(p *core.Candidates) (core.Choice, error) {
	if r.sp.cfg.Greedy {
		return r.s.Greedy(r.q, p)
	}
	return r.s.Sample(r.q, p)
}

// countStep records a step that drafted n tokens in st.DraftK.
func countStep(st *core.Stats, n int) {
	for len(st.DraftK) <= n {
		st.DraftK = append(st.DraftK, 0)
	}
	st.DraftK[n]++
}

// propose drafts up to k tokens, recording the draft distributions (draft model only).
func (r *specRun) propose(ctx context.Context, k int) ([]core.TokenID, error) {
	r.dTime, r.dForwards = 0, 0
	if k == 0 {
		return nil, nil
	}
	if r.draft == nil {
		return lookup(r.q.Tokens(), r.sp.cfg.NGram, k), nil
	}
	s, q := r.s, r.q
	// Bring the draft state to the longest prefix it shares with the sequence.
	toks := q.Tokens()
	c := 0
	for c < len(r.dTokens) && c < len(toks) && r.dTokens[c] == toks[c] {
		c++
	}
	if r.draft.Len() > c {
		if err := r.draft.Truncate(c); err != nil {
			return nil, fmt.Errorf("draft model: %w", err)
		}
	}
	if c == len(toks) { // the draft holds the whole sequence: re-run its last token for a row
		c--
		if err := r.draft.Truncate(c); err != nil {
			return nil, fmt.Errorf("draft model: %w", err)
		}
	}
	r.dTokens = r.dTokens[:c]
	pending := toks[c:]
	for len(r.dists) < k {
		r.dists = append(r.dists, core.Candidates{})
	}
	mark := s.Mark(q)
	defer s.Rollback(q, mark)
	var drafts []core.TokenID
	for j := 0; j < k; j++ {
		start := time.Now()
		items := []core.ForwardItem{{State: r.draft, Tokens: pending}}
		if err := s.ForwardModel(ctx, r.sp.cfg.Draft, items); err != nil {
			return nil, fmt.Errorf("draft model forward: %w", err)
		}
		r.dTokens = append(r.dTokens, pending...)
		c, err := s.ProcessDraft(q, items[0].Logits[0])
		if err != nil {
			return nil, fmt.Errorf("draft distribution: %w", err)
		}
		var ch core.Choice
		if r.sp.cfg.Greedy {
			ch.ID, err = c.Argmax()
		} else {
			ch, err = core.SampleFrom(c, q.Rand().Float64())
		}
		if err != nil {
			return nil, fmt.Errorf("draft distribution: %w", err)
		}
		r.dists[j].CopyFrom(c)
		drafts = append(drafts, ch.ID)
		s.Push(q, ch.ID)
		if len(pending) <= catchUpRows {
			r.dTime += time.Since(start)
			r.dForwards++
		}
		pending = []core.TokenID{ch.ID}
	}
	return drafts, nil
}

// lookup drafts the k tokens that followed the most recent earlier occurrence of the last n
// tokens, trying n = maxN down to 1. Where that continuation runs into the end of the
// sequence, the copy goes on over the tokens it has drafted, as an overlapping copy does: a
// sequence that repeats a period of p tokens drafts k tokens of the repetition, not p.
func lookup(toks []core.TokenID, maxN, k int) []core.TokenID {
	for n := min(maxN, len(toks)-1); n >= 1; n-- {
		suffix := toks[len(toks)-n:]
		for i := len(toks) - n - 1; i >= 0; i-- {
			if slices.Equal(toks[i:i+n], suffix) {
				drafts := make([]core.TokenID, k)
				for j := range drafts {
					if src := i + n + j; src < len(toks) {
						drafts[j] = toks[src]
					} else {
						drafts[j] = drafts[src-len(toks)]
					}
				}
				return drafts
			}
		}
	}
	return nil
}

// verify accepts drafts left to right against the target rows, appends the accepted tokens and
// the corrected or bonus token, and returns how many drafts were kept.
func (r *specRun) verify(drafts []core.TokenID, rows [][]float32) (int, error) {
	s, q := r.s, r.q
	for j, d := range drafts {
		p, err := s.ProcessRow(q, rows[j])
		if err != nil {
			return j, err
		}
		ch, kept, err := r.decide(p, d, j)
		if err != nil {
			return j, err
		}
		if err := s.Append(q, ch); err != nil {
			return j, err
		}
		if !kept {
			return j, nil
		}
		if q.Finished() {
			return j + 1, nil
		}
	}
	p, err := s.ProcessRow(q, rows[len(drafts)])
	if err != nil {
		return len(drafts), err
	}
	ch, err := r.choose(p)
	if err != nil {
		return len(drafts), err
	}
	return len(drafts), s.Append(q, ch)
}

// decide keeps or replaces draft d at position j given the target distribution p.
func (r *specRun) decide(p *core.Candidates, d core.TokenID, j int) (core.Choice, bool, error) {
	s, q := r.s, r.q
	if r.sp.cfg.Greedy {
		ch, err := s.Greedy(q, p)
		return ch, err == nil && ch.ID == d, err
	}
	probs, _, err := p.Probs()
	if err != nil {
		return core.Choice{}, false, fmt.Errorf("sequence %d: %w", q.Index(), err)
	}
	qd, err := r.draftProbs(j, d)
	if err != nil {
		return core.Choice{}, false, err
	}
	pd := float32(0)
	for i := range probs {
		if p.ID(i) == d {
			pd = probs[i]
			break
		}
	}
	if u := q.Rand().Float64(); qd[d] > 0 && u*float64(qd[d]) < float64(pd) {
		return core.Choice{ID: d, Logprob: logOf(pd)}, true, r.clearDraftProbs(j, d)
	}
	// Resample from norm(max(0, p − q)).
	var total float64
	for i, pi := range probs {
		if w := pi - qd[p.ID(i)]; w > 0 {
			total += float64(w)
		}
	}
	u := q.Rand().Float64() * total
	pick := -1
	for i, pi := range probs {
		w := pi - qd[p.ID(i)]
		if w <= 0 {
			continue
		}
		pick = i
		if u < float64(w) {
			break
		}
		u -= float64(w)
	}
	if err := r.clearDraftProbs(j, d); err != nil {
		return core.Choice{}, false, err
	}
	if pick < 0 { // p ≤ q everywhere: p equals q, and the rejection had probability zero
		ch, err := core.SampleFrom(p, q.Rand().Float64())
		return ch, false, err
	}
	return core.Choice{ID: p.ID(pick), Logprob: logOf(probs[pick])}, false, nil
}

// draftProbs returns the draft distribution at position j as a dense slice by token id (for
// prompt lookup, the point mass at d).
func (r *specRun) draftProbs(j int, d core.TokenID) ([]float32, error) {
	V := r.s.Pipeline().Model.Config().VocabSize
	if len(r.qDense) < V {
		r.qDense = make([]float32, V)
	}
	if r.draft == nil {
		r.qDense[d] = 1
		return r.qDense, nil
	}
	c := &r.dists[j]
	probs, _, err := c.Probs()
	if err != nil {
		return nil, fmt.Errorf("draft distribution: %w", err)
	}
	for i, pi := range probs {
		r.qDense[c.ID(i)] = pi
	}
	return r.qDense, nil
}

// clearDraftProbs zeroes what draftProbs set, touching only those entries.
func (r *specRun) clearDraftProbs(j int, d core.TokenID) error {
	if r.draft == nil {
		r.qDense[d] = 0
		return nil
	}
	c := &r.dists[j]
	if c.IsDense() {
		clear(r.qDense)
		return nil
	}
	for _, it := range c.Items() {
		r.qDense[it.ID] = 0
	}
	return nil
}
