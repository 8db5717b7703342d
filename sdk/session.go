package sdk

import (
	"context"
	"errors"

	"github.com/loomlm/loom/sdk/pluginpb"
	"google.golang.org/grpc/status"
)

// Strategy is the search itself (as core.Strategy): it drives the host's Session — prefill,
// fork, forward, process, select, append, truncate, finish — and returns when every output
// sequence has finished.
type Strategy interface {
	Name() string
	Decode(ctx context.Context, s *Session) error
}

// Request is what a strategy knows of the request it decodes.
type Request struct {
	// N is the number of sequences asked for; MaxNewTokens the per-sequence limit (the host
	// enforces it when appending).
	N            int
	MaxNewTokens int
	Seed         uint64
	Prompt       []TokenID
}

// Choice is a token and its log-probability under the processed distribution.
type Choice struct {
	ID      TokenID
	Logprob float32
}

// Session is the host's core.Session as a strategy plugin drives it. Each method is one call
// to the host; the sequences it returns are kept up to date by the calls that change them.
type Session struct {
	ctx    context.Context
	client pluginpb.SessionClient
	req    Request
	seqs   map[int]*Sequence
}

// Request returns the request's settings.
func (s *Session) Request() Request { return s.req }

func rpcErr(err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return errors.New(st.Message())
	}
	return err
}

// update refreshes sequences from the host's answer; appended says whether the call appended
// a token to each (so that its log-probability counts).
func (s *Session) update(infos []*pluginpb.SequenceInfo, appended bool) []*Sequence {
	out := make([]*Sequence, 0, len(infos))
	for _, in := range infos {
		q := s.seqs[int(in.Index)]
		if q == nil {
			q = &Sequence{index: int(in.Index), promptLen: len(s.req.Prompt)}
			s.seqs[q.index] = q
		}
		q.follow(len(in.Tokens), appended, in.LastLogprob)
		q.tokens = append(append(q.tokens[:0], s.req.Prompt...), in.Tokens...)
		q.text = append(q.text[:0], in.Text...)
		q.finish = FinishReason(in.FinishReason)
		out = append(out, q)
	}
	return out
}

func refs(qs []*Sequence) []int32 {
	ids := make([]int32, len(qs))
	for i, q := range qs {
		ids[i] = int32(q.index)
	}
	return ids
}

// Start prefills the prompt and forks it into n sequences (indices 0…n-1).
func (s *Session) Start(n int) ([]*Sequence, error) {
	r, err := s.client.Start(s.ctx, &pluginpb.StartRequest{N: uint32(max(n, 1))})
	if err != nil {
		return nil, rpcErr(err)
	}
	return s.update(r.Sequences, false), nil
}

// Fork returns a new sequence that continues from q.
func (s *Session) Fork(q *Sequence) (*Sequence, error) {
	r, err := s.client.Fork(s.ctx, &pluginpb.SeqRef{Index: int32(q.index)})
	if err != nil {
		return nil, rpcErr(err)
	}
	if len(r.Sequences) != 1 {
		return nil, errors.New("host returned no forked sequence")
	}
	f := s.update(r.Sequences, false)[0]
	f.logprobs, f.sum = append([]float32(nil), q.logprobs...), q.sum
	return f, nil
}

// Forward runs the pending tokens of the sequences through the model in one batch.
func (s *Session) Forward(qs ...*Sequence) error {
	_, err := s.client.Forward(s.ctx, &pluginpb.SeqRefs{Indices: refs(qs)})
	return rpcErr(err)
}

// Process runs the processor chain on each sequence's current logits and returns its topN
// most likely candidates with their log-probabilities, most likely first.
func (s *Session) Process(topN int, qs ...*Sequence) ([][]Choice, error) {
	r, err := s.client.Process(s.ctx, &pluginpb.ProcessRequest{Indices: refs(qs), TopN: uint32(max(topN, 1))})
	if err != nil {
		return nil, rpcErr(err)
	}
	out := make([][]Choice, len(r.Candidates))
	for i, c := range r.Candidates {
		for _, t := range c.Top {
			out[i] = append(out[i], Choice{ID: t.Id, Logprob: t.Logprob})
		}
	}
	return out, nil
}

