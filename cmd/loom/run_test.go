package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loom(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runMain(args, &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{}, 2, "Commands:"},
		{[]string{"help"}, 0, "Commands:"},
		{[]string{"--help"}, 0, "Commands:"},
		{[]string{"frobnicate"}, 2, ""},
		{[]string{"run", "--help"}, 0, ""},
		{[]string{"validate", "--help"}, 0, ""},
		{[]string{"run", "--no-such-flag"}, 2, ""},
		{[]string{"run", "--seed", "x"}, 2, ""},
		{[]string{"validate"}, 2, ""},
		{[]string{"validate", "/nonexistent.toml"}, 1, ""},
	}
	for _, c := range cases {
		code, out, _ := loom(t, c.args...)
		if code != c.code || !strings.Contains(out, c.out) {
			t.Errorf("loom %v: exit %d, stdout %q; want exit %d and %q", c.args, code, out, c.code, c.out)
		}
	}
}

func TestValidate(t *testing.T) {
	good := writeFile(t, "good.toml", "[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"greedy\"\n")
	code, out, errs := loom(t, "validate", good)
	if code != 0 || strings.TrimSpace(out) != "ok" {
		t.Fatalf("valid file: exit %d, out %q, err %q", code, out, errs)
	}
	bad := writeFile(t, "bad.toml", "[model]\nbuiltin = \"test\"\n\n[[stopping]]\ntype = \"max_time\"\nseconds = 0\n")
	code, _, errs = loom(t, "validate", bad)
	if code != 1 || !strings.Contains(errs, "bad.toml:6: stopping[0].seconds = 0: must be positive") {
		t.Fatalf("invalid file: exit %d, stderr %q", code, errs)
	}
}

func TestRunJSON(t *testing.T) {
	p := writeFile(t, "g.toml", "[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"greedy\"\n[generation]\nmax_new_tokens = 6\nignore_eos = true\n")
	code, out, errs := loom(t, "run", p, "--prompt", "the cat", "--json", "--logprobs")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		Sequences []struct {
			Tokens       []int     `json:"tokens"`
			Text         string    `json:"text"`
			Logprobs     []float64 `json:"logprobs"`
			FinishReason string    `json:"finish_reason"`
		} `json:"sequences"`
		PromptTokens []int `json:"prompt_tokens"`
		Seed         uint64
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if len(res.Sequences) != 1 || len(res.Sequences[0].Tokens) != 6 || len(res.Sequences[0].Logprobs) != 6 || res.Sequences[0].FinishReason != "length" {
		t.Fatalf("unexpected result: %s", out)
	}
	if len(res.PromptTokens) != 3 {
		t.Fatalf("prompt tokens %v, want BOS + 2 words", res.PromptTokens)
	}
}

func TestRunStreamsTextAndIsDeterministic(t *testing.T) {
	p := writeFile(t, "s.toml", "[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"sample\"\n[generation]\nmax_new_tokens = 10\n")
	_, a, _ := loom(t, "run", p, "--prompt", "the", "--seed", "3", "--quiet")
	_, b, _ := loom(t, "run", p, "--prompt", "the", "--seed", "3", "--quiet")
	_, c, _ := loom(t, "run", p, "--prompt", "the", "--seed", "4", "--quiet")
	if a == "" || a != b || a == c {
		t.Fatalf("seed 3 twice: %q, %q; seed 4: %q", a, b, c)
	}
}

func TestRunPromptFile(t *testing.T) {
	p := writeFile(t, "g.toml", "[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"greedy\"\n[generation]\nmax_new_tokens = 4\nignore_eos = true\n")
	pf := writeFile(t, "prompt.txt", "the cat")
	_, fromFile, _ := loom(t, "run", p, "--prompt-file", pf, "--quiet")
	_, fromFlag, _ := loom(t, "run", p, "--prompt", "the cat", "--quiet")
	if fromFile != fromFlag || fromFile == "" {
		t.Fatalf("--prompt-file gave %q, --prompt %q", fromFile, fromFlag)
	}
	if code, _, errs := loom(t, "run", p, "--prompt-file", "/nonexistent"); code != 1 || !strings.Contains(errs, "--prompt-file") {
		t.Fatalf("missing prompt file: exit %d, %q", code, errs)
	}
}

func TestRunTrace(t *testing.T) {
	p := writeFile(t, "g.toml", "[model]\nbuiltin = \"test\"\n[strategy]\ntype = \"greedy\"\n[generation]\nmax_new_tokens = 2\nignore_eos = true\n")
	code, _, errs := loom(t, "run", p, "--prompt", "the", "--trace", "3")
	if code != 0 || strings.Count(errs, "step ") != 2 || !strings.Contains(errs, "model") {
		t.Fatalf("exit %d, stderr:\n%s", code, errs)
	}
}

func TestProcessorsListsEveryBuiltIn(t *testing.T) {
	code, out, _ := loom(t, "processors")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"temperature", "top_k", "top_p", "min_p", "typical_p", "penalties", "dry", "xtc", "mirostat",
		"stop_strings", "max_time", "greedy", "sample", "beam", "speculative", "prompt_lookup", "default 0.95"} {
		if !strings.Contains(out, want) {
			t.Errorf("loom processors does not mention %q", want)
		}
	}
}

// TestRunNoMmap runs a model file mapped and read into memory (--no-mmap): the same text.
func TestRunNoMmap(t *testing.T) {
	model := fixture(t, "models/stories260K-f32.gguf")
	var texts []string
	for _, extra := range [][]string{nil, {"--no-mmap"}} {
		args := append([]string{"run", "--model", model, "--prompt", "Once upon a time", "--max-new-tokens", "24", "--seed", "7", "--quiet"}, extra...)
		code, out, errs := loom(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, errs)
		}
		texts = append(texts, out)
	}
	if texts[0] == "" || texts[0] != texts[1] {
		t.Errorf("mapped %q, --no-mmap %q", texts[0], texts[1])
	}
}
