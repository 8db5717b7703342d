package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestInspect(t *testing.T) {
	model := tinyModel(t)
	code, out, errs := runCLI(t, "inspect", model)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"architecture   llama\n", "name           tiny\n", "parameters     1.34K (1344)\n", "context        128\n",
		"embedding      32\n", "layers         1\n", "heads          4\n", "kv heads       2\n", "vocab          10\n",
		"tensors        2: F16 ×1, Q8_0 ×1\n", "tokenizer      llama (SentencePiece-style), BOS 1, EOS 2\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	code, out, errs = runCLI(t, "inspect", "--json", "--tensors", "--metadata", model)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var info modelInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	bos, eos := int32(1), int32(2)
	st, _ := os.Stat(model)
	want := modelInfo{
		Path: model, FileSize: st.Size(), Version: 3, Architecture: "llama", Name: "tiny", Parameters: 1344,
		ContextLength: 128, EmbeddingLength: 32, Layers: 1, Heads: 4, KVHeads: 2, VocabSize: 10,
		Tensors: 2, TensorTypes: map[string]int{"F16": 1, "Q8_0": 1}, Metadata: 11,
		Tokenizer:  tokenizerInfo{Model: "llama", Kind: "SentencePiece-style", BOS: &bos, EOS: &eos},
		TensorList: []tensorEntry{{"token_embd.weight", "F16", []uint64{32, 10}}, {"blk.0.attn_q.weight", "Q8_0", []uint64{32, 32}}},
	}
	got := info
	if len(got.MetadataValues) != 11 || got.MetadataValues[9].Value != "[10 × float32] [0 0 0 -1 -2 -2 -3 -2.5 …]" {
		t.Errorf("metadata: %+v", got.MetadataValues)
	}
	got.MetadataValues = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestInspectStories(t *testing.T) {
	model := fixture(t, "models/stories260K-f32.gguf")
	code, out, errs := runCLI(t, "inspect", model)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"parameters     260.03K (260032)\n", "kv heads       4\n", "tensors        47: F32 ×47\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestInspectErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	if err := os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no file", nil, 2, "Usage: loom inspect"},
		{"two files", []string{"a", "b"}, 2, "Usage: loom inspect"},
		{"missing", []string{filepath.Join(t.TempDir(), "none.gguf")}, 1, "no such file"},
		{"not gguf", []string{bad}, 1, "offset 8: tensor count 18446744073709551615"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runCLI(t, append([]string{"inspect"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errs, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errs, tc.code, tc.stderr)
			}
		})
	}
}
