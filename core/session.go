package core

import (
	"context"
	"errors"
	"fmt"
	"time"
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
// offers the primitives strategies are built from: Prefill or Start, Fork, Forward, Process,
// Greedy or Sample, Append, Truncate, Finish, Discard. A strategy may call them in any order;
// each leaves a sequence exactly as recomputing it from scratch would (its row, its processed
// candidates, its stateful processors, its recorded details). The files of this package hold
// one concern each: lifecycle here, fork.go, forward.go, step.go (the row and its processing),
// select.go, append.go, truncate.go, emit.go (stopping and events), result.go.
//
// A Session is used by one goroutine.
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
	generated int    // tokens appended over all sequences
	revisions uint64 // the last Sequence.Revision handed out

	start      time.Time
	prefillDur time.Duration
	// cachedPrompt is the prompt positions the first prefilled state took from the model's
	// prefix cache.
	cachedPrompt int
	stats        Stats

	// promptLogprobs and promptTop are the prompt's raw details (ReturnOptions.PromptLogprobs),
	// recorded by the first prefill; promptEvent is the same as an Event lists them.
	promptLogprobs []float32
	promptTop      [][]TokenProb
	promptEvent    []TokenLogprobs

	// spare holds the steps of discarded sequences, their buffers (a vocabulary's candidates,
	// softmax scratch, a fork's row) kept for the next new sequence: beam search forks and
	// discards sequences at every step, and a fresh vocabulary-sized buffer per fork costs
	// page faults and garbage collection (docs/BENCHMARKS.md).
	spare []step

	items     []ForwardItem
	fwd       []*Sequence
	batch     []*Candidates
	todo      []*Sequence
	todoCands []*Candidates
	bases     []int

	deferEvents bool

	lineage []LineageEvent // see ReturnOptions.Lineage
	closing bool           // the result is being assembled: primitives are no longer recorded
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
	toks, err := EncodePrompt(p, &req)
	if err != nil {
		return nil, err
	}
	if req.PromptTokens != nil {
		toks = append([]TokenID(nil), toks...) // the caller's slice stays the caller's
	}
	s.prompt = toks
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

// EncodePrompt returns the tokens of req's prompt on p, as NewSession takes them:
// req.PromptTokens when set, else req.Prompt encoded with req's special-token options (a prompt
// of more bytes than p's context can hold, MaxPromptBytes, is refused before encoding, with
// ErrContextFull). A program that needs a prompt's length before it runs the request (a server
// admitting requests by the cache they may fill) encodes it here and hands the tokens on as
// PromptTokens, so that the prompt is encoded once.
func EncodePrompt(p *Pipeline, req *Request) ([]TokenID, error) {
	if req.PromptTokens != nil {
		return req.PromptTokens, nil
	}
	if p.Model == nil || p.Tokenizer == nil {
		return nil, errors.New("encoding the prompt: the pipeline needs a model and a tokenizer")
	}
	// A prompt can only overflow the context if it has at least as many bytes as the context
	// has positions; only then is the bound worth computing, before encoding.
	if ctx := p.Model.Config().ContextLength; ctx > 0 && len(req.Prompt) >= ctx {
		if limit := MaxPromptBytes(p); len(req.Prompt) > limit {
			return nil, fmt.Errorf("%w: a prompt of %d bytes cannot fit a context of %d tokens (no token covers more than %d bytes)", ErrContextFull, len(req.Prompt), ctx, limit/ctx)
		}
	}
	toks, err := p.Tokenizer.Encode(req.Prompt, EncodeOptions{AddSpecial: !req.NoSpecial, ParseSpecial: req.ParseSpecial})
	if err != nil {
		return nil, fmt.Errorf("encoding the prompt: %w", err)
	}
	return toks, nil
}

// MaxPromptBytes bounds the prompts that can fit a pipeline's model: a prompt of more bytes
// than this encodes to more tokens than the model's context holds, whatever the text. It lets
// a program refuse an oversized prompt before encoding it (encoding costs memory in proportion
// to the text). It returns 0 when the model declares no context length (no bound).
//
// The bound is sound because a token never covers more bytes of text than the longest entry
// of the vocabulary: a text of B bytes encodes to at least ⌈B / L⌉ tokens, where L is the
// longest token in bytes (its text or its stored piece, whichever is longer, so special tokens
// written in the text and escaped byte pieces count too). A text of more than C × L bytes thus
// needs more than C positions.
func MaxPromptBytes(p *Pipeline) int {
	ctx := p.Model.Config().ContextLength
	if ctx <= 0 {
		return 0
	}
	longest := 1
	for id := range p.Tokenizer.VocabSize() {
		t := TokenID(id)
		longest = max(longest, len(p.Tokenizer.TokenBytes(t)), len(p.Tokenizer.Piece(t)))
	}
	return ctx * longest
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
	q.chain = s.freshChain()
	for _, p := range q.chain {
		if _, ok := p.(StatefulProcessor); ok {
			if _, resyncs := p.(Resyncer); !resyncs {
				q.keepSnap = true
			}
		}
	}
	s.note(LineageEvent{Op: LineageStart, Seq: q.index})
	t := time.Now()
	err = s.prefill(q)
	s.prefillDur = time.Since(t)
	if err != nil {
		return nil, err
	}
	if pc, ok := state.(PrefixCached); ok && s.cachedPrompt == 0 {
		s.cachedPrompt = pc.CachedTokens()
	}
	if s.req.MaxNewTokens == 0 {
		s.Finish(q, FinishLength, "max_new_tokens = 0")
	}
	return q, nil
}

// prefill runs q's prompt through the model. For the prompt's details (PromptLogprobs) the
// first prefill keeps a row for every position, in chunks of at most promptRowBytes of rows,
// and the details become the session's only once every chunk is scored: a prefill that fails
// half way (cancelled, out of cache) leaves none, rather than zeros that read as certainty.
func (s *Session) prefill(q *Sequence) error {
	if !s.req.Return.PromptLogprobs || s.promptLogprobs != nil {
		return s.Forward(q)
	}
	if err := s.usable(q, "forward", false); err != nil {
		return err
	}
	lp := make([]float32, len(s.prompt))
	var top [][]TokenProb
	if s.req.Return.TopLogprobs > 0 {
		top = make([][]TokenProb, len(s.prompt))
	}
	chunk := min(max(1, promptRowBytes/4/s.pipe.Model.Config().VocabSize), promptRowsMax)
	var last []float32
	for len(q.Pending()) > 0 {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		base, rows, err := s.forwardRows(s.ctx, q, q.Pending()[:min(chunk, len(q.Pending()))], true)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return fmt.Errorf("model forward returned no logits for sequence %d", q.index)
		}
		if err := s.recordPrompt(lp, top, base, rows); err != nil {
			return err
		}
		last = rows[len(rows)-1]
	}
	if last == nil {
		return s.Forward(q) // nothing pending: the state already held the prompt
	}
	q.setRow(last)
	s.promptLogprobs, s.promptTop = lp, top
	return nil
}