func (s *Session) selectTokens(mode pluginpb.SelectMode, qs []*Sequence) ([]Choice, error) {
	r, err := s.client.Select(s.ctx, &pluginpb.SelectRequest{Indices: refs(qs), Mode: mode})
	if err != nil {
		return nil, rpcErr(err)
	}
	out := make([]Choice, len(r.Choices))
	for i, c := range r.Choices {
		out[i] = Choice{ID: c.Id, Logprob: c.Logprob}
	}
	return out, nil
}

// Greedy processes each sequence and returns its most likely token, without appending it.
func (s *Session) Greedy(qs ...*Sequence) ([]Choice, error) {
	return s.selectTokens(pluginpb.SelectMode_SELECT_GREEDY, qs)
}

// Sample processes each sequence and draws a token from it with the sequence's own seeded
// stream (the same draws a built-in strategy would make), without appending it.
func (s *Session) Sample(qs ...*Sequence) ([]Choice, error) {
	return s.selectTokens(pluginpb.SelectMode_SELECT_SAMPLE, qs)
}

// Append adds a chosen token to q; the host checks stopping criteria and limits, which may
// finish q.
func (s *Session) Append(q *Sequence, ch Choice) error {
	r, err := s.client.Append(s.ctx, &pluginpb.AppendRequest{Index: int32(q.index), Choice: &pluginpb.TokenLogprob{Id: ch.ID, Logprob: ch.Logprob}})
	if err != nil {
		return rpcErr(err)
	}
	s.update(r.Sequences, true)
	return nil
}

func (s *Session) step(mode pluginpb.SelectMode, qs []*Sequence) error {
	r, err := s.client.Step(s.ctx, &pluginpb.SelectRequest{Indices: refs(qs), Mode: mode})
	if err != nil {
		return rpcErr(err)
	}
	s.update(r.Sequences, true)
	return nil
}

// StepGreedy forwards the sequences, appends each one's most likely token: one generated
// token per sequence in one call.
func (s *Session) StepGreedy(qs ...*Sequence) error {
	return s.step(pluginpb.SelectMode_SELECT_GREEDY, qs)
}

// StepSample forwards the sequences and appends a sampled token to each.
func (s *Session) StepSample(qs ...*Sequence) error {
	return s.step(pluginpb.SelectMode_SELECT_SAMPLE, qs)
}

// Finish ends q with a reason of the strategy's own.
func (s *Session) Finish(q *Sequence, reason FinishReason, detail string) error {
	_, err := s.client.Finish(s.ctx, &pluginpb.FinishRequest{Index: int32(q.index), Reason: string(reason), Detail: detail})
	if err == nil {
		q.finish = reason
	}
	return rpcErr(err)
}

// Truncate rolls q back to its first generated tokens (its prompt is kept); its SumLogprob
// becomes the sum over the tokens kept.
func (s *Session) Truncate(q *Sequence, generated int) error {
	r, err := s.client.Truncate(s.ctx, &pluginpb.TruncateRequest{Index: int32(q.index), Length: uint32(max(generated, 0))})
	if err != nil {
		return rpcErr(err)
	}
	s.update(r.Sequences, false)
	return nil
}

// Discard drops q from the request's results.
func (s *Session) Discard(q *Sequence) error {
	_, err := s.client.Discard(s.ctx, &pluginpb.SeqRef{Index: int32(q.index)})
	return rpcErr(err)
}

// SetScore records a ranking score (as core.Sequence.SetScore).
func (s *Session) SetScore(q *Sequence, sumLogprob, score float64) error {
	_, err := s.client.SetScore(s.ctx, &pluginpb.ScoreRequest{Index: int32(q.index), SumLogprob: sumLogprob, Score: score})
	return rpcErr(err)
}

// SetOutputs fixes which sequences the result returns, in order.
func (s *Session) SetOutputs(qs ...*Sequence) error {
	_, err := s.client.SetOutputs(s.ctx, &pluginpb.SeqRefs{Indices: refs(qs)})
	return rpcErr(err)
}

// Refresh reloads the sequences' tokens, text and finish reasons from the host.
func (s *Session) Refresh(qs ...*Sequence) error {
	r, err := s.client.Get(s.ctx, &pluginpb.SeqRefs{Indices: refs(qs)})
	if err != nil {
		return rpcErr(err)
	}
	s.update(r.Sequences, false)
	return nil
}
