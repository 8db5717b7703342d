package core

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Pipeline is a complete decoding setup: a model with its tokenizer, the processor chain in
// order, the stopping criteria and the strategy. The pipeline package builds one from a TOML
// file; a program may also assemble one directly. A Pipeline is read-only during requests and
// may serve several at once.
type Pipeline struct {
	Model      Model
	Tokenizer  Tokenizer
	Processors []LogitsProcessor
	Stopping   []StoppingCriterion
	Strategy   Strategy
}

// Validate checks that the pipeline has every part it needs.
func (p *Pipeline) Validate() error {
	switch {
	case p == nil:
		return errors.New("pipeline is nil")
	case p.Model == nil:
		return errors.New("pipeline has no model")
	case p.Tokenizer == nil:
		return errors.New("pipeline has no tokenizer")
	case p.Strategy == nil:
		return errors.New("pipeline has no strategy")
	}
	if tv, mv := p.Tokenizer.VocabSize(), p.Model.Config().VocabSize; tv > mv {
		return fmt.Errorf("tokenizer has %d tokens but the model only %d logits per row", tv, mv)
	}
	for i, proc := range p.Processors {
		if proc == nil {
			return fmt.Errorf("processor %d is nil", i)
		}
	}
	for i, c := range p.Stopping {
		if c == nil {
			return fmt.Errorf("stopping criterion %d is nil", i)
		}
	}
	return nil
}

// Choice is a selected token and its log-probability under the processed distribution (zero
// when not computed).
type Choice struct {
	ID      TokenID
	Logprob float32
}

// Session is one request in progress, driven by a Strategy. It owns the request's sequences and
// offers the primitives strategies are built from: Prefill, Fork, Forward, Process, Sample or
// Greedy, Append, Truncate, Finish. A Session is used by one goroutine.
type Session struct {
	pipe     *Pipeline
	req      Request
	seed     uint64
	prompt   []TokenID
	eog      []TokenID
	holdBack int
	ctx      context.Context

	seqs      []*Sequence
	outputs   []*Sequence
	nextIndex int

	start      time.Time
	prefillDur time.Duration
	stats      Stats

	items []ForwardItem
	fwd   []*Sequence
	batch []*Candidates

	deferEvents bool
}

// NewSession validates the pipeline and the request and encodes the prompt. Most callers use
// Generate, which also runs the strategy.
func NewSession(ctx context.Context, p *Pipeline, req Request) (*Session, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if req.N == 0 {
		req.N = 1
	}
	if req.N < 0 {
		return nil, fmt.Errorf("request: n = %d: must be at least 1", req.N)
	}
	if req.MaxNewTokens < 0 {
		return nil, fmt.Errorf("request: max_new_tokens = %d: must not be negative", req.MaxNewTokens)
	}
	if req.Return.TopLogprobs < 0 || req.Return.Trace < 0 {
		return nil, errors.New("request: top_logprobs and trace must not be negative")
	}
	s := &Session{pipe: p, req: req, ctx: ctx, start: time.Now()}
	if req.Seed != nil {
		s.seed = *req.Seed
	} else {
		s.seed = RandomSeed()
	}
	if req.PromptTokens != nil {
		s.prompt = append([]TokenID(nil), req.PromptTokens...)
	} else {
		toks, err := p.Tokenizer.Encode(req.Prompt, EncodeOptions{AddSpecial: !req.NoSpecial, ParseSpecial: req.ParseSpecial})
		if err != nil {
			return nil, fmt.Errorf("encoding the prompt: %w", err)
		}
		s.prompt = toks
	}
	if len(s.prompt) == 0 {
		return nil, ErrEmptyPrompt
	}
	vocab := p.Model.Config().VocabSize
	for i, id := range s.prompt {
		if id < 0 || int(id) >= vocab {
			return nil, fmt.Errorf("prompt token %d = %d: outside the vocabulary [0, %d)", i, id, vocab)
		}
	}
	if n := p.Model.Config().ContextLength; n > 0 && len(s.prompt) >= n {
		return nil, fmt.Errorf("%w: %d prompt tokens, context length %d", ErrContextFull, len(s.prompt), n)
	}
	if !req.IgnoreEOS {
		s.eog = p.Tokenizer.Special().EndOfGeneration
	}
	for _, c := range p.Stopping {
		if h, ok := c.(TextHolder); ok {
			s.holdBack = max(s.holdBack, h.HoldBack())
		}
	}
	return s, nil
}

