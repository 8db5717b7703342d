package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/models"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/plugins"
)

// jsonRun is the part of `loom run --json` the tests read.
type jsonRun struct {
	Sequences []struct {
		Index        int    `json:"index"`
		Tokens       []int  `json:"tokens"`
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
		FinishDetail string `json:"finish_detail"`
	} `json:"sequences"`
	Seed  uint64 `json:"seed"`
	Error string `json:"error"`
}

func runJSON(t *testing.T, args ...string) jsonRun {
	t.Helper()
	code, out, errs := loom(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("loom %v: exit %d\n%s", args, code, errs)
	}
	var r jsonRun
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("loom %v: %v\n%s", args, err, out)
	}
	return r
}

const beamPipeline = `[model]
builtin = "test"

[generation]
max_new_tokens = 5
ignore_eos = true

[strategy]
type = "beam"
num_beams = 3
num_return_sequences = 2
`

// A beam search returning two sequences prints each under its header (n stays 1); --quiet
// prints the texts alone, one a line.
func TestRunBeamPrintsEverySequence(t *testing.T) {
	p := writeFile(t, "beam.toml", beamPipeline)
	want := runJSON(t, "run", p, "--prompt", "the cat")
	if len(want.Sequences) != 2 {
		t.Fatalf("%d sequences, want 2", len(want.Sequences))
	}
	code, out, errs := loom(t, "run", p, "--prompt", "the cat")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var b strings.Builder
	for _, s := range want.Sequences {
		fmt.Fprintf(&b, "--- sequence %d (%s)\n%s\n", s.Index, s.FinishReason, s.Text)
	}
	if out != b.String() {
		t.Errorf("stdout:\n%q\nwant\n%q", out, b.String())
	}
	code, out, errs = loom(t, "run", p, "--prompt", "the cat", "--quiet")
	if want := want.Sequences[0].Text + "\n" + want.Sequences[1].Text + "\n"; code != 0 || out != want || errs != "" {
		t.Errorf("--quiet: exit %d, stdout %q (want %q), stderr %q", code, out, want, errs)
	}
	// --n takes num_return_sequences' place, up to num_beams; beyond, an error and nothing
	// else.
	if got := runJSON(t, "run", p, "--prompt", "the cat", "--n", "3"); len(got.Sequences) != 3 {
		t.Errorf("--n 3: %d sequences, want 3", len(got.Sequences))
	}
	code, out, errs = loom(t, "run", p, "--prompt", "the cat", "--n", "4")
	if code != 1 || out != "" || errs != "--n 4: beam search returns at most num_beams = 3 sequences\n" {
		t.Errorf("--n 4: exit %d, stdout %q, stderr %q; want exit 1 and the error alone", code, out, errs)
	}
}

// --quiet prints the generated text and nothing else, on either stream.
func TestRunQuietPrintsOnlyText(t *testing.T) {
	p := writeFile(t, "s.toml", "[model]\nbuiltin = \"test\"\n[generation]\nmax_new_tokens = 6\nseed = 3\nn = 2\n")
	want := runJSON(t, "run", p, "--prompt", "the")
	code, out, errs := loom(t, "run", p, "--prompt", "the", "--quiet")
	if exp := want.Sequences[0].Text + "\n" + want.Sequences[1].Text + "\n"; code != 0 || out != exp || errs != "" {
		t.Errorf("exit %d, stdout %q (want %q), stderr %q", code, out, exp, errs)
	}
	code, out, errs = loom(t, "run", p, "--prompt", "the", "--quiet", "--n", "1")
	if exp := want.Sequences[0].Text + "\n"; code != 0 || out != exp || errs != "" {
		t.Errorf("n = 1: exit %d, stdout %q (want %q), stderr %q", code, out, exp, errs)
	}
}