// promptRowBytes bounds the logits rows a prefill for PromptLogprobs asks for at once (a
// 128k vocabulary's rows are half a megabyte each, and a model state may keep its buffer for
// its life: 16 rows there), and promptRowsMax the positions: a model that batches the
// forwards of many requests (loom serve) runs a forward of every row whole, so a long
// prompt's rows in one forward would hold up the others' steps.
var promptRowBytes = 8 << 20

const promptRowsMax = 256

// recordPrompt records the prompt's details into lp and top (nil: none) from the rows of a
// forward of its tokens from position base on: row j follows token base+j and so predicts
// token base+j+1.
func (s *Session) recordPrompt(lp []float32, top [][]TokenProb, base int, rows [][]float32) error {
	var c Candidates
	for j, row := range rows {
		p := base + j + 1
		if p >= len(s.prompt) {
			break // the row that predicts the first generated token
		}
		logZ, t, err := s.rawDetails(&c, row, nil)
		if err != nil {
			return fmt.Errorf("prompt token %d: %w", p, err)
		}
		lp[p] = row[s.prompt[p]] - logZ
		if top != nil {
			top[p] = t
		}
	}
	return nil
}

// freshChain returns the pipeline's processors with a new clone of each stateful one.
func (s *Session) freshChain() []LogitsProcessor {
	return cloneChain(s.pipe.Processors)
}

// cloneChain returns chain with a clone of each stateful processor (nil entries stay nil).
func cloneChain(chain []LogitsProcessor) []LogitsProcessor {
	out := make([]LogitsProcessor, len(chain))
	for i, p := range chain {
		if sp, ok := p.(StatefulProcessor); ok {
			out[i] = sp.Clone()
		} else {
			out[i] = p
		}
	}
	return out
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
	if n := len(s.spare); n > 0 {
		q.next = s.spare[n-1]
		s.spare[n-1] = step{}
		s.spare = s.spare[:n-1]
	}
	q.rng = NewRand(s.seed, q.index)
	s.revisions++
	q.revision = s.revisions
	s.nextIndex++
	s.seqs = append(s.seqs, q)
	return q
}

// Discard drops q from the request: its model state and its row are released and it is not
// returned. Any later primitive on q is an error.
func (s *Session) Discard(q *Sequence) {
	if q == nil || q.discarded || q.session != s {
		return
	}
	s.note(LineageEvent{Op: LineageDiscard, Seq: q.index, Len: q.NumGenerated()})
	q.discarded = true
	q.dropStep()
	q.state.Close()
	if len(s.spare) < maxSpareSteps {
		q.next.cands.Reset(nil) // the set may view the closed state's row
		s.spare = append(s.spare, q.next)
	}
	q.next = step{}
}

// maxSpareSteps bounds the discarded sequences' steps a session keeps for reuse.
const maxSpareSteps = 16

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
