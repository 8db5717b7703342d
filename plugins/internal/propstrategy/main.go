// Command propstrategy is a test plugin: a strategy that calls every method of the SDK's
// strategy API (Start, Fork, Forward, Process, Greedy, Sample, Append, StepGreedy, StepSample,
// Truncate, Discard, Finish, Refresh, SetScore, SetOutputs) in a random order drawn from its
// config's seed, making only calls that are valid, and writes what it asked and what it was
// answered, one JSON object a line, to the file config log. The host's test replays that log
// against recomputation from scratch.
//
// Config: seed (int), ops (int, default 150), log (path).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"

	"github.com/loomlm/loom/sdk"
)

// Entry is one call and its answer.
type Entry struct {
	Op      string       `json:"op"`
	Seqs    []int        `json:"seqs,omitempty"`
	New     []int        `json:"new,omitempty"`
	N       int          `json:"n,omitempty"`
	Choices []sdk.Choice `json:"choices,omitempty"`
	Top     [][]sdk.Choice
	State   []SeqState `json:"state,omitempty"`
}

// SeqState is a sequence as the plugin's Session shows it after a call.
type SeqState struct {
	Index     int           `json:"index"`
	Generated []sdk.TokenID `json:"generated"`
	Sum       float64       `json:"sum"`
	Finished  bool          `json:"finished"`
}

type seq struct {
	q               *sdk.Sequence
	hasRow, procNow bool
	chosen          *sdk.Choice
}

// Prop is the strategy.
type Prop struct {
	seed uint64
	ops  int
	log  string
}

func (p *Prop) Name() string { return "prop" }

func (p *Prop) Configure(cfg *sdk.Config) error {
	p.seed = uint64(cfg.Int("seed", 1))
	p.ops = cfg.Int("ops", 150)
	p.log = cfg.String("log", "")
	if p.log == "" {
		cfg.Errorf("log", "is required")
	}
	return nil
}