// Every seed loom reports, the ones above 2^63-1 included, replays from --seed and from the
// file's [generation] seed, written as an integer or as a string.
func TestRunReportedSeedReplays(t *testing.T) {
	src := "[model]\nbuiltin = \"test\"\n[generation]\nmax_new_tokens = 12\nignore_eos = true\n"
	p := writeFile(t, "s.toml", src)
	var first jsonRun
	for i := 0; ; i++ {
		if i == 64 { // each run draws a seed above 2^63 with probability 1/2
			t.Fatal("64 random seeds, none above 2^63")
		}
		first = runJSON(t, "run", p, "--prompt", "the")
		if first.Seed > 1<<63 {
			break
		}
	}
	seed := strconv.FormatUint(first.Seed, 10)
	other := runJSON(t, "run", p, "--prompt", "the", "--seed", strconv.FormatUint(first.Seed-1, 10))
	if fmt.Sprint(other.Sequences[0].Tokens) == fmt.Sprint(first.Sequences[0].Tokens) {
		t.Fatalf("seeds %d and %d gave the same tokens: the test cannot tell a replay", first.Seed, first.Seed-1)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"--seed", []string{p, "--seed", seed}},
		{"seed as a string", []string{writeFile(t, "str.toml", src+"seed = \""+seed+"\"\n")}},
		{"seed as an integer", []string{writeFile(t, "int.toml", src+"seed = "+seed+"\n")}},
	} {
		r := runJSON(t, append(append([]string{"run"}, tc.args...), "--prompt", "the")...)
		if r.Seed != first.Seed || fmt.Sprint(r.Sequences[0].Tokens) != fmt.Sprint(first.Sequences[0].Tokens) || r.Sequences[0].Text != first.Sequences[0].Text {
			t.Errorf("%s: seed %d, text %q; the reported run had seed %d, text %q", tc.name, r.Seed, r.Sequences[0].Text, first.Seed, first.Sequences[0].Text)
		}
	}
	// The text output's summary reports the seed in the same digits.
	if _, _, errs := loom(t, "run", p, "--prompt", "the", "--seed", seed); !strings.Contains(errs, "seed "+seed+"]") {
		t.Errorf("summary does not report seed %s:\n%s", seed, errs)
	}
}

// Every flag with a limit is held to it, and the error names the flag, not a line of a file.
func TestRunFlagLimits(t *testing.T) {
	withTopP := writeFile(t, "p.toml", "[model]\nbuiltin = \"test\"\n[[processors]]\ntype = \"top_p\"\np = 0.9\n[[processors]]\ntype = \"temperature\"\nt = 0.7\n")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--n", "0"}, 1, "--n 0: must be in [1, 1024]"},
		{[]string{"--n", "1025"}, 1, "--n 1025: must be in [1, 1024]"},
		{[]string{"--max-new-tokens", "-1"}, 1, "--max-new-tokens -1: must be in [0, 16777216]"},
		{[]string{"--max-new-tokens", "16777217"}, 1, "--max-new-tokens 16777217: must be in [0, 16777216]"},
		{[]string{"--top-logprobs", "100000"}, 1, "--top-logprobs 100000: must be in [0, 100]"},
		{[]string{"--top-logprobs", "-1"}, 1, "--top-logprobs -1: must be in [0, 100]"},
		{[]string{"--trace", "101"}, 1, "--trace 101: must be in [0, 100]"},
		{[]string{"--kv-budget", "0"}, 1, "--kv-budget 0: must be in [1, 1048576] (MiB)"},
		{[]string{"--kv-budget", "1048577"}, 1, "--kv-budget 1048577: must be in [1, 1048576] (MiB)"},
		{[]string{"--kv-type", "q4"}, 1, `--kv-type "q4": must be "f32", "f16" or "q8_0"`},
		{[]string{"--kv-type", "q8_0", "--model", fixture(t, "models/stories260K-f32.gguf")}, 1, "--model: "}, // heads of 8 values
		{[]string{"--top-p", "1.5"}, 1, "--top-p 1.5: must be in [0, 1] (1 disables, 0 keeps the most likely token)"},
		{[]string{"--top-p", "-0.5", withTopP}, 1, "--top-p -0.5: must be in [0, 1] (1 disables, 0 keeps the most likely token)"},
		{[]string{"--top-k", "-1"}, 1, "--top-k -1: "},
		{[]string{"--temperature", "-1", withTopP}, 1, "--temperature -1: "},
		{[]string{"--temperature", "-1"}, 1, "--temperature -1: "},
		{[]string{"--seed", "-1"}, 2, `invalid value "-1" for flag -seed: must be an integer in [0, 18446744073709551615]`},
		{[]string{"--seed", "18446744073709551616"}, 2, "must be an integer in [0, 18446744073709551615]"},
		{[]string{"--model", "/nonexistent/m.gguf"}, 1, "--model: "},
		{[]string{"--draft-model", "/nonexistent/d.gguf"}, 1, "--draft-model: the sample strategy uses no draft model"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, _, errs := loom(t, append([]string{"run", "--prompt", "x"}, c.args...)...)
			if code != c.code || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d and %q", code, errs, c.code, c.want)
			}
			if c.code == 1 && !strings.HasPrefix(errs, strings.Fields(c.want)[0]) {
				t.Errorf("the error does not start with the flag:\n%s", errs)
			}
			if strings.Contains(errs, ".toml:") || strings.Contains(errs, "default pipeline") {
				t.Errorf("the error blames a pipeline file:\n%s", errs)
			}
		})
	}
	// At their limits the flags are accepted.
	if code, _, errs := loom(t, "run", "--prompt", "x", "--n", "2", "--max-new-tokens", "0", "--top-logprobs", "100", "--trace", "1", "--kv-budget", "64", "--kv-type", "q8_0", "--top-p", "1", "--seed", "18446744073709551615"); code != 0 {
		t.Errorf("flags at their limits: exit %d\n%s", code, errs)
	}
}

