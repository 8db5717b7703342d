package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/strategies"
)

// strategyBench is the result of `loom bench strategy`: the pipeline's strategy and plain
// greedy decoding (the same model and processors, one token per forward) timed alternately on
// the same prompt.
type strategyBench struct {
	Pipeline string `json:"pipeline"`
	Strategy string `json:"strategy"`
	Prompt   string `json:"prompt"`
	Tokens   int    `json:"max_new_tokens"`
	Reps     int    `json:"repetitions"`
	// StrategyTokensPerS and GreedyTokensPerS are each repetition's generated tokens per
	// second (decode only, the prompt's prefill excluded).
	StrategyTokensPerS []float64 `json:"strategy_tokens_per_second"`
	GreedyTokensPerS   []float64 `json:"greedy_tokens_per_second"`
	// Speedup is the median of the strategy's rates over the median of greedy's.
	Speedup float64 `json:"speedup"`
	// ForwardsPerToken are target forwards per generated token (greedy: 1).
	ForwardsPerToken float64 `json:"forwards_per_token"`
	AcceptanceRate   float64 `json:"acceptance_rate,omitempty"`
	// DraftK counts the strategy's steps by the number of tokens drafted (speculative only).
	DraftK []int `json:"draft_k,omitempty"`
	// SameAsGreedy counts the repetitions whose first sequence had exactly greedy's tokens
	// (same seed): all of them for greedy speculation and prompt lookup, which must not change
	// the output; by chance only for sampling and beam search.
	SameAsGreedy int `json:"same_as_greedy"`
}

func runBenchStrategy(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench strategy", "[flags] PIPELINE.toml", stderr)
	prompt := fs.String("prompt", "And it came to pass, when the king had heard these words,", "the prompt")
	n := fs.Int("n", 128, "tokens to generate per run (max_new_tokens; end of sequence is ignored)")
	reps := fs.Int("r", 5, "repetitions of each, alternating")
	jsonOut := fs.Bool("json", false, "print the result as one JSON object")
	model := fs.String("model", "", "GGUF model file (replaces the pipeline's [model], keeping its options)")
	draftModel := fs.String("draft-model", "", "GGUF draft model file (replaces the pipeline's [draft_model], keeping its options)")
	noMmap := fs.Bool("no-mmap", false, noMmapUsage)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		fmt.Fprintln(stderr, "loom bench strategy: give one pipeline file")
		return errUsage
	case *n < 1 || *reps < 1:
		fmt.Fprintln(stderr, "loom bench strategy: -n and -r must be at least 1")
		return errUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	spec, err := pipeline.Load(pos[0])
	if spec == nil {
		return err
	}
	opts := pipeline.Options{StartPlugins: startPlugins}
	opts.Overrides.ModelPath, opts.Overrides.DraftModelPath, opts.Overrides.NoMmap = *model, *draftModel, *noMmap
	built, err := pipeline.Build(spec, opts)
	if err != nil {
		return err
	}
	defer built.Close()
	p := built.Pipeline
	greedy := *p
	greedy.Strategy = strategies.Greedy{}

	out := strategyBench{Pipeline: pos[0], Strategy: p.Strategy.Name(), Prompt: *prompt, Tokens: *n, Reps: *reps}
	var forwards, tokens, drafted, accepted int
	run := func(pl *core.Pipeline, seed uint64) (*core.Result, float64, error) {
		req := built.Request(*prompt)
		req.MaxNewTokens, req.IgnoreEOS, req.N, req.Seed = *n, true, 1, core.SeedOf(seed)
		res, err := core.Generate(ctx, pl, req)
		if err != nil {
			return nil, 0, err
		}
		gen := 0
		for _, s := range res.Sequences {
			gen = max(gen, len(s.Tokens))
		}
		return res, float64(gen) / res.Timings.Decode.Seconds(), nil
	}
	// A warm-up of each, then the repetitions alternate so that both see the same machine.
	for _, pl := range []*core.Pipeline{p, &greedy} {
		if _, _, err := run(pl, 0); err != nil {
			return benchInterrupted(ctx, err)
		}
	}
	for i := range *reps {
		res, rate, err := run(p, uint64(i+1))
		if err != nil {
			return benchInterrupted(ctx, err)
		}
		out.StrategyTokensPerS = append(out.StrategyTokensPerS, rate)
		forwards += res.Stats.Forwards
		tokens += len(res.Sequences[0].Tokens)
		drafted += res.Stats.Drafted
		accepted += res.Stats.Accepted
		for k, c := range res.Stats.DraftK {
			for len(out.DraftK) <= k {
				out.DraftK = append(out.DraftK, 0)
			}
			out.DraftK[k] += c
		}
		ref, rate, err := run(&greedy, uint64(i+1))
		if err != nil {
			return benchInterrupted(ctx, err)
		}
		out.GreedyTokensPerS = append(out.GreedyTokensPerS, rate)
		if slices.Equal(res.Sequences[0].Tokens, ref.Sequences[0].Tokens) {
			out.SameAsGreedy++
		}
	}
	out.Speedup = median(out.StrategyTokensPerS) / median(out.GreedyTokensPerS)
	out.ForwardsPerToken = float64(forwards) / float64(max(tokens, 1))
	if drafted > 0 {
		out.AcceptanceRate = float64(accepted) / float64(drafted)
	}
	if *jsonOut {
		return json.NewEncoder(stdout).Encode(out)
	}
	fmt.Fprintf(stdout, "%s: %s against greedy, %d tokens, %d alternating runs each\n", out.Pipeline, out.Strategy, out.Tokens, out.Reps)
	fmt.Fprintf(stdout, "  %-12s %8.1f tokens/s (median)\n", out.Strategy, median(out.StrategyTokensPerS))
	fmt.Fprintf(stdout, "  %-12s %8.1f tokens/s (median)\n", "greedy", median(out.GreedyTokensPerS))
	fmt.Fprintf(stdout, "  speed-up %.2f×, %.2f target forwards per token", out.Speedup, out.ForwardsPerToken)
	if drafted > 0 {
		fmt.Fprintf(stdout, ", %.0f%% of drafts accepted, steps by tokens drafted %v", 100*out.AcceptanceRate, out.DraftK)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "  output the same as greedy's in %d of %d runs\n", out.SameAsGreedy, out.Reps)
	return nil
}

func benchInterrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &exitError{code: 130, err: errors.New("interrupted")}
	}
	return err
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
