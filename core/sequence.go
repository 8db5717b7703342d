package core

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Sequence is one sequence of a request as the session tracks it: its tokens (prompt and
// generated), its model state, its own processor instances, its random stream, its next step
// (see step) and what it has produced so far. Processors and stopping criteria read it;
// strategies advance it through the Session.
type Sequence struct {
	session   *Session
	index     int
	state     State
	tokens    []TokenID
	promptLen int

	text     []byte // generated text
	textEnd  int    // -1, or the length the text is cut to
	streamed int    // bytes of text already sent in events
	// reported counts the generated tokens whose details (Event.Logprobs) were sent, and
	// reportedBytes their text's length.
	reported, reportedBytes int
	promptSent              bool // its events have listed the prompt's details (Event.Prompt)

	chain []LogitsProcessor
	// snaps[g] holds the stateful processors (in chain order, nil for the others) as they were
	// after the first g+1 generated tokens were accepted, so Truncate can restore them. It is
	// kept only when the chain has a stateful processor that is not a Resyncer.
	snaps    [][]LogitsProcessor
	keepSnap bool
	rng      *rand.Rand

	next step // what the next token is chosen from

	draftCands Candidates // ProcessDraft's own set, so a draft never disturbs next

	// holes lists generated positions whose raw details (logprob, top logprobs) were not
	// known when the token was appended (no row was current); the forward that runs the
	// token's predecessor fills them.
	holes []int

	scores, logprobs []float32
	top              [][]TokenProb
	trace            []TraceStep

	finish       FinishReason
	finishDetail string
	sumLogprob   float64
	score        float64
	discarded    bool
	inBatch      bool   // listed in the ProcessBatch or Forward being prepared
	revision     uint64 // see Revision
}

// SequenceOptions describe a sequence built outside a session by NewSequence.
type SequenceOptions struct {
	// Tokenizer gives the sequence its text (the generated tokens' bytes) and is what
	// Sequence.Tokenizer returns; nil leaves the text empty.
	Tokenizer Tokenizer
	// Seed and Index are what Sequence.Seed and Sequence.Index return, for parts that derive
	// random streams of their own.
	Seed  uint64
	Index int
}

// standaloneRevisions numbers the sequences NewSequence makes (their revisions have the top bit
// set, so they never equal a session's).
var standaloneRevisions atomic.Uint64

// NewSequence returns a sequence that belongs to no session, holding tokens of which the first
// promptLen are the prompt: what a processor or stopping criterion sees, for unit tests of a
// part without a model or a Session. It cannot be forwarded or appended to.
func NewSequence(tokens []TokenID, promptLen int, opt SequenceOptions) (*Sequence, error) {
	if promptLen < 0 || promptLen > len(tokens) {
		return nil, fmt.Errorf("prompt length %d: must be in [0, %d]", promptLen, len(tokens))
	}
	s := &Session{pipe: &Pipeline{Tokenizer: opt.Tokenizer}, seed: opt.Seed, start: time.Now()}
	q := &Sequence{session: s, index: opt.Index, textEnd: -1, promptLen: promptLen}
	q.tokens = append([]TokenID(nil), tokens...)
	q.rng = NewRand(opt.Seed, opt.Index)
	q.revision = 1<<63 | standaloneRevisions.Add(1)
	if opt.Tokenizer != nil {
		for _, id := range q.Generated() {
			q.text = append(q.text, opt.Tokenizer.TokenBytes(id)...)
		}
	}
	return q, nil
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

// Discarded reports whether the sequence was dropped from the request (Session.Discard).
func (q *Sequence) Discarded() bool { return q.discarded }

// State is the sequence's model state.
func (q *Sequence) State() State { return q.state }

// Logits is the model's raw row for the sequence's next token: set by the Forward that ran its
// last token, nil before, after an Append or a Truncate until the next Forward, and once the
// row has been processed (processing may rewrite it in place; use the Candidates that Process
// returns, and Request.Return.Logprobs for the raw distribution). The slice must not be
// modified.
func (q *Sequence) Logits() []float32 {
	if !q.current() || q.next.processed {
		return nil
	}
	return q.next.row
}

// Revision changes whenever tokens are taken off the end of the sequence (Session.Truncate,
// Session.Rollback), and differs between any two sequences of a session unless one is a fork
// of the other with the same tokens. A part that follows the tokens incrementally recounts
// from scratch when it changes: the same length and last token do not prove the same tokens.
func (q *Sequence) Revision() uint64 { return q.revision }

// Pending returns the tokens appended but not yet run through the model.
func (q *Sequence) Pending() []TokenID {
	if q.state == nil || q.state.Len() >= len(q.tokens) {
		return nil
	}
	return q.tokens[q.state.Len():]
}

// SetScore records a ranking strategy's summed log-probability and ranking score for the
// sequence's current tokens. Truncate clears them: they described tokens that are gone.
func (q *Sequence) SetScore(sumLogprob, score float64) { q.sumLogprob, q.score = sumLogprob, score }

// Processors returns the sequence's own processor instances, in chain order.
func (q *Sequence) Processors() []LogitsProcessor { return q.chain }