// Request returns the request (with defaults filled in).
func (s *Session) Request() *Request { return &s.req }

// Pipeline returns the pipeline the session runs.
func (s *Session) Pipeline() *Pipeline { return s.pipe }

// Context is the request's context.
func (s *Session) Context() context.Context { return s.ctx }

// Seed is the request's seed.
func (s *Session) Seed() uint64 { return s.seed }

// Prompt returns the encoded prompt.
func (s *Session) Prompt() []TokenID { return s.prompt }

// Stats returns the counters strategies update (drafted, accepted, …).
func (s *Session) Stats() *Stats { return &s.stats }

// Prefill creates the request's first sequence and runs the prompt through the model.
// When MaxNewTokens is zero the sequence is finished at once (reason "length").
func (s *Session) Prefill() (*Sequence, error) {
	state, err := s.pipe.Model.NewState()
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	q := s.newSequence(state)
	q.tokens = append(make([]TokenID, 0, len(s.prompt)+s.req.MaxNewTokens), s.prompt...)
	q.promptLen = len(s.prompt)
	q.chain = make([]LogitsProcessor, len(s.pipe.Processors))
	for i, p := range s.pipe.Processors {
		if sp, ok := p.(StatefulProcessor); ok {
			q.chain[i] = sp.Clone()
		} else {
			q.chain[i] = p
		}
	}
	t := time.Now()
	err = s.Forward(q)
	s.prefillDur = time.Since(t)
	if err != nil {
		return nil, err
	}
	if s.req.MaxNewTokens == 0 {
		s.Finish(q, FinishLength, "max_new_tokens = 0")
	}
	return q, nil
}

// Start prefills the prompt once and forks it into n sequences (indices 0…n-1) that share the
// prefill: the usual opening of sampling strategies.
func (s *Session) Start(n int) ([]*Sequence, error) {
	root, err := s.Prefill()
	if err != nil {
		return nil, err
	}
	seqs := []*Sequence{root}
	for len(seqs) < n {
		f, err := s.Fork(root)
		if err != nil {
			return nil, err
		}
		seqs = append(seqs, f)
	}
	return seqs, nil
}

func (s *Session) newSequence(state State) *Sequence {
	q := &Sequence{session: s, index: s.nextIndex, state: state, textEnd: -1}
	q.rng = NewRand(s.seed, q.index)
	s.nextIndex++
	s.seqs = append(s.seqs, q)
	return q
}

// Fork returns a new sequence (the next index, with its own random stream) that continues from
// q: same tokens, text and details, a fork of its model state (copy-on-write in the cache),
// clones of its stateful processors and a copy of its current logits.
func (s *Session) Fork(q *Sequence) (*Sequence, error) {
	state, err := q.state.Fork()
	if err != nil {
		return nil, fmt.Errorf("forking sequence %d: %w", q.index, err)
	}
	f := s.newSequence(state)
	f.tokens = append(make([]TokenID, 0, cap(q.tokens)), q.tokens...)
	f.promptLen = q.promptLen
	f.text = append([]byte(nil), q.text...)
	f.textEnd, f.streamed = q.textEnd, q.streamed
	f.finish, f.finishDetail = q.finish, q.finishDetail
	f.scores = append([]float32(nil), q.scores...)
	f.logprobs = append([]float32(nil), q.logprobs...)
	f.top = append([][]TokenProb(nil), q.top...)
	f.trace = append([]TraceStep(nil), q.trace...)
	f.sumLogprob, f.score = q.sumLogprob, q.score
	f.chain = make([]LogitsProcessor, len(q.chain))
	for i, p := range q.chain {
		if sp, ok := p.(StatefulProcessor); ok {
			f.chain[i] = sp.Clone()
		} else {
			f.chain[i] = p
		}
	}
	// The row is shared until one of the two processes it (copy on write): a beam that
	// appends a token and forwards never copies it.
	f.logits = q.logits
	if q.logits != nil {
		q.shared, f.shared = true, true
	}
	return f, nil
}

// ForkCopy is Fork with a full copy of q's cached state where the state supports it
// (StateCopier); otherwise it is Fork. It exists to measure what copy-on-write saves.
func (s *Session) ForkCopy(q *Sequence) (*Sequence, error) {
	c, ok := q.state.(StateCopier)
	if !ok {
		return s.Fork(q)
	}
	f, err := s.Fork(q)
	if err != nil {
		return nil, err
	}
	copied, err := c.Copy()
	if err != nil {
		return nil, fmt.Errorf("copying sequence %d: %w", q.index, err)
	}
	f.state.Close()
	f.state = copied
	return f, nil
}

