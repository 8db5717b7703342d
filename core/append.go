package core

import "fmt"

// Append adds a chosen token to q and consumes q's next step: it records the requested details
// of the step (the raw log-probability and top tokens of the row, the trace of the processing),
// tells q's stateful processors, extends the text, checks end-of-generation tokens, the
// stopping criteria and the token limits, and streams an event. It returns the event
// callback's error, if any.
//
// A token may be appended with no current row (two Appends without a Forward between them, a
// forced token after a Truncate): its raw details are then filled in by the Forward that runs
// the token before it.
func (s *Session) Append(q *Sequence, ch Choice) error {
	if err := s.usable(q, "append", true); err != nil {
		return err
	}
	if ch.ID < 0 || int(ch.ID) >= s.pipe.Model.Config().VocabSize {
		return fmt.Errorf("append: sequence %d: token %d outside the vocabulary [0, %d)", q.index, ch.ID, s.pipe.Model.Config().VocabSize)
	}
	ret := s.req.Return
	step := q.NumGenerated()
	have := q.current()
	if have && (ret.Logprobs || ret.TopLogprobs > 0 || ret.Trace > 0) {
		if err := s.record(q); err != nil {
			return fmt.Errorf("sequence %d, step %d: %w", q.index, step, err)
		}
	}
	if !have && (ret.Logprobs || ret.TopLogprobs > 0 || ret.Trace > 0) {
		q.holes = append(q.holes, step)
	}
	q.tokens = append(q.tokens, ch.ID)
	s.generated++
	if ret.Logprobs {
		q.scores = append(q.scores, ch.Logprob)
		var lp float32
		if have {
			lp = q.next.raw[ch.ID] - q.next.rawLogZ
		}
		q.logprobs = append(q.logprobs, lp)
	}
	if ret.TopLogprobs > 0 {
		var top []TokenProb
		if have {
			top = append(top, q.next.rawTop...)
		}
		q.top = append(q.top, top)
	}
	if ret.Trace > 0 {
		var stages []TraceStage
		if have {
			stages = q.next.stages
		}
		q.trace = append(q.trace, TraceStep{Step: step, Chosen: ch.ID, Text: string(s.pipe.Tokenizer.TokenBytes(ch.ID)), Stages: stages})
	}
	q.dropStep()
	for _, p := range q.chain {
		if sp, ok := p.(StatefulProcessor); ok {
			sp.Accept(q, ch.ID)
		}
	}
	if q.keepSnap {
		q.snaps = append(q.snaps[:step], snapshot(q.chain))
	}
	q.text = append(q.text, s.pipe.Tokenizer.TokenBytes(ch.ID)...)
	if s.req.Return.Lineage { // (the event's token slice would cost an allocation per token)
		s.note(LineageEvent{Op: LineageAppend, Seq: q.index, Tokens: []TokenID{ch.ID}, Logprob: ch.Logprob, Len: q.NumGenerated()})
	}
	if st := s.checkStop(q, ch.ID); st.Reason != FinishNone {
		if st.CutText {
			q.textEnd = min(max(st.TextEnd, 0), len(q.text))
		}
		q.finish, q.finishDetail = st.Reason, st.Detail
		s.note(LineageEvent{Op: LineageFinish, Seq: q.index, Len: q.NumGenerated(), Reason: st.Reason})
	}
	return s.emit(q, ch)
}

// snapshot returns clones of chain's stateful processors (nil for the others).
func snapshot(chain []LogitsProcessor) []LogitsProcessor {
	out := make([]LogitsProcessor, len(chain))
	for i, p := range chain {
		if sp, ok := p.(StatefulProcessor); ok {
			if _, resyncs := p.(Resyncer); !resyncs {
				out[i] = sp.Clone()
			}
		}
	}
	return out
}

// Forced reports whether q's next token is decided before the model runs: some processor of
// q's chain is a Forcer that allows only one token. A strategy may Append it at once, with
// log-probability 0 in the processed distribution (it has probability 1 there); its raw
// details are filled in by the next Forward, as for any token appended with no row. Other
// processors of the chain do not see that step (they could not allow another token). q must
// be running.
func (s *Session) Forced(q *Sequence) (TokenID, bool) {
	if q.Finished() {
		return -1, false
	}
	for _, p := range q.chain {
		if f, ok := p.(Forcer); ok {
			if id, ok := f.Forced(q); ok {
				return id, true
			}
		}
	}
	return -1, false
}
