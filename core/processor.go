package core

// LogitsProcessor reshapes one sequence's next-token distribution at one step: it may change
// logits, ban tokens (-Inf) or truncate the candidate set. Process must not keep c after it
// returns. Processors are validated when they are built, never per token.
type LogitsProcessor interface {
	// Name is the processor's type name as written in pipelines, for errors and traces.
	Name() string
	// Process works on c, the candidates of seq.
	Process(seq *Sequence, c *Candidates) error
}

// StatefulProcessor is a processor with state that follows the tokens chosen for a sequence
// (windowed penalties, mirostat, …). The session gives every sequence its own Clone of the
// pipeline's instance and tells it each chosen token through Accept; forks (beams, samples)
// clone the parent's instance.
type StatefulProcessor interface {
	LogitsProcessor
	// Accept observes the token appended to seq.
	Accept(seq *Sequence, id TokenID)
	// Clone returns an independent copy with the same configuration and state.
	Clone() StatefulProcessor
}

// Forcer is a processor that can tell, before the model runs, that only one token may come
// next whatever the logits (a grammar at a point with a single continuation). A strategy may
// then append that token without computing the step's distribution (see Session.Forced).
type Forcer interface {
	LogitsProcessor
	// Forced returns the only token that may follow seq's tokens and true, or false when
	// more than one may (or none: the step's processing reports that).
	Forced(seq *Sequence) (TokenID, bool)
}

// BatchProcessor is a stateless processor that can work on many sequences in one call (a
// plugin that crosses a process boundary once per step instead of once per row). When every
// sequence of a step shares the same instance, the session calls ProcessBatch once.
type BatchProcessor interface {
	LogitsProcessor
	ProcessBatch(seqs []*Sequence, cands []*Candidates) error
}

// ProcessorFunc adapts a function to LogitsProcessor; its Name is "func".
type ProcessorFunc func(seq *Sequence, c *Candidates) error

// Name implements LogitsProcessor.
func (f ProcessorFunc) Name() string { return "func" }

// Process implements LogitsProcessor.
func (f ProcessorFunc) Process(seq *Sequence, c *Candidates) error { return f(seq, c) }

// Chain is an ordered list of processors; it is itself a processor that runs each in order and
// stops at the first error.
type Chain []LogitsProcessor

// Name implements LogitsProcessor.
func (ch Chain) Name() string { return "chain" }

// Process implements LogitsProcessor.
func (ch Chain) Process(seq *Sequence, c *Candidates) error {
	for _, p := range ch {
		if err := p.Process(seq, c); err != nil {
			return err
		}
	}
	return nil
}

// Resyncer is a StatefulProcessor whose state needs no snapshot to be rolled back: it is
// rebuilt from the sequence it is given at every call (penalties recount their window from
// seq.Tokens()), or it is a random stream that a Truncate does not rewind, like the sequence's
// own sampling stream. Session.Truncate restores every other stateful processor from a
// snapshot taken after each appended token.
type Resyncer interface {
	StatefulProcessor
	// Resyncs marks the type; it is never called.
	Resyncs()
}
