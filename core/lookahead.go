package core

import (
	"context"
	"fmt"
)

// Speculative strategies try tokens before committing to them. The primitives here let them
// run the model ahead of a sequence's tokens, run its processor chain on any row, and append
// tokens provisionally — processors see them — then undo.

// ForwardAhead runs q's pending tokens and then tokens through q's model state without
// appending tokens to q: the state runs ahead of q.Tokens() (speculative verification). It
// returns one row per token run (pending ones first) when all is set, else the row after the
// last. The rows stay valid until the next forward on q. Bring
// the state back with RollbackState; tokens later appended that the state already holds are
// not forwarded again.
func (s *Session) ForwardAhead(q *Sequence, tokens []TokenID, all bool) ([][]float32, error) {
	if err := s.ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.usable(q, "forward", false); err != nil {
		return nil, err
	}
	if len(tokens) > 0 && s.req.Return.Lineage {
		s.note(LineageEvent{Op: LineageVerify, Seq: q.index, Tokens: append([]TokenID(nil), tokens...), Len: q.NumGenerated()})
	}
	if p := q.Pending(); len(p) > 0 {
		tokens = append(append([]TokenID(nil), p...), tokens...)
	}
	if len(tokens) == 0 {
		return nil, nil
	}
	base, rows, err := s.forwardRows(s.ctx, q, tokens, all)
	if err != nil {
		return nil, err
	}
	q.dropStep() // the state's row buffer now holds these rows
	if err := s.fillHoles(q, base, rows, all); err != nil {
		return nil, err
	}
	return rows, nil
}

// RollbackState truncates q's model state to n tokens (n ≤ len(q.Tokens())), so that the
// tokens after n are pending again. It leaves q's tokens as they are.
func (s *Session) RollbackState(q *Sequence, n int) error {
	if n > len(q.tokens) || n < 0 {
		return fmt.Errorf("sequence %d: roll state back to %d of %d tokens", q.index, n, len(q.tokens))
	}
	if q.state.Len() > n {
		if err := q.state.Truncate(n); err != nil {
			return fmt.Errorf("sequence %d: %w", q.index, err)
		}
	}
	return nil
}

// ProcessRow makes row (a row of ForwardAhead, following q's current tokens) q's next step and
// processes it as Process does (the chain runs on row in place); logprobs and traces are
// recorded for the token Append adds next.
func (s *Session) ProcessRow(q *Sequence, row []float32) (*Candidates, error) {
	if err := s.usable(q, "process", true); err != nil {
		return nil, err
	}
	q.setRow(row)
	return s.Process(q)
}

// ProcessDraft runs q's processor chain on a draft model's row without recording anything.
// It uses candidates of its own, so q's next step is left as it was.
func (s *Session) ProcessDraft(q *Sequence, row []float32) (*Candidates, error) {
	q.draftCands.Reset(row)
	for i, p := range q.chain {
		if err := p.Process(q, &q.draftCands); err != nil {
			return nil, processorError(i, p, err)
		}
	}
	return &q.draftCands, nil
}

// Mark is a point a sequence can be rolled back to after provisional tokens.
type Mark struct {
	tokens int
	chain  []LogitsProcessor
}

// Mark records q's tokens and a clone of its stateful processors.
func (s *Session) Mark(q *Sequence) Mark {
	m := Mark{tokens: len(q.tokens), chain: make([]LogitsProcessor, len(q.chain))}
	for i, p := range q.chain {
		if sp, ok := p.(StatefulProcessor); ok {
			m.chain[i] = sp.Clone()
		} else {
			m.chain[i] = p
		}
	}
	return m
}

// Push appends id to q provisionally: processors observe it (Accept) and see it in
// q.Tokens(), but nothing is recorded, checked or streamed. Undo with Rollback.
func (s *Session) Push(q *Sequence, id TokenID) {
	q.tokens = append(q.tokens, id)
	for _, p := range q.chain {
		if sp, ok := p.(StatefulProcessor); ok {
			sp.Accept(q, id)
		}
	}
}

// Rollback undoes the Pushes since m: q's tokens and processor states return to the mark. The
// model state is not touched (see RollbackState).
func (s *Session) Rollback(q *Sequence, m Mark) {
	if len(q.tokens) > m.tokens {
		q.bumpRevision()
	}
	q.tokens = q.tokens[:m.tokens]
	for i, p := range m.chain {
		if sp, ok := p.(StatefulProcessor); ok {
			q.chain[i] = sp.Clone()
		}
	}
}

// ForwardModel runs a forward of a helper model (a speculative draft) and counts it in the
// session's stats.
func (s *Session) ForwardModel(ctx context.Context, m Model, items []ForwardItem) error {
	if err := m.Forward(ctx, items); err != nil {
		return err
	}
	s.stats.DraftForwards++
	return nil
}