// Forward runs the pending tokens of the given sequences (those appended since their last
// forward; the whole prompt at first) through the model in one batched call and sets each
// sequence's Logits to the row after its last token. Finished sequences and sequences with
// nothing pending are skipped. (Speculative verification, which needs a row per token, uses
// ForwardAhead.)
func (s *Session) Forward(seqs ...*Sequence) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	s.items, s.fwd = s.items[:0], s.fwd[:0]
	for _, q := range seqs {
		if q.discarded {
			return fmt.Errorf("sequence %d was discarded", q.index)
		}
		if len(q.Pending()) == 0 {
			continue
		}
		s.items = append(s.items, ForwardItem{State: q.state, Tokens: q.Pending()})
		s.fwd = append(s.fwd, q)
	}
	if len(s.items) == 0 {
		return nil
	}
	if err := s.pipe.Model.Forward(s.ctx, s.items); err != nil {
		return fmt.Errorf("model forward: %w", err)
	}
	s.stats.Forwards++
	for i, q := range s.fwd {
		rows := s.items[i].Logits
		if len(rows) == 0 {
			return fmt.Errorf("model forward returned no logits for sequence %d", q.index)
		}
		q.logits = rows[len(rows)-1]
		q.shared = false
		s.items[i] = ForwardItem{}
	}
	return nil
}

// Process runs q's processor chain on its current logits (in place) and returns the resulting
// candidates, valid until the next Process on q. Errors name the processor.
func (s *Session) Process(q *Sequence) (*Candidates, error) {
	if err := s.beginProcess(q); err != nil {
		return nil, err
	}
	return s.runChain(q)
}

func (s *Session) runChain(q *Sequence) (*Candidates, error) {
	for i, p := range q.chain {
		if err := p.Process(q, &q.cands); err != nil {
			return nil, processorError(i, p, err)
		}
		s.traceStage(q, p.Name())
	}
	return &q.cands, nil
}

// ProcessBatch is Process for several sequences. A BatchProcessor shared by all of them is
// called once for the whole batch.
func (s *Session) ProcessBatch(seqs []*Sequence) ([]*Candidates, error) {
	s.batch = s.batch[:0]
	for _, q := range seqs {
		if err := s.beginProcess(q); err != nil {
			return nil, err
		}
		s.batch = append(s.batch, &q.cands)
	}
	if len(seqs) == 0 {
		return s.batch, nil
	}
	for i := range seqs[0].chain {
		p := seqs[0].chain[i]
		bp, ok := p.(BatchProcessor)
		for _, q := range seqs[1:] {
			if ok && q.chain[i] != p {
				ok = false
			}
		}
		if ok && len(seqs) > 1 {
			if err := bp.ProcessBatch(seqs, s.batch); err != nil {
				return nil, processorError(i, p, err)
			}
		} else {
			for j, q := range seqs {
				if err := q.chain[i].Process(q, s.batch[j]); err != nil {
					return nil, processorError(i, q.chain[i], err)
				}
			}
		}
		for _, q := range seqs {
			s.traceStage(q, p.Name())
		}
	}
	return s.batch, nil
}

func processorError(i int, p LogitsProcessor, err error) error {
	return fmt.Errorf("processors[%d] (%s): %w", i, p.Name(), err)
}

// beginProcess records what the request asked about the raw distribution and makes the
// candidates dense over the current row.
func (s *Session) beginProcess(q *Sequence) error {
	if q.logits == nil {
		return fmt.Errorf("sequence %d has no logits: forward it first", q.index)
	}
	if q.Finished() {
		return fmt.Errorf("sequence %d has finished (%s)", q.index, q.finish)
	}
	if q.shared {
		q.own = append(q.own[:0], q.logits...)
		q.logits, q.shared = q.own, false
	}
	return s.beginRow(q, q.logits)
}

