package core

import "fmt"

// Fork returns a new sequence (the next index, with its own random stream) that continues from
// q: the same tokens, text, details and finish state, a fork of its model state
// (copy-on-write in the cache), clones of its stateful processors and its own copy of q's next
// step — the raw row, or the processed candidates, with their recorded details — so that
// whatever q does next (forward, process, append) never changes what the fork sees. The fork's
// events are its own: Fork streams the fork's text so far (and its tokens' details) as its first
// event, and returns the event callback's error, if any, with no fork.
func (s *Session) Fork(q *Sequence) (*Sequence, error) {
	if err := s.usable(q, "fork", false); err != nil {
		return nil, err
	}
	state, err := q.state.Fork()
	if err != nil {
		return nil, fmt.Errorf("forking sequence %d: %w", q.index, err)
	}
	return s.started(s.forkWith(q, state))
}

// started streams the first event of a new fork f (see emitFork); if the event callback
// fails, f is discarded and the error returned.
func (s *Session) started(f *Sequence) (*Sequence, error) {
	if err := s.emitFork(f); err != nil {
		s.Discard(f)
		return nil, err
	}
	return f, nil
}

// ForkCopy is Fork with a full copy of q's cached state where the state supports it
// (StateCopier); otherwise it is Fork. It exists to measure what copy-on-write saves.
func (s *Session) ForkCopy(q *Sequence) (*Sequence, error) {
	if err := s.usable(q, "fork", false); err != nil {
		return nil, err
	}
	c, ok := q.state.(StateCopier)
	if !ok {
		return s.Fork(q)
	}
	state, err := c.Copy()
	if err != nil {
		return nil, fmt.Errorf("copying sequence %d: %w", q.index, err)
	}
	return s.started(s.forkWith(q, state))
}

func (s *Session) forkWith(q *Sequence, state State) *Sequence {
	f := s.newSequence(state)
	f.tokens = append(make([]TokenID, 0, cap(q.tokens)), q.tokens...)
	f.promptLen = q.promptLen
	f.text = append([]byte(nil), q.text...)
	f.textEnd = q.textEnd // f.streamed and f.reported stay 0: its events start with its whole text
	f.finish, f.finishDetail = q.finish, q.finishDetail
	f.scores = append([]float32(nil), q.scores...)
	f.logprobs = append([]float32(nil), q.logprobs...)
	f.top = append([][]TokenProb(nil), q.top...)
	f.trace = append([]TraceStep(nil), q.trace...)
	f.holes = append([]int(nil), q.holes...)
	f.sumLogprob, f.score = q.sumLogprob, q.score
	f.chain = cloneChain(q.chain)
	f.keepSnap = q.keepSnap
	f.snaps = append([][]LogitsProcessor(nil), q.snaps...) // snapshots are never modified
	f.revision = q.revision                                // same tokens: what q's processors counted holds for f
	f.copyStepFrom(q)
	s.note(LineageEvent{Op: LineageFork, Seq: f.index, Parent: q.index, Len: f.NumGenerated()})
	return f
}
