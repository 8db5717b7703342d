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

	"github.com/loomlm/loom/cache"
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

// optionalString is a string flag that records whether it was given.
type optionalString struct{ v *string }

func (o *optionalString) String() string {
	if o.v == nil {
		return ""
	}
	return *o.v
}

func (o *optionalString) Set(s string) error {
	o.v = &s
	return nil
}

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

// optionalSeed is the --seed flag: any uint64, so every seed loom reports can be replayed.
type optionalSeed struct{ v *uint64 }

func (o *optionalSeed) String() string {
	if o.v == nil {
		return ""
	}
	return fmt.Sprint(*o.v)
}

func (o *optionalSeed) Set(s string) error {
	u, err := pipeline.ParseSeed(s)
	if err != nil {
		return err
	}
	o.v = &u
	return nil
}

type runFlags struct {
	model, draftModel, prompt, promptFile       string
	jsonSchema, regex, grammar, kvType, think   optionalString
	maxNew, topK, n, topLogprobs, trace, kvBudg optionalInt
	seed                                        optionalSeed
	temperature, topP                           optionalFloat
	jsonOut, logprobs, quiet, lineage, noMmap   bool
	promptLogprobs                              bool
}

func runRun(args []string, stdout, stderr io.Writer) error {
	var f runFlags
	fs := newFlagSet("run", "[flags] [PIPELINE.toml]", stderr)
	fs.StringVar(&f.model, "model", "", "GGUF model file (replaces the pipeline's [model])")
	fs.StringVar(&f.draftModel, "draft-model", "", "GGUF draft model file for speculative decoding (replaces the pipeline's [draft_model], keeping its options)")
	fs.StringVar(&f.prompt, "prompt", "", "prompt text")
	fs.StringVar(&f.promptFile, "prompt-file", "", "read the prompt from this file (- for standard input)")
	fs.Var(&f.maxNew, "max-new-tokens", "tokens to generate at most per sequence, in [0, 16777216]")
	fs.Var(&f.seed, "seed", "random seed in [0, 2^64-1] (default: the pipeline's, else a random one, reported)")
	fs.Var(&f.n, "n", "number of sequences to sample, in [1, 1024]")
	fs.Var(&f.temperature, "temperature", "sampling temperature (0 = greedy)")
	fs.Var(&f.topK, "top-k", "keep the k most likely tokens (0 = off)")
	fs.Var(&f.topP, "top-p", "nucleus sampling threshold in [0, 1] (1 = off)")
	fs.Var(&f.kvBudg, "kv-budget", "most memory the KV cache may take, in MiB (default: the model's, see kv_budget_mb)")
	fs.Var(&f.kvType, "kv-type", "KV cache element type: f32, f16 or q8_0 (default: the pipeline's kv_type, else f32)")
	fs.BoolVar(&f.noMmap, "no-mmap", false, noMmapUsage)
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object with the whole result, token ids included")
	fs.BoolVar(&f.logprobs, "logprobs", false, "compute per-token log-probabilities (scores and raw logprobs): a table per sequence on standard error, or in --json")
	fs.BoolVar(&f.promptLogprobs, "prompt-logprobs", false, "score the prompt: each prompt token's log-probability under the model given the tokens before it, with the prompt's perplexity (a table on standard error, or prompt_logprobs in --json); with --max-new-tokens 0 nothing is generated")
	fs.Var(&f.topLogprobs, "top-logprobs", "record the N most likely raw tokens per step, N in [0, 100] (shown as --logprobs shows its table)")
	fs.Var(&f.trace, "trace", "record the distribution after every processor, with the N most likely tokens per step, N in [0, 100]")
	fs.BoolVar(&f.lineage, "lineage", false, "record every primitive the strategy called (forks, appends, verifications, truncations, discards) in --json's \"lineage\"")
	fs.BoolVar(&f.quiet, "quiet", false, "print only the generated text (no sequence headers, no summary line)")
	fs.Var(&f.jsonSchema, "json-schema", "constrain the output to JSON valid against this JSON Schema file (a json_schema processor first in the chain)")
	fs.Var(&f.regex, "regex", "constrain the whole output to match this regular expression (Go syntax; a regex processor first in the chain)")
	fs.Var(&f.grammar, "grammar", "constrain the output to this GBNF grammar file (a grammar processor first in the chain)")
	fs.Var(&f.think, "think", "a reasoning model's <think>…</think> block before the text --json-schema, --regex or --grammar constrain: none, start (the output may begin with one) or open (the prompt opened one); the block is free text")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		fmt.Fprintf(stderr, "loom run: one pipeline file at most, got %d\n", len(pos))
		return errUsage
	}
	if f.prompt != "" && f.promptFile != "" {
		return errors.New("give --prompt or --prompt-file, not both")
	}
	if f.think.v != nil && f.jsonSchema.v == nil && f.regex.v == nil && f.grammar.v == nil {
		return errors.New("--think: applies to the constraint --json-schema, --regex or --grammar adds; give one of them")
	}
	if f.lineage && !f.jsonOut {
		return errors.New("--lineage: the lineage is printed in --json only; add --json")
	}

	// From here on Ctrl-C (or SIGTERM) cancels the run, and what was generated is printed
	// before loom exits (with code 130); plugins and models are closed on the way out.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var spec *pipeline.Spec
	if len(pos) == 1 {
		spec, err = pipeline.Load(pos[0])
	} else {
		spec, err = pipeline.Parse("(default pipeline)", []byte(defaultPipeline))
	}
	if spec == nil {
		return err
	}
	// A spec with errors goes on to Build, which reports them with the rest.
	opts := pipeline.Options{StartPlugins: startPlugins}
	o := &opts.Overrides
	o.ModelPath, o.DraftModelPath, o.Seed = f.model, f.draftModel, f.seed.v
	o.Temperature, o.TopP, o.TopK = f.temperature.v, f.topP.v, f.topK.v
	o.MaxNewTokens, o.N, o.TopLogprobs, o.Trace, o.KVBudgetMiB = f.maxNew.v, f.n.v, f.topLogprobs.v, f.trace.v, f.kvBudg.v
	o.JSONSchemaFile, o.Regex, o.GrammarFile, o.KVType, o.Think = f.jsonSchema.v, f.regex.v, f.grammar.v, f.kvType.v, f.think.v
	o.NoMmap = f.noMmap
	built, err := pipeline.Build(spec, opts)
	if err != nil {
		return err
	}
	defer built.Close()

	prompt, err := readPrompt(f, built.Pipeline)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return &exitError{code: 130, err: errors.New("interrupted")}
	}
	req := built.Request(prompt)
	req.Return.Logprobs = req.Return.Logprobs || f.logprobs
	req.Return.Lineage = f.lineage
	req.Return.PromptLogprobs = f.promptLogprobs

	var out *textOutput
	if !f.jsonOut {
		out = &textOutput{w: stdout, quiet: f.quiet}
		if req.N <= 1 {
			req.OnEvent = out.event
		}
	}
	res, genErr := core.Generate(ctx, built.Pipeline, req)
	if res == nil {
		if ctx.Err() != nil {
			return &exitError{code: 130, err: errors.New("interrupted")}
		}
		return explain(genErr)
	}
	if f.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(jsonResult(res, built.Pipeline.Tokenizer, genErr)); err != nil {
			return err
		}
	} else {
		out.finish(res)
		printDetails(stderr, built.Pipeline.Tokenizer, res)
		if !f.quiet && (len(res.Sequences) > 0 || genErr == nil) { // a request refused before it ran has nothing to sum up
			printSummary(stderr, res)
		}
	}
	if genErr != nil {
		if errors.Is(genErr, context.Canceled) {
			return &exitError{code: 130, err: errors.New("interrupted")}
		}
		return explain(genErr)
	}
	return failedSequences(res)
}