// beginRow starts processing row for q: it captures the raw distribution when the request
// asked for logprobs, resets the candidates to the row and opens a trace step.
func (s *Session) beginRow(q *Sequence, row []float32) error {
	if s.req.Return.Logprobs || s.req.Return.TopLogprobs > 0 {
		q.raw = append(q.raw[:0], row...)
		q.cands.Reset(q.raw)
		probs, logZ, err := q.cands.Probs()
		if err != nil {
			return fmt.Errorf("model logits: %w", err)
		}
		q.rawLogZ = logZ
		if n := s.req.Return.TopLogprobs; n > 0 {
			q.rawTop = s.topTokens(q.rawTop[:0], &q.cands, probs, n, true)
		}
	}
	q.cands.Reset(row)
	q.pendTrace = nil
	s.traceStage(q, "model")
	return nil
}

func (s *Session) traceStage(q *Sequence, name string) {
	n := s.req.Return.Trace
	if n == 0 {
		return
	}
	st := TraceStage{Processor: name}
	if probs, _, err := q.cands.Probs(); err == nil {
		for _, p := range probs {
			if p > 0 {
				st.Kept++
			}
		}
		st.Top = s.topTokens(nil, &q.cands, probs, n, false)
	}
	q.pendTrace = append(q.pendTrace, st)
}

// topTokens appends the n most probable entries of c (probs aligned with it) to dst, as
// probabilities or, with logs, log-probabilities.
func (s *Session) topTokens(dst []TokenProb, c *Candidates, probs []float32, n int, logs bool) []TokenProb {
	start := len(dst)
	for i, p := range probs {
		if len(dst)-start == n && p <= dst[len(dst)-1].Value {
			continue
		}
		tp := TokenProb{ID: c.ID(i), Value: p}
		if len(dst)-start < n {
			dst = append(dst, tp)
		} else {
			dst[len(dst)-1] = tp
		}
		for j := len(dst) - 1; j > start && dst[j].Value > dst[j-1].Value; j-- {
			dst[j], dst[j-1] = dst[j-1], dst[j]
		}
	}
	for i := start; i < len(dst); i++ {
		dst[i].Text = string(s.pipe.Tokenizer.TokenBytes(dst[i].ID))
		if logs {
			dst[i].Value = float32(math.Log(float64(dst[i].Value)))
		}
	}
	return dst
}

// Greedy selects the most likely candidate. Its Logprob is computed only when the request
// asked for log-probabilities.
func (s *Session) Greedy(q *Sequence, c *Candidates) (Choice, error) {
	id, err := c.Argmax()
	if err != nil {
		return Choice{}, fmt.Errorf("sequence %d, step %d: %w", q.index, q.NumGenerated(), err)
	}
	ch := Choice{ID: id}
	if s.req.Return.Logprobs {
		_, logZ, err := c.Probs()
		if err != nil {
			return Choice{}, err
		}
		v, _ := c.Logit(id)
		ch.Logprob = v - logZ
	}
	return ch, nil
}

// Sample draws a candidate from the softmax of c with q's random stream.
func (s *Session) Sample(q *Sequence, c *Candidates) (Choice, error) {
	ch, err := SampleFrom(c, q.rng.Float64())
	if err != nil {
		return Choice{}, fmt.Errorf("sequence %d, step %d: %w", q.index, q.NumGenerated(), err)
	}
	return ch, nil
}

// SampleFrom selects the candidate at which the cumulative softmax of c first exceeds u (a
// uniform draw in [0, 1)) and returns it with its log-probability. Candidates are taken in
// their current order.
func SampleFrom(c *Candidates, u float64) (Choice, error) {
	probs, _, err := c.Probs()
	if err != nil {
		return Choice{}, err
	}
	var cum float64
	last := -1
	pick := -1
	for i, p := range probs {
		if p <= 0 {
			continue
		}
		last = i
		cum += float64(p)
		if u < cum {
			pick = i
			break
		}
	}
	if pick < 0 { // u fell past a total that rounding left just below 1
		pick = last
	}
	if pick < 0 {
		return Choice{}, ErrNoCandidates
	}
	return Choice{ID: c.ID(pick), Logprob: float32(math.Log(float64(probs[pick])))}, nil
}

