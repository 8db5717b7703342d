package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
)

// defaultPipeline is what `loom run` uses without a pipeline file.
const defaultPipeline = `# loom's default pipeline: the embedded model, nucleus sampling.
[model]
builtin = "` + defaultModel + `"

[generation]
max_new_tokens = 128

[strategy]
type = "sample"

[[processors]]
type = "temperature"
t = 0.8

[[processors]]
type = "top_p"
p = 0.95
`

// defaultModel is the embedded model a pipeline without a model file runs on.
const defaultModel = "default"

func init() {
	register(&command{
		name:    "run",
		summary: "generate text with a pipeline (default: the embedded model, nucleus sampling)",
		run:     runRun,
	})
}

// optionalFloat and optionalInt are flags that record whether they were set.
type optionalFloat struct{ v *float64 }

func (o *optionalFloat) String() string {
	if o.v == nil {
		return ""
	}
	return fmt.Sprint(*o.v)
}

func (o *optionalFloat) Set(s string) error {
	var f float64
	if _, err := fmt.Sscan(s, &f); err != nil {
		return fmt.Errorf("%q is not a number", s)
	}
	o.v = &f
	return nil
}

type optionalInt struct{ v *int }

func (o *optionalInt) String() string {
	if o.v == nil {
		return ""
	}
	return fmt.Sprint(*o.v)
}

func (o *optionalInt) Set(s string) error {
	var i int
	if _, err := fmt.Sscan(s, &i); err != nil || fmt.Sprint(i) != strings.TrimPrefix(s, "+") {
		return fmt.Errorf("%q is not an integer", s)
	}
	o.v = &i
	return nil
}

type runFlags struct {
	model, prompt, promptFile string
	maxNew, seed, topK, n     optionalInt
	temperature, topP         optionalFloat
	jsonOut, logprobs, quiet  bool
	topLogprobs, trace        int
}

func runRun(args []string, stdout, stderr io.Writer) error {
	var f runFlags
	fs := newFlagSet("run", "[flags] [PIPELINE.toml]", stderr)
	fs.StringVar(&f.model, "model", "", "GGUF model file (replaces the pipeline's [model])")
	fs.StringVar(&f.prompt, "prompt", "", "prompt text")
	fs.StringVar(&f.promptFile, "prompt-file", "", "read the prompt from this file (- for standard input)")
	fs.Var(&f.maxNew, "max-new-tokens", "tokens to generate at most per sequence")
	fs.Var(&f.seed, "seed", "random seed (default: the pipeline's, else a random one, reported)")
	fs.Var(&f.n, "n", "number of sequences to sample")
	fs.Var(&f.temperature, "temperature", "sampling temperature (0 = greedy)")
	fs.Var(&f.topK, "top-k", "keep the k most likely tokens (0 = off)")
	fs.Var(&f.topP, "top-p", "nucleus sampling threshold (1 = off)")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object with the whole result, token ids included")
	fs.BoolVar(&f.logprobs, "logprobs", false, "compute per-token log-probabilities (scores and raw logprobs)")
	fs.IntVar(&f.topLogprobs, "top-logprobs", 0, "record the N most likely raw tokens per step")
	fs.IntVar(&f.trace, "trace", 0, "record the distribution after every processor, with the N most likely tokens per step")
	fs.BoolVar(&f.quiet, "quiet", false, "print only the generated text")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		fmt.Fprintf(stderr, "loom run: one pipeline file at most, got %d\n", len(pos))
		return errUsage
	}
	prompt, err := readPrompt(f)
	if err != nil {
		return err
	}

	var spec *pipeline.Spec
	if len(pos) == 1 {
		spec, err = pipeline.Load(pos[0])
	} else {
		spec, err = pipeline.Parse("(default pipeline)", []byte(defaultPipeline))
	}
	if err != nil {
		return err
	}
	opts := pipeline.Options{StartPlugins: startPlugins}
	o := &opts.Overrides
	o.ModelPath = f.model
	o.Temperature, o.TopP, o.TopK, o.MaxNewTokens, o.N = f.temperature.v, f.topP.v, f.topK.v, f.maxNew.v, f.n.v
	if f.seed.v != nil {
		if *f.seed.v < 0 {
			return fmt.Errorf("--seed %d: must not be negative", *f.seed.v)
		}
		s := uint64(*f.seed.v)
		o.Seed = &s
	}
	built, err := pipeline.Build(spec, opts)
	if err != nil {
		return err
	}
	defer built.Close()

	req := built.Request(prompt)
	req.Return.Logprobs = req.Return.Logprobs || f.logprobs
	req.Return.TopLogprobs = max(req.Return.TopLogprobs, f.topLogprobs)
	req.Return.Trace = max(req.Return.Trace, f.trace)
	streaming := !f.jsonOut && req.N == 1
	if streaming {
		req.OnEvent = func(ev core.Event) error {
			_, err := io.WriteString(stdout, ev.Text)
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, genErr := core.Generate(ctx, built.Pipeline, req)
	if res == nil {
		return genErr
	}
	if f.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(jsonResult(res, genErr)); err != nil {
			return err
		}
	} else {
		if streaming {
			fmt.Fprintln(stdout)
		} else {
			for _, s := range res.Sequences {
				fmt.Fprintf(stdout, "--- sequence %d (%s)\n%s\n", s.Index, s.FinishReason, s.Text)
			}
		}
		if !f.quiet {
			printSummary(stderr, built.Pipeline.Tokenizer, res)
		}
	}
	if genErr != nil {
		if errors.Is(genErr, context.Canceled) {
			return &exitError{code: 130, err: errors.New("interrupted")}
		}
		return genErr
	}
	return nil
}

func readPrompt(f runFlags) (string, error) {
	switch {
	case f.prompt != "" && f.promptFile != "":
		return "", errors.New("give --prompt or --prompt-file, not both")
	case f.promptFile == "-":
		b, err := io.ReadAll(os.Stdin)
		return string(b), err
	case f.promptFile != "":
		b, err := os.ReadFile(f.promptFile)
		if err != nil {
			return "", fmt.Errorf("--prompt-file: %w", err)
		}
		return string(b), nil
	}
	return f.prompt, nil
}

// jsonResult is the --json output: the Result plus the error of a partial run.
func jsonResult(res *core.Result, err error) any {
	out := struct {
		*core.Result
		Error string `json:"error,omitempty"`
	}{Result: res}
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

func printSummary(w io.Writer, tok core.Tokenizer, res *core.Result) {
	for _, s := range res.Sequences {
		for _, st := range s.Trace {
			fmt.Fprintf(w, "step %d: chose %d %q\n", st.Step, st.Chosen, tok.TokenBytes(st.Chosen))
			for _, stage := range st.Stages {
				fmt.Fprintf(w, "  %-20s kept %-7d", stage.Processor, stage.Kept)
				for _, tp := range stage.Top {
					fmt.Fprintf(w, " %q %.3f", tp.Text, tp.Value)
				}
				fmt.Fprintln(w)
			}
		}
	}
	reasons := make([]string, len(res.Sequences))
	for i, s := range res.Sequences {
		reasons[i] = string(s.FinishReason)
	}
	t := res.Timings
	fmt.Fprintf(w, "[%d prompt tokens, %.1f tok/s prefill; %d generated, %.1f tok/s; finish: %s; seed %d]\n",
		len(res.PromptTokens), t.PrefillTokensPerSecond, res.GeneratedTokens, t.DecodeTokensPerSecond, strings.Join(reasons, ", "), res.Seed)
}
