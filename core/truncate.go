package core

import "fmt"

// Truncate rolls q back to its first n tokens (n at least the prompt length): its tokens, text,
// recorded details, model state, stateful processors (from the snapshot taken after token n)
// and finish state become what they were with n tokens, and the ranking score set by
// SetScore is cleared. The row for the next token is gone with the tokens after it: the model
// state keeps n-1 tokens, so the next Forward re-runs token n to get it back. Truncating to
// the current length changes nothing. Random streams are not rewound (see Sample).
//
// Text already streamed past the cut is withdrawn with an event whose Retract counts the
// bytes taken back.
func (s *Session) Truncate(q *Sequence, n int) error {
	if err := s.usable(q, "truncate", false); err != nil {
		return err
	}
	if n < q.promptLen || n > len(q.tokens) {
		return fmt.Errorf("truncate sequence %d to %d tokens: must be in [%d, %d]", q.index, n, q.promptLen, len(q.tokens))
	}
	if n == len(q.tokens) {
		return nil
	}
	if keep := max(n-1, 0); q.state.Len() > keep {
		if err := q.state.Truncate(keep); err != nil {
			return fmt.Errorf("truncate sequence %d: %w", q.index, err)
		}
	}
	q.dropStep()
	q.bumpRevision()
	gen := n - q.promptLen
	q.tokens = q.tokens[:n]
	q.text = q.text[:0]
	for _, id := range q.Generated() {
		q.text = append(q.text, s.pipe.Tokenizer.TokenBytes(id)...)
	}
	q.scores = q.scores[:min(gen, len(q.scores))]
	q.logprobs = q.logprobs[:min(gen, len(q.logprobs))]
	q.top = q.top[:min(gen, len(q.top))]
	q.trace = q.trace[:min(gen, len(q.trace))]
	holes := q.holes[:0]
	for _, g := range q.holes {
		if g < gen {
			holes = append(holes, g)
		}
	}
	q.holes = holes
	if q.keepSnap {
		q.restoreChain(gen)
	}
	q.finish, q.finishDetail, q.textEnd = FinishNone, "", -1
	q.sumLogprob, q.score = 0, 0
	s.note(LineageEvent{Op: LineageTruncate, Seq: q.index, Len: q.NumGenerated()})
	return s.retract(q)
}

// restoreChain brings q's non-resyncing stateful processors back to their state after gen
// generated tokens.
func (q *Sequence) restoreChain(gen int) {
	var from []LogitsProcessor
	if gen == 0 {
		from = q.session.pipe.Processors
	} else {
		from = q.snaps[gen-1]
	}
	for i, p := range q.chain {
		if _, ok := p.(StatefulProcessor); !ok {
			continue
		}
		if _, resyncs := p.(Resyncer); resyncs {
			continue
		}
		q.chain[i] = from[i].(StatefulProcessor).Clone()
	}
	q.snaps = q.snaps[:gen]
}

// bumpRevision gives q a revision no sequence of its session has had.
func (q *Sequence) bumpRevision() {
	q.session.revisions++
	q.revision = q.session.revisions
}
