package core

import "fmt"

// Forward runs the pending tokens of the given sequences (those appended since their last
// forward; the whole prompt at first) through the model in one batched call, and makes the row
// after each one's last token its next step. A sequence with no row and nothing pending (its
// state ran ahead of its tokens) re-runs its last token. Finished sequences, sequences with nothing
// pending and repeated entries are skipped. Raw details that an Append could not record (a
// token appended with no row, see Append) are filled in from the rows of this forward.
// (Speculative verification, which needs a row per drafted token, uses ForwardAhead.)
func (s *Session) Forward(seqs ...*Sequence) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	for _, q := range seqs {
		if err := s.usable(q, "forward", false); err != nil {
			return err
		}
	}
	s.items, s.fwd = s.items[:0], s.fwd[:0]
	defer func() {
		for _, q := range s.fwd {
			q.inBatch = false
		}
	}()
	for _, q := range seqs {
		if q.Finished() || q.inBatch {
			continue
		}
		if !q.current() && len(q.Pending()) == 0 && len(q.tokens) > 0 {
			// No row and nothing pending (the state ran ahead, as ForwardAhead leaves it):
			// re-run the last token to get the row back.
			if err := q.state.Truncate(len(q.tokens) - 1); err != nil {
				return fmt.Errorf("forward: sequence %d: %w", q.index, err)
			}
		}
		if len(q.Pending()) == 0 {
			continue
		}
		q.inBatch = true
		s.items = append(s.items, ForwardItem{State: q.state, Tokens: q.Pending(), AllLogits: q.holeAfter(q.state.Len())})
		s.fwd = append(s.fwd, q)
	}
	if len(s.items) == 0 {
		return nil
	}
	// The pending tokens' positions, before the states advance.
	base := s.bases[:0]
	for _, q := range s.fwd {
		base = append(base, q.state.Len())
	}
	s.bases = base
	if err := s.pipe.Model.Forward(s.ctx, s.items); err != nil {
		return fmt.Errorf("model forward: %w", err)
	}
	s.stats.Forwards++
	for i, q := range s.fwd {
		rows := s.items[i].Logits
		if len(rows) == 0 {
			return fmt.Errorf("model forward returned no logits for sequence %d", q.index)
		}
		if err := s.fillHoles(q, base[i], rows, s.items[i].AllLogits); err != nil {
			return err
		}
		q.setRow(rows[len(rows)-1])
		s.items[i] = ForwardItem{}
	}
	return nil
}

// holeAfter reports whether q has a hole at a token after position from (a token that the
// rows of a forward starting at from predict).
func (q *Sequence) holeAfter(from int) bool {
	for _, g := range q.holes {
		if q.promptLen+g > from {
			return true
		}
	}
	return false
}

// fillHoles records the raw details of q's holes from the rows of a forward of q's tokens from
// position base on, one row per token: row j follows token base+j and so predicts the token
// after it. A hole whose predecessor was not in the forward (the model state already held it)
// cannot be filled and keeps zero details.
func (s *Session) fillHoles(q *Sequence, base int, rows [][]float32, all bool) error {
	if !all || len(q.holes) == 0 {
		return nil
	}
	for _, g := range q.holes {
		j := q.promptLen + g - 1 - base
		if j < 0 || j >= len(rows) {
			continue
		}
		id := q.tokens[q.promptLen+g]
		var c Candidates
		logZ, top, err := s.rawDetails(&c, rows[j], nil)
		if err != nil {
			return fmt.Errorf("sequence %d, step %d: %w", q.index, g, err)
		}
		if g < len(q.logprobs) {
			q.logprobs[g] = rows[j][id] - logZ
		}
		if g < len(q.top) {
			q.top[g] = top
		}
		if g < len(q.trace) && s.req.Return.Trace > 0 {
			c.Reset(rows[j])
			q.trace[g].Stages = []TraceStage{s.traceStage(&c, "model")}
		}
	}
	q.holes = q.holes[:0]
	return nil
}
