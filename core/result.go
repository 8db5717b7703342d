package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// result assembles the Result and releases every model state. Sequences still running are
// finished with the reason derived from err.
func (s *Session) result(err error) *Result {
	reason := FinishError
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		reason = FinishCancelled
	}
	outs := s.outputs
	if outs == nil {
		for _, q := range s.seqs {
			if !q.discarded {
				outs = append(outs, q)
			}
		}
	}
	for _, q := range outs {
		s.fillLastHoles(q)
	}
	total := time.Since(s.start)
	res := &Result{PromptTokens: s.prompt, PromptLogprobs: s.promptLogprobs, PromptTopLogprobs: s.promptTop, Seed: s.seed, Stats: s.stats}
	for _, q := range s.seqs {
		if !q.Finished() {
			detail := "the strategy returned without finishing it"
			if err != nil {
				detail = err.Error()
			}
			q.finish, q.finishDetail = reason, detail
			if !q.discarded {
				s.note(LineageEvent{Op: LineageFinish, Seq: q.index, Len: q.NumGenerated(), Reason: reason})
			}
		}
	}
	res.GeneratedTokens = s.generated
	if res.Stats.Drafted > 0 {
		res.Stats.AcceptanceRate = float64(res.Stats.Accepted) / float64(res.Stats.Drafted)
	}
	for i, q := range outs {
		s.note(LineageEvent{Op: LineageOutput, Seq: q.index, Len: q.NumGenerated(), Index: i})
	}
	s.closing = true
	res.Lineage = s.lineage
	for i, q := range outs {
		text := q.text
		if q.textEnd >= 0 {
			text = text[:q.textEnd]
		}
		res.Sequences = append(res.Sequences, SequenceResult{
			Index:        i,
			Tokens:       append([]TokenID{}, q.Generated()...),
			Text:         string(text),
			Scores:       q.scores,
			Logprobs:     q.logprobs,
			TopLogprobs:  q.top,
			FinishReason: q.finish,
			FinishDetail: q.finishDetail,
			SumLogprob:   q.sumLogprob,
			Score:        q.score,
			Trace:        q.trace,
		})
	}
	for _, q := range s.seqs {
		s.Discard(q)
	}
	res.CachedPromptTokens = s.cachedPrompt
	res.Timings = Timings{Prefill: s.prefillDur, Total: total, Decode: total - s.prefillDur}
	if s.prefillDur > 0 {
		res.Timings.PrefillTokensPerSecond = float64(len(s.prompt)) / s.prefillDur.Seconds()
	}
	if res.Timings.Decode > 0 {
		res.Timings.DecodeTokensPerSecond = float64(res.GeneratedTokens) / res.Timings.Decode.Seconds()
	}
	return res
}

// fillLastHoles fills the raw details of tokens q appended with no row that no Forward ran
// afterwards (q finished first): one forward of its pending tokens gives their rows. On
// failure (a cancelled request) the details stay zero.
func (s *Session) fillLastHoles(q *Sequence) {
	if len(q.holes) == 0 || q.discarded || len(q.Pending()) == 0 {
		return
	}
	base, rows, err := s.forwardRows(context.WithoutCancel(s.ctx), q, q.Pending(), true)
	if err != nil {
		return
	}
	q.dropStep()
	_ = s.fillHoles(q, base, rows, true)
}

// forwardRows runs tokens (the next of q's pending ones, or tokens ahead of them) through the
// model outside Forward's batching, with a row for each when all is set, else the row after
// the last: the prompt's chunks for PromptLogprobs, a finished sequence's last holes,
// ForwardAhead's verifications. It returns the position of the first token and the rows.
func (s *Session) forwardRows(ctx context.Context, q *Sequence, tokens []TokenID, all bool) (base int, rows [][]float32, err error) {
	base = q.state.Len()
	items := []ForwardItem{{State: q.state, Tokens: tokens, AllLogits: all}}
	if err := s.pipe.Model.Forward(ctx, items); err != nil {
		return 0, nil, fmt.Errorf("model forward: %w", err)
	}
	s.stats.Forwards++
	return base, items[0].Logits, nil
}