// Append adds a chosen token to q: it records the requested details, tells q's stateful
// processors, extends the text, checks end-of-generation tokens, the stopping criteria and the
// token limits, and streams an event. It returns the event callback's error, if any.
func (s *Session) Append(q *Sequence, ch Choice) error {
	if q.Finished() {
		return fmt.Errorf("sequence %d has finished (%s)", q.index, q.finish)
	}
	if ch.ID < 0 || int(ch.ID) >= s.pipe.Model.Config().VocabSize {
		return fmt.Errorf("sequence %d: token %d outside the vocabulary", q.index, ch.ID)
	}
	step := q.NumGenerated()
	q.tokens = append(q.tokens, ch.ID)
	if s.req.Return.Logprobs {
		q.scores = append(q.scores, ch.Logprob)
		var lp float32
		if q.raw != nil {
			lp = q.raw[ch.ID] - q.rawLogZ
		}
		q.logprobs = append(q.logprobs, lp)
	}
	if s.req.Return.TopLogprobs > 0 {
		q.top = append(q.top, append([]TokenProb(nil), q.rawTop...))
	}
	if s.req.Return.Trace > 0 {
		q.trace = append(q.trace, TraceStep{Step: step, Chosen: ch.ID, Stages: q.pendTrace})
		q.pendTrace = nil
	}
	for _, p := range q.chain {
		if sp, ok := p.(StatefulProcessor); ok {
			sp.Accept(q, ch.ID)
		}
	}
	q.text = append(q.text, s.pipe.Tokenizer.TokenBytes(ch.ID)...)
	if st := s.checkStop(q, ch.ID); st.Reason != FinishNone {
		if st.CutText {
			q.textEnd = min(max(st.TextEnd, 0), len(q.text))
		}
		q.finish, q.finishDetail = st.Reason, st.Detail
	}
	return s.emit(q, ch)
}

func (s *Session) checkStop(q *Sequence, id TokenID) Stop {
	for _, e := range s.eog {
		if id == e {
			return Stop{Reason: FinishEOS, Detail: fmt.Sprintf("end-of-generation token %d", id)}
		}
	}
	for _, c := range s.pipe.Stopping {
		if st := c.Check(q); st.Reason != FinishNone {
			return st
		}
	}
	if q.NumGenerated() >= s.req.MaxNewTokens {
		return Stop{Reason: FinishLength, Detail: fmt.Sprintf("max_new_tokens = %d", s.req.MaxNewTokens)}
	}
	if n := s.pipe.Model.Config().ContextLength; n > 0 && len(q.tokens) >= n {
		return Stop{Reason: FinishLength, Detail: fmt.Sprintf("context length %d", n)}
	}
	return Stop{}
}

// emit streams the text of q that became safe to show. A running sequence keeps back an
// incomplete UTF-8 character and the stop-string hold-back.
func (s *Session) emit(q *Sequence, ch Choice) error {
	if s.req.OnEvent == nil || s.deferEvents {
		return nil
	}
	ev := Event{Sequence: q.index, Token: ch.ID, Score: ch.Logprob, Finished: q.Finished(), FinishReason: q.finish}
	ev.Text = s.takeText(q)
	return s.req.OnEvent(ev)
}

func (s *Session) takeText(q *Sequence) string {
	end := len(q.text)
	if q.textEnd >= 0 {
		end = q.textEnd
	}
	if !q.Finished() {
		end = completeUTF8(q.text, max(end-s.holdBack, 0))
	}
	if end <= q.streamed {
		return ""
	}
	t := string(q.text[q.streamed:end])
	q.streamed = end
	return t
}

// completeUTF8 returns the largest e ≤ end such that b[:e] does not end inside a character
// whose remaining bytes may still arrive.
func completeUTF8(b []byte, end int) int {
	for i := end - 1; i >= 0 && i >= end-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:end]) {
				return i
			}
			return end
		}
	}
	return end
}

// Finish ends q with a reason (strategies use it for their own ends: a pruned beam, a
// cancelled request) and streams its remaining text.
func (s *Session) Finish(q *Sequence, reason FinishReason, detail string) {
	if q.Finished() {
		return
	}
	q.finish, q.finishDetail = reason, detail
	if s.req.OnEvent != nil && !s.deferEvents {
		_ = s.req.OnEvent(Event{Sequence: q.index, Token: -1, Text: s.takeText(q), Finished: true, FinishReason: reason})
	}
}

// DeferEvents stops per-token events: a strategy whose sequences are provisional (beam search)
// calls it first and reports its final sequences with EmitFinal.
func (s *Session) DeferEvents() { s.deferEvents = true }

// EmitFinal sends one event per sequence with its whole text, in order, numbered by position.
func (s *Session) EmitFinal(seqs []*Sequence) error {
	if s.req.OnEvent == nil {
		return nil
	}
	for i, q := range seqs {
		last := TokenID(-1)
		if g := q.Generated(); len(g) > 0 {
			last = g[len(g)-1]
		}
		if err := s.req.OnEvent(Event{Sequence: i, Token: last, Text: s.takeText(q), Finished: true, FinishReason: q.finish}); err != nil {
			return err
		}
	}
	return nil
}