// --logprobs and --top-logprobs print a table per sequence: each token with its scores and
// the most likely alternatives.
func TestRunLogprobsText(t *testing.T) {
	p := writeFile(t, "g.toml", "[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"greedy\"\n[generation]\nmax_new_tokens = 4\nignore_eos = true\n")
	code, out, errs := loom(t, "run", p, "--prompt", "the cat", "--logprobs", "--top-logprobs", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(errs, "\n")
	if !strings.HasPrefix(lines[0], "--- sequence 0: log-probabilities") || !strings.Contains(lines[1], "score") || !strings.Contains(lines[1], "top") {
		t.Fatalf("no table header:\n%s", errs)
	}
	row := regexp.MustCompile(`^\s*(\d+)\s+(".*?")\s+(-?\d+\.\d+)\s+(-?\d+\.\d+)\s+(.*)$`)
	for i, line := range lines[2:6] {
		m := row.FindStringSubmatch(line)
		if m == nil || m[1] != strconv.Itoa(i) {
			t.Errorf("row %d: %q, want step, token, score, logprob, alternatives", i, line)
			continue
		}
		alts := strings.Split(m[5], ", ")
		// Greedy without processors picks the raw favourite: the first alternative.
		if len(alts) != 2 || alts[0] != m[2]+" "+m[4] {
			t.Errorf("row %d: alternatives %q, want two, the first %s %s", i, m[5], m[2], m[4])
		}
	}
	if strings.TrimSpace(out) == "" {
		t.Error("no text on stdout")
	}
	// --top-logprobs alone: tokens and alternatives, no score columns.
	_, _, errs = loom(t, "run", p, "--prompt", "the cat", "--top-logprobs", "3")
	lines = strings.Split(errs, "\n")
	alt := regexp.MustCompile(`^\s*\d+\s+".*?"\s+(".*?" -?\d+\.\d+(, )?){3}$`)
	if strings.Contains(lines[1], "score") || len(lines) < 6 {
		t.Fatalf("--top-logprobs 3 alone:\n%s", errs)
	}
	for i, line := range lines[2:6] {
		if !alt.MatchString(line) {
			t.Errorf("--top-logprobs 3, row %d: %q", i, line)
		}
	}
}

// Byte tokens that never form UTF-8 come out as U+FFFD in text mode, as in the JSON.
func TestRunTextIsValidUTF8(t *testing.T) {
	_, tok, err := models.Open("default", llama.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := -1
	for i := range tok.VocabSize() {
		if b := tok.TokenBytes(int32(i)); len(b) == 1 && b[0] == 0x80 { // a lone continuation byte
			id = i
		}
	}
	if id < 0 {
		t.Fatal("the default model has no token for the byte 0x80")
	}
	p := writeFile(t, "bytes.toml", fmt.Sprintf(`[model]
builtin = "default"
[generation]
max_new_tokens = 5
ignore_eos = true
[strategy]
type = "greedy"
[[processors]]
type = "logit_bias"
bias = { "%d" = 1000.0 }
`, id))
	j := runJSON(t, "run", p, "--prompt", "Once")
	code, out, errs := loom(t, "run", p, "--prompt", "Once", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !utf8.ValidString(out) || out != strings.Repeat("\uFFFD", 5)+"\n" {
		t.Errorf("stdout %q, want five U+FFFD", out)
	}
	if want := j.Sequences[0].Text + "\n"; out != want {
		t.Errorf("stdout %q, JSON text %q", out, want)
	}
}

// A sequence that ends with reason error fails the run (exit 1) and its detail is printed:
// here a stopping-criterion plugin that crashes.
func TestRunFailedSequenceExitsNonZero(t *testing.T) {
	bin := buildProgram(t, "../../plugins/internal/testplugin")
	sum, err := plugins.FileSHA256(bin)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "crash.toml")
	src := fmt.Sprintf(`[model]
builtin = "test"

[generation]
max_new_tokens = 12
seed = 7
ignore_eos = true

[[plugins]]
name = "tp"
path = %q
sha256 = %q

[plugins.config]
misbehave = "crash"
after = 2
once = %q

[[stopping]]
type = "tp.stop_after"
`, bin, sum, filepath.Join(dir, "once"))
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range [][]string{nil, {"--json"}, {"--quiet"}} {
		os.Remove(filepath.Join(dir, "once")) // the plugin crashes once per file
		code, _, errs := loom(t, append([]string{"run", p, "--prompt", "the cat"}, mode...)...)
		if code != 1 || !strings.Contains(errs, `loom: sequence 0 failed: plugin "tp"`) || !strings.Contains(errs, "crash") {
			t.Errorf("%v: exit %d, stderr:\n%s", mode, code, errs)
		}
	}
}

// Too many sequences for the KV cache budget: the error says which flag raises it, and the
// flag does.
func TestRunKVBudget(t *testing.T) {
	args := []string{"run", "--prompt", "Once", "--n", "300", "--max-new-tokens", "40", "--seed", "1", "--temperature", "0", "--quiet"}
	code, _, errs := loom(t, append(args, "--kv-budget", "8")...)
	if code != 1 || !strings.Contains(errs, "memory budget exhausted") || !strings.Contains(errs, "--kv-budget") {
		t.Fatalf("exit %d, stderr:\n%s", code, errs)
	}
	code, out, errs := loom(t, append(args, "--kv-budget", "512")...)
	if code != 0 || strings.Count(out, "\n") < 300 {
		t.Fatalf("--kv-budget 512: exit %d, %d lines\n%s", code, strings.Count(out, "\n"), errs)
	}
	// The [model] key does the same.
	p := writeFile(t, "kv.toml", "[model]\nbuiltin = \"default\"\nkv_budget_mb = 8\n")
	if code, _, errs := loom(t, "run", p, "--prompt", "Once", "--n", "300", "--max-new-tokens", "40", "--quiet"); code != 1 || !strings.Contains(errs, "--kv-budget") {
		t.Fatalf("kv_budget_mb = 8: exit %d, stderr:\n%s", code, errs)
	}
	p = writeFile(t, "kv0.toml", "[model]\nbuiltin = \"default\"\n\nkv_budget_mb = 0\n")
	if code, _, errs := loom(t, "run", p, "--prompt", "Once"); code != 1 || !strings.Contains(errs, "kv0.toml:4: model.kv_budget_mb = 0: must be a positive integer") {
		t.Fatalf("kv_budget_mb = 0: exit %d, stderr:\n%s", code, errs)
	}
}

// A prompt too long for the model's context is refused before it is read in full or
// encoded, naming the flag or file.
func TestRunPromptSizeBound(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.txt")
	if err := os.WriteFile(big, []byte(strings.Repeat("the cat ", 8<<20)), 0o644); err != nil { // 64 MiB
		t.Fatal(err)
	}
	code, _, errs := loom(t, "run", "--prompt-file", big)
	if code != 1 || !strings.Contains(errs, "--prompt-file "+big+": 67108864 bytes cannot fit the model's context of") {
		t.Fatalf("exit %d, stderr:\n%s", code, errs)
	}
	code, _, errs = loom(t, "run", "--prompt", strings.Repeat("x", 1<<20))
	if code != 1 || !strings.Contains(errs, "--prompt: 1048576 bytes cannot fit") {
		t.Fatalf("exit %d, stderr:\n%s", code, errs)
	}
}

// loom validate reports every error of a file in one pass, each on its line: generation,
// model options, strategy, processors, stopping criteria.
func TestValidateReportsEveryError(t *testing.T) {
	p := writeFile(t, "all.toml", `[model]
builtin = "default"
kv_type = "q3"
kv_budget_mb = -1

[generation]
n = 2000

[strategy]
type = "beem"

[[processors]]
type = "top_p"
p = 1.5

[[stopping]]
type = "max_time"
seconds = 0
`)
	code, out, errs := loom(t, "validate", p)
	want := []string{
		p + ":3: model.kv_type = \"q3\": must be \"f32\", \"f16\" or \"q8_0\"",
		p + ":4: model.kv_budget_mb = -1: must be a positive integer",
		p + ":7: generation.n = 2000: must be in [1, 1024]",
		p + `:10: strategy.type = "beem": unknown strategy type`,
		p + ":14: processors[0].p = 1.5: must be in [0, 1] (1 disables, 0 keeps the most likely token)",
		p + ":18: stopping[0].seconds = 0: must be positive",
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if code != 1 || out != "" || len(lines) != len(want) {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s\nwant %d errors", code, out, errs, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d:\n got  %s\n want %s…", i, lines[i], w)
		}
	}
}

// TestRunPromptLogprobs scores a prompt with --prompt-logprobs and no generation: the --json
// result's prompt_logprobs and the table's rows and perplexity are the in-process
// Return.PromptLogprobs of the same pipeline.
func TestRunPromptLogprobs(t *testing.T) {
	p := filepath.Join("..", "..", "pipelines", "greedy.toml")
	const prompt = "And God saw the light, that it was good"
	b, err := pipeline.LoadAndBuild(p, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	req := b.Request(prompt)
	req.MaxNewTokens, req.Return.PromptLogprobs = 0, true
	want, err := core.Generate(context.Background(), b.Pipeline, req)
	if err != nil {
		t.Fatal(err)
	}

	code, out, errs := loom(t, "run", p, "--prompt", prompt, "--prompt-logprobs", "--max-new-tokens", "0", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got struct {
		PromptTokens   []core.TokenID `json:"prompt_tokens"`
		PromptLogprobs []float32      `json:"prompt_logprobs"`
		PromptTexts    []string       `json:"prompt_texts"`
		Sequences      []struct {
			Tokens []int `json:"tokens"`
		} `json:"sequences"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if !slices.Equal(got.PromptTokens, want.PromptTokens) || !slices.Equal(got.PromptLogprobs, want.PromptLogprobs) || len(got.Sequences) != 1 || len(got.Sequences[0].Tokens) != 0 {
		t.Errorf("--json: prompt %v logprobs %v, %d sequences; in process %v %v", got.PromptTokens, got.PromptLogprobs, len(got.Sequences), want.PromptTokens, want.PromptLogprobs)
	}
	if len(got.PromptTexts) != len(want.PromptTokens) {
		t.Fatalf("--json: %d prompt texts for %d tokens", len(got.PromptTexts), len(want.PromptTokens))
	}
	for i, id := range want.PromptTokens {
		if got.PromptTexts[i] != string(b.Pipeline.Tokenizer.TokenBytes(id)) {
			t.Errorf("--json: prompt text %d %q, token %d is %q", i, got.PromptTexts[i], id, b.Pipeline.Tokenizer.TokenBytes(id))
		}
	}

	code, _, errs = loom(t, "run", p, "--prompt", prompt, "--prompt-logprobs", "--top-logprobs", "2", "--max-new-tokens", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	row := regexp.MustCompile(`^\s*(\d+)\s+(".*?")\s+(-?\d+\.\d+)\s+(".*?" -?\d+\.\d+, ".*?" -?\d+\.\d+)$`)
	rows := 0
	var sum float64
	for _, line := range strings.Split(errs, "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			i, _ := strconv.Atoi(m[1])
			if i != rows+1 || m[3] != fmt.Sprintf("%.3f", want.PromptLogprobs[i]) {
				t.Errorf("row %q: want position %d with %.3f", line, rows+1, want.PromptLogprobs[i])
			}
			rows++
			sum += float64(want.PromptLogprobs[i])
		}
	}
	n := len(want.PromptTokens) - 1
	summary := fmt.Sprintf("prompt: %d tokens scored, sum of log-probabilities %.3f, perplexity %.3f", n, sum, math.Exp(-sum/float64(n)))
	if rows != n || !strings.Contains(errs, summary) {
		t.Errorf("%d rows, want %d, and %q in:\n%s", rows, n, summary, errs)
	}
}
