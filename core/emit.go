package core

import (
	"fmt"
	"unicode/utf8"
)

func (s *Session) checkStop(q *Sequence, id TokenID) Stop {
	for _, e := range s.eog {
		if id == e {
			return Stop{Reason: FinishEOS, Detail: fmt.Sprintf("end-of-generation token %d", id)}
		}
	}
	for _, c := range s.pipe.Stopping {
		if st := c.Check(q); st.Reason != FinishNone {
			return st
		}
	}
	if q.NumGenerated() >= s.req.MaxNewTokens {
		return Stop{Reason: FinishLength, Detail: fmt.Sprintf("max_new_tokens = %d", s.req.MaxNewTokens)}
	}
	if n := s.pipe.Model.Config().ContextLength; n > 0 && len(q.tokens) >= n {
		return Stop{Reason: FinishLength, Detail: fmt.Sprintf("context length %d", n)}
	}
	return Stop{}
}

// emit streams the text of q that became safe to show. A running sequence keeps back an
// incomplete UTF-8 character and the stop-string hold-back.
func (s *Session) emit(q *Sequence, ch Choice) error {
	if s.req.OnEvent == nil || s.deferEvents {
		return nil
	}
	ev := Event{Sequence: q.index, Token: ch.ID, Score: ch.Logprob, Finished: q.Finished(), FinishReason: q.finish}
	if n := len(q.trace); n > 0 && q.trace[n-1].Stages != nil {
		t := q.trace[n-1]
		ev.Trace = &t
	}
	ev.Text = s.takeText(q)
	ev.Logprobs = s.takeLogprobs(q)
	ev.Prompt = s.takePrompt(q)
	return s.req.OnEvent(ev)
}

// takePrompt returns the prompt's details for q's first event (see Event.Prompt), nil for the
// others or unless the request asks for them.
func (s *Session) takePrompt(q *Sequence) []TokenLogprobs {
	if q.promptSent || s.promptLogprobs == nil {
		return nil
	}
	q.promptSent = true
	if s.promptEvent == nil {
		s.promptEvent = pairDetails(s.prompt, 0, nil, s.promptLogprobs, s.promptTop)
	}
	return s.promptEvent
}

// takeLogprobs returns the details of q's tokens that became final since its last event (see
// Event.Logprobs); nil unless the request asks for logprobs. A finished sequence's tokens are
// all final: the raw details of tokens it appended with no row, which no Forward will run now,
// are filled first (as the Result's are).
func (s *Session) takeLogprobs(q *Sequence) []TokenLogprobs {
	ret := s.req.Return
	if !ret.Logprobs && ret.TopLogprobs <= 0 {
		return nil
	}
	gen := q.Generated()
	end := len(gen)
	if q.Finished() {
		s.fillLastHoles(q)
	} else {
		for _, g := range q.holes {
			end = min(end, g)
		}
	}
	from := q.reported
	for ; q.reported < end; q.reported++ {
		n := len(s.pipe.Tokenizer.TokenBytes(gen[q.reported]))
		if !q.Finished() && q.reportedBytes+n > q.streamed {
			break
		}
		q.reportedBytes += n
	}
	if q.reported == from {
		return nil
	}
	return pairDetails(gen[from:q.reported], from, q.scores, q.logprobs, q.top)
}

func (s *Session) takeText(q *Sequence) string {
	end := len(q.text)
	if q.textEnd >= 0 {
		end = q.textEnd
	}
	if !q.Finished() {
		end = completeUTF8(q.text, max(end-s.holdBack, 0))
	}
	if end <= q.streamed {
		return ""
	}
	t := string(q.text[q.streamed:end])
	q.streamed = end
	return t
}

// completeUTF8 returns the largest e ≤ end such that b[:e] does not end inside a character
// whose remaining bytes may still arrive.
func completeUTF8(b []byte, end int) int {
	for i := end - 1; i >= 0 && i >= end-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:end]) {
				return i
			}
			return end
		}
	}
	return end
}

// Finish ends q with a reason (strategies use it for their own ends: a pruned beam, a
// cancelled request) and streams its remaining text. A discarded or finished sequence, or an
// empty reason, leaves q as it is.
func (s *Session) Finish(q *Sequence, reason FinishReason, detail string) {
	if q == nil || q.discarded || q.Finished() || reason == FinishNone {
		return
	}
	q.finish, q.finishDetail = reason, detail
	s.note(LineageEvent{Op: LineageFinish, Seq: q.index, Len: q.NumGenerated(), Reason: reason})
	if s.req.OnEvent != nil && !s.deferEvents {
		_ = s.req.OnEvent(Event{Sequence: q.index, Token: -1, Text: s.takeText(q), Logprobs: s.takeLogprobs(q), Prompt: s.takePrompt(q), Finished: true, FinishReason: reason})
	}
}

// emitFork starts the events of f, a new fork: its text and details so far, and its finish
// when it forked a finished sequence.
func (s *Session) emitFork(f *Sequence) error {
	if s.req.OnEvent == nil || s.deferEvents {
		return nil
	}
	ev := Event{Sequence: f.index, Token: -1, Text: s.takeText(f), Logprobs: s.takeLogprobs(f), Finished: f.Finished(), FinishReason: f.finish}
	if ev.Text == "" && len(ev.Logprobs) == 0 && !ev.Finished {
		return nil
	}
	ev.Prompt = s.takePrompt(f)
	return s.req.OnEvent(ev)
}

// DeferEvents stops per-token events: a strategy whose sequences are provisional (beam search)
// calls it first and reports its final sequences with EmitFinal.
func (s *Session) DeferEvents() { s.deferEvents = true }

// EmitFinal sends one event per sequence with its whole text, in order, numbered by position.
func (s *Session) EmitFinal(seqs []*Sequence) error {
	if s.req.OnEvent == nil {
		return nil
	}
	for i, q := range seqs {
		last := TokenID(-1)
		if g := q.Generated(); len(g) > 0 {
			last = g[len(g)-1]
		}
		ev := Event{Sequence: i, Token: last, Text: s.takeText(q), Logprobs: s.takeLogprobs(q), Prompt: s.takePrompt(q), Finished: true, FinishReason: q.finish}
		if err := s.req.OnEvent(ev); err != nil {
			return err
		}
	}
	return nil
}

// retract withdraws what was streamed of q but is no longer q's (a Truncate cut it): the
// event's Retract counts the bytes of text taken back, back to a character boundary, and
// RetractTokens the tokens whose details were sent.
func (s *Session) retract(q *Sequence) error {
	n, nTokens := 0, 0
	if q.streamed > len(q.text) {
		keep := completeUTF8(q.text, len(q.text))
		n = q.streamed - keep
		q.streamed = keep
	}
	reported := q.reported
	if gen := q.NumGenerated(); q.reported > gen {
		q.reported, q.reportedBytes = gen, len(q.text)
	}
	// A running sequence's details go no further than its streamed text (see takeLogprobs).
	for gen := q.Generated(); q.reportedBytes > q.streamed; {
		q.reported--
		q.reportedBytes -= len(s.pipe.Tokenizer.TokenBytes(gen[q.reported]))
	}
	nTokens = reported - q.reported
	if n == 0 && nTokens == 0 || s.req.OnEvent == nil || s.deferEvents {
		return nil
	}
	return s.req.OnEvent(Event{Sequence: q.index, Token: -1, Retract: n, RetractTokens: nTokens})
}