func (p *Prop) Decode(ctx context.Context, s *sdk.Session) error {
	f, err := os.Create(p.log)
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	rng := rand.New(rand.NewPCG(p.seed, 7))
	var seqs []*seq
	write := func(e Entry) error {
		for _, x := range seqs {
			e.State = append(e.State, SeqState{Index: x.q.Index(), Generated: slices.Clone(x.q.Generated()), Sum: x.q.SumLogprob(), Finished: x.q.Finished()})
		}
		return enc.Encode(e)
	}
	fail := func(op string, err error) error { return fmt.Errorf("%s: %w", op, err) }
	pick := func() *seq { return seqs[rng.IntN(len(seqs))] }
	subset := func(ok func(*seq) bool) []*seq {
		var out []*seq
		for _, x := range seqs {
			if ok(x) && rng.IntN(2) == 0 {
				out = append(out, x)
			}
		}
		return out
	}
	qs := func(xs []*seq) []*sdk.Sequence {
		out := make([]*sdk.Sequence, len(xs))
		for i, x := range xs {
			out[i] = x.q
		}
		return out
	}
	idx := func(xs []*seq) []int {
		out := make([]int, len(xs))
		for i, x := range xs {
			out[i] = x.q.Index()
		}
		return out
	}
	runnable := func(x *seq) bool { return x.hasRow && !x.q.Finished() }

	start, err := s.Start(2)
	if err != nil {
		return fail("start", err)
	}
	for _, q := range start {
		seqs = append(seqs, &seq{q: q, hasRow: true})
	}
	if err := write(Entry{Op: "start", New: idx(seqs)}); err != nil {
		return err
	}
	for range p.ops {
		r := pick()
		var e Entry
		switch k := rng.IntN(22); {
		case k < 2:
			if len(seqs) >= 6 {
				continue
			}
			fq, err := s.Fork(r.q)
			if err != nil {
				return fail("fork", err)
			}
			seqs = append(seqs, &seq{q: fq, hasRow: r.hasRow, procNow: r.procNow})
			e = Entry{Op: "fork", Seqs: []int{r.q.Index()}, New: []int{fq.Index()}}
		case k < 5:
			xs := subset(func(*seq) bool { return true })
			if err := s.Forward(qs(xs)...); err != nil {
				return fail("forward", err)
			}
			for _, x := range xs {
				if !x.q.Finished() && !x.hasRow {
					x.hasRow, x.procNow, x.chosen = true, false, nil
				}
			}
			e = Entry{Op: "forward", Seqs: idx(xs)}
		case k < 7:
			xs := subset(runnable)
			if len(xs) == 0 {
				continue
			}
			top, err := s.Process(3, qs(xs)...)
			if err != nil {
				return fail("process", err)
			}
			for _, x := range xs {
				x.procNow = true
			}
			e = Entry{Op: "process", Seqs: idx(xs), Top: top}
		case k < 10:
			xs := subset(runnable)
			if len(xs) == 0 {
				continue
			}
			op, sel := "greedy", s.Greedy
			if k == 9 {
				op, sel = "sample", s.Sample
			}
			chs, err := sel(qs(xs)...)
			if err != nil {
				return fail(op, err)
			}
			for i, x := range xs {
				x.procNow, x.chosen = true, &chs[i]
			}
			e = Entry{Op: op, Seqs: idx(xs), Choices: chs}
		case k < 13:
			if r.q.Finished() {
				continue
			}
			ch := sdk.Choice{ID: sdk.TokenID(3 + rng.IntN(200)), Logprob: -1.5}
			if r.chosen != nil && r.procNow && r.hasRow {
				ch = *r.chosen
			}
			if err := s.Append(r.q, ch); err != nil {
				return fail("append", err)
			}
			r.hasRow, r.procNow, r.chosen = false, false, nil
			e = Entry{Op: "append", Seqs: []int{r.q.Index()}, Choices: []sdk.Choice{ch}}
		case k < 16:
			xs := subset(func(x *seq) bool { return !x.q.Finished() })
			if len(xs) == 0 {
				continue
			}
			op, step := "step_greedy", s.StepGreedy
			if k == 15 {
				op, step = "step_sample", s.StepSample
			}
			if err := step(qs(xs)...); err != nil {
				return fail(op, err)
			}
			for _, x := range xs {
				x.hasRow, x.procNow, x.chosen = false, false, nil
			}
			e = Entry{Op: op, Seqs: idx(xs)}
		case k < 18:
			gen := r.q.NumGenerated()
			n := rng.IntN(gen + 1)
			if err := s.Truncate(r.q, n); err != nil {
				return fail("truncate", err)
			}
			if n < gen { // the row went with the tokens
				r.hasRow, r.procNow, r.chosen = false, false, nil
			}
			e = Entry{Op: "truncate", Seqs: []int{r.q.Index()}, N: n}
		case k < 19:
			if len(seqs) <= 1 {
				continue
			}
			if err := s.Discard(r.q); err != nil {
				return fail("discard", err)
			}
			seqs = slices.DeleteFunc(seqs, func(x *seq) bool { return x == r })
			e = Entry{Op: "discard", Seqs: []int{r.q.Index()}}
		case k < 20:
			if r.q.Finished() {
				continue
			}
			if err := s.Finish(r.q, "custom", "finished by the strategy"); err != nil {
				return fail("finish", err)
			}
			e = Entry{Op: "finish", Seqs: []int{r.q.Index()}}
		default:
			if err := s.Refresh(qs(seqs)...); err != nil {
				return fail("refresh", err)
			}
			e = Entry{Op: "refresh", Seqs: idx(seqs)}
		}
		if err := write(e); err != nil {
			return err
		}
	}
	for _, x := range seqs {
		if !x.q.Finished() {
			if err := s.Finish(x.q, "custom", "end of the test"); err != nil {
				return fail("finish", err)
			}
		}
		if err := s.SetScore(x.q, x.q.SumLogprob(), -float64(x.q.Index())); err != nil {
			return fail("set score", err)
		}
	}
	slices.SortFunc(seqs, func(a, b *seq) int { return a.q.Index() - b.q.Index() })
	if err := s.SetOutputs(qs(seqs)...); err != nil {
		return fail("set outputs", err)
	}
	return write(Entry{Op: "end", Seqs: idx(seqs)})
}

func main() { sdk.ServeStrategy(&Prop{}) }
