package core

import (
	"fmt"
	"math"
)

// Greedy selects the most likely candidate. Its Logprob is computed only when the request
// asked for log-probabilities.
func (s *Session) Greedy(q *Sequence, c *Candidates) (Choice, error) {
	if c == nil {
		return Choice{}, fmt.Errorf("greedy: sequence %d: no candidates (Process returns them)", q.index)
	}
	id, err := c.Argmax()
	if err != nil {
		return Choice{}, fmt.Errorf("sequence %d, step %d: %w", q.index, q.NumGenerated(), err)
	}
	ch := Choice{ID: id}
	if s.req.Return.Logprobs {
		_, logZ, err := c.Probs()
		if err != nil {
			return Choice{}, err
		}
		v, _ := c.Logit(id)
		ch.Logprob = v - logZ
	}
	return ch, nil
}

// Sample draws a candidate from the softmax of c with q's random stream: one Float64 of the
// stream per call, so the k-th Sample of sequence i uses the k-th draw of NewRand(seed, i).
// Truncate does not rewind the stream: a continuation sampled again is a fresh draw.
func (s *Session) Sample(q *Sequence, c *Candidates) (Choice, error) {
	if c == nil {
		return Choice{}, fmt.Errorf("sample: sequence %d: no candidates (Process returns them)", q.index)
	}
	ch, err := SampleFrom(c, q.rng.Float64())
	if err != nil {
		return Choice{}, fmt.Errorf("sequence %d, step %d: %w", q.index, q.NumGenerated(), err)
	}
	return ch, nil
}

// SkipDraw consumes the draw of q's random stream that a Sample of this step would have used:
// a sampling strategy that appends a forced token (Session.Forced) calls it, so that forcing
// leaves every later draw, and so the output for a seed, as it would be without forcing.
func (s *Session) SkipDraw(q *Sequence) { q.rng.Float64() }

// SampleFrom selects the candidate at which the cumulative softmax of c first exceeds u (a
// uniform draw in [0, 1)) and returns it with its log-probability. Candidates are taken in
// their current order.
func SampleFrom(c *Candidates, u float64) (Choice, error) {
	probs, _, err := c.Probs()
	if err != nil {
		return Choice{}, err
	}
	var cum float64
	last := -1
	pick := -1
	for i, p := range probs {
		if p <= 0 {
			continue
		}
		last = i
		cum += float64(p)
		if u < cum {
			pick = i
			break
		}
	}
	if pick < 0 { // u fell past a total that rounding left just below 1
		pick = last
	}
	if pick < 0 {
		return Choice{}, ErrNoCandidates
	}
	return Choice{ID: c.ID(pick), Logprob: float32(math.Log(float64(probs[pick])))}, nil
}