// Truncate rolls q back to its first n tokens (n at least the prompt length): tokens, text,
// details and model state. Stateful processors are not rolled back; a strategy that needs that
// keeps a Clone from before.
func (s *Session) Truncate(q *Sequence, n int) error {
	if n < q.promptLen || n > len(q.tokens) {
		return fmt.Errorf("truncate sequence %d to %d tokens: must be in [%d, %d]", q.index, n, q.promptLen, len(q.tokens))
	}
	if q.state.Len() > n {
		if err := q.state.Truncate(n); err != nil {
			return fmt.Errorf("truncate sequence %d: %w", q.index, err)
		}
	}
	gen := n - q.promptLen
	q.tokens = q.tokens[:n]
	q.text = q.text[:0]
	for _, id := range q.Generated() {
		q.text = append(q.text, s.pipe.Tokenizer.TokenBytes(id)...)
	}
	q.streamed = min(q.streamed, len(q.text))
	q.scores = q.scores[:min(gen, len(q.scores))]
	q.logprobs = q.logprobs[:min(gen, len(q.logprobs))]
	q.top = q.top[:min(gen, len(q.top))]
	q.trace = q.trace[:min(gen, len(q.trace))]
	q.finish, q.finishDetail, q.textEnd = FinishNone, "", -1
	return nil
}

// Discard drops q from the request: its model state is released and it is not returned.
func (s *Session) Discard(q *Sequence) {
	if q.discarded {
		return
	}
	q.discarded = true
	q.state.Close()
}

// SetOutputs fixes which sequences the Result returns, in order (beam search returns its best
// beams). Without it, every sequence not discarded is returned in index order.
func (s *Session) SetOutputs(seqs []*Sequence) { s.outputs = append([]*Sequence(nil), seqs...) }

// Live returns the sequences of seqs that have not finished, reusing dst.
func Live(dst, seqs []*Sequence) []*Sequence {
	dst = dst[:0]
	for _, q := range seqs {
		if !q.Finished() {
			dst = append(dst, q)
		}
	}
	return dst
}

// result assembles the Result and releases every model state. Sequences still running are
// finished with the reason derived from err.
func (s *Session) result(err error) *Result {
	reason := FinishError
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		reason = FinishCancelled
	}
	outs := s.outputs
	if outs == nil {
		for _, q := range s.seqs {
			if !q.discarded {
				outs = append(outs, q)
			}
		}
	}
	total := time.Since(s.start)
	res := &Result{PromptTokens: s.prompt, Seed: s.seed, Stats: s.stats}
	for _, q := range s.seqs {
		if !q.Finished() {
			detail := "the strategy returned without finishing it"
			if err != nil {
				detail = err.Error()
			}
			q.finish, q.finishDetail = reason, detail
		}
		res.GeneratedTokens += q.NumGenerated()
	}
	if res.Stats.Drafted > 0 {
		res.Stats.AcceptanceRate = float64(res.Stats.Accepted) / float64(res.Stats.Drafted)
	}
	for i, q := range outs {
		text := q.text
		if q.textEnd >= 0 {
			text = text[:q.textEnd]
		}
		res.Sequences = append(res.Sequences, SequenceResult{
			Index:        i,
			Tokens:       append([]TokenID{}, q.Generated()...),
			Text:         string(text),
			Scores:       q.scores,
			Logprobs:     q.logprobs,
			TopLogprobs:  q.top,
			FinishReason: q.finish,
			FinishDetail: q.finishDetail,
			SumLogprob:   q.sumLogprob,
			Score:        q.score,
			Trace:        q.trace,
		})
	}
	for _, q := range s.seqs {
		s.Discard(q)
	}
	res.Timings = Timings{Prefill: s.prefillDur, Total: total, Decode: total - s.prefillDur}
	if s.prefillDur > 0 {
		res.Timings.PrefillTokensPerSecond = float64(len(s.prompt)) / s.prefillDur.Seconds()
	}
	if res.Timings.Decode > 0 {
		res.Timings.DecodeTokensPerSecond = float64(res.GeneratedTokens) / res.Timings.Decode.Seconds()
	}
	return res
}