// explain adds to an error what the user can do about it.
func explain(err error) error {
	if err != nil && errors.Is(err, cache.ErrBudget) {
		return fmt.Errorf("%w\n%s", err, kvBudgetHint)
	}
	return err
}

// noMmapUsage is the help of every command's --no-mmap.
const noMmapUsage = "read model files into memory (on Linux on transparent huge pages) instead of mapping them: the [model] option mmap = false, for the draft model too"

const kvBudgetHint = "raise the KV cache budget with --kv-budget MIB (or kv_budget_mb in the pipeline's [model] table), or lower --n or --max-new-tokens"

// failedSequences returns an error (exit 1) that lists every sequence that finished with
// reason "error" and its detail, or nil.
func failedSequences(res *core.Result) error {
	var lines []string
	for _, s := range res.Sequences {
		if s.FinishReason != core.FinishError {
			continue
		}
		detail := s.FinishDetail
		if detail == "" {
			detail = "no detail given"
		}
		if strings.Contains(detail, cache.ErrBudget.Error()) {
			detail += "\n" + kvBudgetHint
		}
		lines = append(lines, fmt.Sprintf("sequence %d failed: %s", s.Index, detail))
	}
	if len(lines) == 0 {
		return nil
	}
	return &exitError{code: 1, err: errors.New(strings.Join(lines, "\nloom: "))}
}

