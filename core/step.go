package core

import (
	"fmt"
	"math"
)

// step is what a sequence's next token is chosen from. It is the one place that decides who
// may read or write a logits row, and for how long:
//
//   - row is the model's raw row after the sequence's first pos tokens. Its storage is either
//     borrowed — the buffer the model filled for the sequence's own State, valid until the
//     next model call on that State, which only this sequence makes — or buf, the step's own
//     copy (a fork's). No two sequences ever hold the same storage: Fork copies.
//   - The step is current only while pos == len(tokens). Append consumes it, Forward and
//     ProcessRow replace it, a Truncate that removes tokens drops it (the next Forward re-runs
//     the last kept token to get the row back), Discard releases it.
//   - Processing happens once per step: the first Process runs the chain over row in place
//     and keeps the result in cands; every later Process of the same step returns cands as
//     they are (a strategy's own edits included), and a chain that failed returns its error
//     again. Nothing is ever processed twice.
//   - What the request asks about the raw distribution (logprobs, top logprobs, the trace's
//     first stage) is captured from row before anything modifies it, and travels with the
//     step into forks.
type step struct {
	ok        bool // the step exists (row may be consumed by processing into a sparse set)
	row       []float32
	pos       int
	buf       []float32
	processed bool
	err       error // the chain's error, when processing failed
	cands     Candidates

	recorded bool // raw details below were captured from row
	raw      []float32
	rawLogZ  float32
	rawTop   []TokenProb
	stages   []TraceStage
}

// current reports whether q has a row for its next token.
func (q *Sequence) current() bool { return q.next.ok && q.next.pos == len(q.tokens) }

// setRow makes row (borrowed from the model, or owned by the caller) q's next step.
func (q *Sequence) setRow(row []float32) {
	q.next.ok, q.next.row, q.next.pos = true, row, len(q.tokens)
	q.next.processed, q.next.err, q.next.recorded = false, nil, false
	q.next.stages = nil
}

// dropStep forgets q's next step.
func (q *Sequence) dropStep() {
	q.next.ok, q.next.row = false, nil
	q.next.processed, q.next.err, q.next.recorded = false, nil, false
	q.next.stages = nil
}

// copyStepFrom makes f's next step an independent copy of q's.
func (f *Sequence) copyStepFrom(q *Sequence) {
	f.dropStep()
	if !q.current() {
		return
	}
	src, dst := &q.next, &f.next
	dst.ok, dst.pos = true, src.pos
	if src.processed {
		dst.cands.CopyFrom(&src.cands)
		dst.processed, dst.err = true, src.err
		dst.row = nil // consumed by processing: the candidates are the step now
	} else {
		dst.buf = append(dst.buf[:0], src.row...)
		dst.row = dst.buf
	}
	if src.recorded {
		dst.recorded = true
		dst.raw = append(dst.raw[:0], src.raw...)
		dst.rawLogZ = src.rawLogZ
		dst.rawTop = append(dst.rawTop[:0], src.rawTop...)
		dst.stages = append([]TraceStage(nil), src.stages...)
	}
}

// usable checks that q belongs to s and can still be worked on; op names the operation.
func (s *Session) usable(q *Sequence, op string, running bool) error {
	switch {
	case q == nil:
		return fmt.Errorf("%s: no sequence", op)
	case q.session != s:
		return fmt.Errorf("%s: sequence %d belongs to another session", op, q.index)
	case q.discarded:
		return fmt.Errorf("%s: sequence %d was discarded", op, q.index)
	case running && q.Finished():
		return fmt.Errorf("%s: sequence %d has finished (%s)", op, q.index, q.finish)
	}
	return nil
}

// Process runs q's processor chain on its current row and returns the resulting candidates.
// The chain runs once per row: a second Process before the next Append, Forward or Truncate
// returns the same candidates (see step). The candidates stay valid until then; a strategy may
// edit them (truncate, re-rank), and later Process, Greedy and Sample calls see its edits.
// Errors name the processor.
func (s *Session) Process(q *Sequence) (*Candidates, error) {
	cands, err := s.ProcessBatch([]*Sequence{q})
	if err != nil {
		return nil, err
	}
	return cands[0], nil
}

