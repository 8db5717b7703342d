// Command nbest is an example loom plugin: a strategy that samples several complete answers
// and returns the request's n most likely ones (by mean log-probability per token), a simple
// form of best-of-n / self-consistency decoding. It drives the host's Session: one prefill,
// forks that share it, and one call per step for all samples.
//
// Config ([plugins.config]):
//
//	samples = 8   # how many sequences to sample (at least the request's n)
//
// Build it with `go build -o bin/plugins/nbest ./examples/plugins/nbest`.
package main

import (
	"context"
	"fmt"
	"sort"

	"github.com/loomlm/loom/sdk"
)

// NBest samples and ranks.
type NBest struct{ samples int }

func (b *NBest) Name() string { return "nbest" }
func (b *NBest) Doc() string {
	return "Samples config samples answers, returns the n with the best mean log-probability."
}

func (b *NBest) Configure(cfg *sdk.Config) error {
	b.samples = cfg.Int("samples", 8)
	if b.samples < 1 || b.samples > 256 {
		cfg.Errorf("samples", "= %d: must be in [1, 256]", b.samples)
	}
	return nil
}

// Decode samples every sequence to its end, then ranks them.
func (b *NBest) Decode(ctx context.Context, s *sdk.Session) error {
	keep := max(s.Request().N, 1)
	seqs, err := s.Start(max(b.samples, keep))
	if err != nil {
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var live []*sdk.Sequence
		for _, q := range seqs {
			if !q.Finished() {
				live = append(live, q)
			}
		}
		if len(live) == 0 {
			break
		}
		if err := s.StepSample(live...); err != nil {
			return err
		}
	}
	score := func(q *sdk.Sequence) float64 { return q.SumLogprob() / float64(max(q.NumGenerated(), 1)) }
	sort.SliceStable(seqs, func(i, j int) bool { return score(seqs[i]) > score(seqs[j]) })
	for _, q := range seqs {
		if err := s.SetScore(q, q.SumLogprob(), score(q)); err != nil {
			return err
		}
	}
	sdk.Log.Debug("ranked", "samples", len(seqs), "best", fmt.Sprintf("%.3f", score(seqs[0])))
	return s.SetOutputs(seqs[:keep]...)
}

func main() { sdk.ServeStrategy(&NBest{}) }
