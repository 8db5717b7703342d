package core

import (
	"math/rand/v2"
	"time"
)

// Sequence is one sequence of a request as the session tracks it: its tokens (prompt and
// generated), its model state, its own processor instances, its random stream and what it has
// produced so far. Processors and stopping criteria read it; strategies advance it through the
// Session.
type Sequence struct {
	session   *Session
	index     int
	state     State
	tokens    []TokenID
	promptLen int

	text     []byte // generated text
	textEnd  int    // -1, or the length the text is cut to
	streamed int    // bytes of text already sent in events

	chain []LogitsProcessor
	cands Candidates
	rng   *rand.Rand

	logits    []float32 // the row the next token is chosen from
	shared    bool      // logits is shared with a fork: copy before modifying
	own       []float32 // q's own copy of a shared row
	raw       []float32 // copy of the raw row, when logprobs are asked for
	rawLogZ   float32
	rawTop    []TokenProb
	pendTrace []TraceStage

	scores, logprobs []float32
	top              [][]TokenProb
	trace            []TraceStep

	finish       FinishReason
	finishDetail string
	sumLogprob   float64
	score        float64
	discarded    bool
}

// Index is the sequence's index in its request: sample i of n, or beam i. It selects the
// sequence's random stream.
func (q *Sequence) Index() int { return q.index }

// Tokens returns prompt and generated tokens. The slice must not be modified.
func (q *Sequence) Tokens() []TokenID { return q.tokens }

// PromptLen is the number of prompt tokens at the start of Tokens.
func (q *Sequence) PromptLen() int { return q.promptLen }

// Generated returns the generated tokens. The slice must not be modified.
func (q *Sequence) Generated() []TokenID { return q.tokens[q.promptLen:] }

// NumGenerated is len(Generated()).
func (q *Sequence) NumGenerated() int { return len(q.tokens) - q.promptLen }

// Text returns the generated text so far (bytes; the last character may be incomplete). The
// slice must not be modified.
func (q *Sequence) Text() []byte { return q.text }

// Rand is the sequence's sampling stream.
func (q *Sequence) Rand() *rand.Rand { return q.rng }

// Seed is the request's seed, for parts that derive streams of their own (DeriveStream).
func (q *Sequence) Seed() uint64 { return q.session.seed }

// Elapsed is the time since the request started.
func (q *Sequence) Elapsed() time.Duration { return time.Since(q.session.start) }

// Tokenizer is the request's tokenizer.
func (q *Sequence) Tokenizer() Tokenizer { return q.session.pipe.Tokenizer }

// Finished reports whether the sequence has ended, and FinishReason why.
func (q *Sequence) Finished() bool             { return q.finish != FinishNone }
func (q *Sequence) FinishReason() FinishReason { return q.finish }

// State is the sequence's model state.
func (q *Sequence) State() State { return q.state }

// Logits is the row the next token is chosen from, set by the last Session.Forward (nil
// before). Processing modifies it in place.
func (q *Sequence) Logits() []float32 { return q.logits }

// Pending returns the tokens appended but not yet run through the model.
func (q *Sequence) Pending() []TokenID {
	if q.state == nil || q.state.Len() >= len(q.tokens) {
		return nil
	}
	return q.tokens[q.state.Len():]
}

// SetScore records a ranking strategy's summed log-probability and ranking score.
func (q *Sequence) SetScore(sumLogprob, score float64) { q.sumLogprob, q.score = sumLogprob, score }

// Processors returns the sequence's own processor instances, in chain order.
func (q *Sequence) Processors() []LogitsProcessor { return q.chain }