// ProcessBatch is Process for several sequences. A BatchProcessor shared by all the sequences
// it runs on is called once for the whole batch. Sequences already processed for their current
// row are not processed again; a sequence listed twice is processed once.
func (s *Session) ProcessBatch(seqs []*Sequence) ([]*Candidates, error) {
	for _, q := range seqs {
		if err := s.usable(q, "process", true); err != nil {
			return nil, err
		}
		if !q.current() {
			if p := len(q.Pending()); p > 0 {
				return nil, fmt.Errorf("process: sequence %d has %d token(s) not run through the model: forward it first", q.index, p)
			}
			return nil, fmt.Errorf("process: sequence %d has no logits for its next token: forward it first", q.index)
		}
	}
	s.batch = s.batch[:0]
	todo := s.todo[:0]
	for _, q := range seqs {
		s.batch = append(s.batch, &q.next.cands)
		if q.next.processed || q.inBatch {
			continue
		}
		q.inBatch = true
		todo = append(todo, q)
	}
	for _, q := range todo {
		q.inBatch = false
	}
	s.todo = todo
	if err := s.runChains(todo); err != nil {
		return nil, err
	}
	for _, q := range seqs {
		if q.next.err != nil {
			return nil, q.next.err
		}
	}
	return s.batch, nil
}

// runChains processes the current rows of todo (none processed yet) through their chains.
func (s *Session) runChains(todo []*Sequence) error {
	if len(todo) == 0 {
		return nil
	}
	cands := s.todoCands[:0]
	for _, q := range todo {
		if err := s.record(q); err != nil {
			q.next.processed, q.next.err = true, err
			return err
		}
		q.next.cands.Reset(q.next.row)
		q.next.processed = true // from here on the row may be rewritten: never run it again
		cands = append(cands, &q.next.cands)
	}
	s.todoCands = cands
	for i := range todo[0].chain {
		p := todo[0].chain[i]
		bp, ok := p.(BatchProcessor)
		for _, q := range todo[1:] {
			if ok && q.chain[i] != p {
				ok = false
			}
		}
		if ok && len(todo) > 1 {
			if err := bp.ProcessBatch(todo, cands); err != nil {
				return failAll(todo, processorError(i, p, err))
			}
		} else {
			for j, q := range todo {
				if err := q.chain[i].Process(q, cands[j]); err != nil {
					return failAll(todo, processorError(i, q.chain[i], err))
				}
			}
		}
		if s.req.Return.Trace > 0 {
			for _, q := range todo {
				q.next.stages = append(q.next.stages, s.traceStage(&q.next.cands, q.chain[i].Name()))
			}
		}
	}
	return nil
}

func failAll(todo []*Sequence, err error) error {
	for _, q := range todo {
		q.next.err = err
	}
	return err
}

func processorError(i int, p LogitsProcessor, err error) error {
	return fmt.Errorf("processors[%d] (%s): %w", i, p.Name(), err)
}

// record captures, once per step and before any processing, what the request asked about the
// raw distribution: the raw row for logprobs, the top raw tokens and the trace's model stage.
func (s *Session) record(q *Sequence) error {
	st := &q.next
	if st.recorded {
		return nil
	}
	ret := s.req.Return
	if ret.Logprobs || ret.TopLogprobs > 0 {
		st.raw = append(st.raw[:0], st.row...)
		logZ, top, err := s.rawDetails(&st.cands, st.raw, st.rawTop[:0])
		if err != nil {
			return err
		}
		st.rawLogZ, st.rawTop = logZ, top
	}
	st.stages = nil
	if ret.Trace > 0 {
		st.cands.Reset(st.row)
		st.stages = append(st.stages, s.traceStage(&st.cands, "model"))
	}
	st.recorded = true
	return nil
}

// rawDetails computes the normaliser of a raw row and, when asked, its top tokens as
// log-probabilities (appended to top), using c as scratch.
func (s *Session) rawDetails(c *Candidates, row []float32, top []TokenProb) (float32, []TokenProb, error) {
	c.Reset(row)
	probs, logZ, err := c.Probs()
	if err != nil {
		return 0, top, fmt.Errorf("model logits: %w", err)
	}
	if n := s.req.Return.TopLogprobs; n > 0 {
		top = s.topTokens(top, c, probs, n, true)
	}
	return logZ, top, nil
}

// traceStage describes c after a processor: how many tokens remain possible and the most
// probable ones.
func (s *Session) traceStage(c *Candidates, name string) TraceStage {
	st := TraceStage{Processor: name}
	if probs, _, err := c.Probs(); err == nil {
		for _, p := range probs {
			if p > 0 {
				st.Kept++
			}
		}
		st.Top = s.topTokens(nil, c, probs, s.req.Return.Trace, false)
	}
	return st
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
