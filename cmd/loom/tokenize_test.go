package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomlm/loom/internal/fixtures"

	"github.com/loomlm/loom/model/ggml"
	"github.com/loomlm/loom/model/gguf"
)

// runCLI runs loom with args and returns its exit code and output.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runMain(args, &out, &errb)
	return code, out.String(), errb.String()
}

// fixture returns the path of a file of the repository's test fixtures (testdata/), failing
// the test where it is absent.
func fixture(t *testing.T, rel string) string {
	t.Helper()
	return fixtures.Path(t, rel)
}

// tinyModel writes a small GGUF file: a llama architecture with two tensors and a
// SentencePiece-style vocabulary.
func tinyModel(t *testing.T) string {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range []gguf.KV{
		{Key: "general.architecture", Value: "llama"},
		{Key: "general.name", Value: "tiny"},
		{Key: "llama.context_length", Value: uint32(128)},
		{Key: "llama.embedding_length", Value: uint32(32)},
		{Key: "llama.block_count", Value: uint32(1)},
		{Key: "llama.attention.head_count", Value: uint32(4)},
		{Key: "llama.attention.head_count_kv", Value: uint32(2)},
		{Key: "tokenizer.ggml.model", Value: "llama"},
		{Key: "tokenizer.ggml.tokens", Value: []string{"<unk>", "<s>", "</s>", "▁", "h", "i", "▁h", "▁hi", "<0x0A>", "<0x21>"}},
		{Key: "tokenizer.ggml.scores", Value: []float32{0, 0, 0, -1, -2, -2, -3, -2.5, 0, 0}},
		{Key: "tokenizer.ggml.token_type", Value: []int32{2, 3, 3, 1, 1, 1, 1, 1, 6, 6}},
	} {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddTensor("token_embd.weight", ggml.F16, []uint64{32, 10}, make([]byte, 640)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("blk.0.attn_q.weight", ggml.Q8_0, []uint64{32, 32}, make([]byte, 32*34)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := w.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTokenize(t *testing.T) {
	model := tinyModel(t)
	file := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(file, []byte("hi!\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"ids with BOS", []string{"--model", model, "hi hi"}, 0, "1 7 7\n"},
		{"flags after text", []string{"hi", "--model", model, "--no-bos"}, 0, "7\n"},
		{"one line per input", []string{"--model", model, "--no-bos", "hi", "", "i"}, 0, "7\n\n3 5\n"},
		{"file bytes exactly", []string{"--model", model, "--file", file}, 0, "1 7 9 8\n"},
		{"pieces", []string{"--model", model, "--pieces", "hi!"}, 0, "<s> ▁hi <0x21>\n"},
		{"special as text", []string{"--model", model, "--no-bos", "--pieces", "<s>"}, 0, "▁ <unk> <unk> <unk>\n"},
		{"parse special", []string{"--model", model, "--no-bos", "--special", "<s>hi"}, 0, "1 7\n"},
		{"no model", []string{"hi"}, 2, ""},
		{"no input", []string{"--model", model}, 2, ""},
		{"missing model file", []string{"--model", filepath.Join(t.TempDir(), "none.gguf"), "x"}, 1, ""},
		{"missing input file", []string{"--model", model, "--file", filepath.Join(t.TempDir(), "none.txt")}, 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, append([]string{"tokenize"}, tc.args...)...)
			if code != tc.code || out != tc.out {
				t.Fatalf("exit %d, stdout %q (stderr %q); want exit %d, %q", code, out, errs, tc.code, tc.out)
			}
		})
	}
}

func TestTokenizeStories(t *testing.T) {
	model := fixture(t, "models/stories260K-f32.gguf")
	code, out, errs := runCLI(t, "tokenize", "--model", model, "Once upon a time")
	if code != 0 || out != "1 373 265 426 453 335 334 264 417\n" {
		t.Fatalf("exit %d, %q, %q", code, out, errs)
	}
}

// TestTokenizeFixtures runs the vocabulary fixtures through the command, one input file per
// case.
func TestTokenizeFixtures(t *testing.T) {
	for _, name := range []string{"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"} {
		model := fixture(t, filepath.Join("vocab", name))
		inp, err := os.ReadFile(model + ".inp")
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(model + ".out")
		if err != nil {
			t.Fatal(err)
		}
		cases := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
		cases = cases[:len(cases)-1]
		args := []string{"tokenize", "--model", model, "--no-bos"}
		dir := t.TempDir()
		for i, c := range cases {
			p := filepath.Join(dir, fmt.Sprint(i))
			if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
			args = append(args, "--file", p)
		}
		code, out, errs := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errs)
		}
		gotLines := strings.Split(out, "\n")
		wantLines := strings.Split(string(want), "\n")
		for i := range cases {
			if strings.Join(strings.Fields(wantLines[i]), " ") != gotLines[i] {
				t.Errorf("%s case %d: got %q, want %q", name, i, gotLines[i], wantLines[i])
			}
		}
	}
}