// readPrompt reads the prompt of --prompt or --prompt-file, refusing one too long for the
// model's context before it is read in full or encoded.
func readPrompt(f runFlags, p *core.Pipeline) (string, error) {
	limit := int64(pipeline.MaxPromptBytes(p))
	switch {
	case f.promptFile == "-":
		r := io.Reader(os.Stdin)
		if limit > 0 {
			r = io.LimitReader(r, limit+1)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return "", fmt.Errorf("--prompt-file -: %w", err)
		}
		if int64(len(b)) > limit && limit > 0 {
			return "", pipeline.CheckPromptSize(p, "--prompt-file - (standard input)", int64(len(b)))
		}
		return string(b), nil
	case f.promptFile != "":
		fh, err := os.Open(f.promptFile)
		if err != nil {
			return "", fmt.Errorf("--prompt-file: %w", err)
		}
		defer fh.Close()
		if st, err := fh.Stat(); err == nil && st.Mode().IsRegular() {
			if err := pipeline.CheckPromptSize(p, "--prompt-file "+f.promptFile, st.Size()); err != nil {
				return "", err
			}
		}
		r := io.Reader(fh)
		if limit > 0 {
			r = io.LimitReader(r, limit+1)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return "", fmt.Errorf("--prompt-file: %w", err)
		}
		if err := pipeline.CheckPromptSize(p, "--prompt-file "+f.promptFile, int64(len(b))); err != nil {
			return "", err
		}
		return string(b), nil
	}
	if err := pipeline.CheckPromptSize(p, "--prompt", int64(len(f.prompt))); err != nil {
		return "", err
	}
	return f.prompt, nil
}

// jsonResult is the --json output: the Result plus the error of a partial run.
func jsonResult(res *core.Result, tok core.Tokenizer, err error) any {
	out := struct {
		*core.Result
		// PromptTexts are the prompt tokens' texts, with their log-probabilities
		// (--prompt-logprobs), so that a reader (the workbench) can show them.
		PromptTexts []string `json:"prompt_texts,omitempty"`
		Error       string   `json:"error,omitempty"`
	}{Result: res, PromptTexts: res.PromptTexts(tok)}
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

func printSummary(w io.Writer, res *core.Result) {
	// Finish reasons in order of first appearance, with a count when one repeats.
	var order []core.FinishReason
	count := map[core.FinishReason]int{}
	for _, s := range res.Sequences {
		if count[s.FinishReason] == 0 {
			order = append(order, s.FinishReason)
		}
		count[s.FinishReason]++
	}
	reasons := make([]string, len(order))
	for i, r := range order {
		reasons[i] = string(r)
		if count[r] > 1 {
			reasons[i] += fmt.Sprintf(" ×%d", count[r])
		}
	}
	t := res.Timings
	fmt.Fprintf(w, "[%d prompt tokens, %.1f tok/s prefill; %d generated, %.1f tok/s; finish: %s; seed %d]\n",
		len(res.PromptTokens), t.PrefillTokensPerSecond, res.GeneratedTokens, t.DecodeTokensPerSecond, strings.Join(reasons, ", "), res.Seed)
}
