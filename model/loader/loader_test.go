package loader

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/loomlm/loom/internal/fixtures"

	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/pipeline"
)

// readGen returns the ids llama.cpp generated greedily after "Once upon a time".
func readGen(t testing.TB) []int32 {
	t.Helper()
	data := fixtures.Read(t, "reference", "stories260K", "llamacpp-kvf32_once-upon-a-time_256.txt")
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "GEN "); ok {
			var ids []int32
			for _, f := range strings.Fields(rest) {
				v, _ := strconv.Atoi(f)
				ids = append(ids, int32(v))
			}
			return ids
		}
	}
	t.Fatal("no GEN line")
	return nil
}

// TestPipelineGreedy runs a TOML pipeline on the reference model through the installed file
// opener, the file mapped and read into memory (mmap = false): the prompt text encodes to the
// reference ids and greedy decoding reproduces llama.cpp's continuation.
func TestPipelineGreedy(t *testing.T) {
	for _, mmap := range []string{"", "mmap = false\n"} {
		t.Run(strings.TrimSpace(mmap), func(t *testing.T) { testPipelineGreedy(t, mmap) })
	}
}

// testPipelineGreedy is TestPipelineGreedy with extra lines in the [model] table.
func testPipelineGreedy(t *testing.T, extra string) {
	path := fixtures.Path(t, "models", "stories260K-f32.gguf")
	toml := "[model]\npath = " + strconv.Quote(path) + "\nkv_type = \"f32\"\n" + extra + "\n[generation]\nmax_new_tokens = 100\nignore_eos = true\n\n[strategy]\ntype = \"greedy\"\n"
	spec, err := pipeline.Parse("greedy.toml", []byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	built, err := pipeline.Build(spec, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer built.Close()
	req := built.Request("Once upon a time")
	req.IgnoreEOS = true
	res, err := core.Generate(context.Background(), built.Pipeline, req)
	if err != nil {
		t.Fatal(err)
	}
	wantPrompt := []int32{1, 373, 265, 426, 453, 335, 334, 264, 417}
	if got := res.PromptTokens; !equal(got, wantPrompt) {
		t.Fatalf("prompt tokens %v, want %v", got, wantPrompt)
	}
	gen := readGen(t)
	if got := res.Sequences[0].Tokens; !equal(got, gen[:len(got)]) || len(got) != 100 {
		t.Fatalf("generated %v, want the reference's first 100: %v", got, gen[:100])
	}
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLoad(t *testing.T) {
	m, tok, err := Load(fixtures.Path(t, "models", "stories260K-f32.gguf"), ParseOptionsMust(t, map[string]any{"kv_type": "f16"}))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if tok.VocabSize() != 512 || m.Config().VocabSize != 512 || m.Config().Architecture != "llama" {
		t.Fatalf("vocab %d/%d, arch %q", tok.VocabSize(), m.Config().VocabSize, m.Config().Architecture)
	}
	if m.Cache().Config().DType != cache.Float16 {
		t.Fatal("kv_type not applied")
	}
	if _, _, err := Load("/nonexistent.gguf", ParseOptionsMust(t, nil)); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
}

func ParseOptionsMust(t testing.TB, m map[string]any) (o llama.Options) {
	t.Helper()
	o, err := ParseOptions(m)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      map[string]any
		wantErr string
		check   func(o llama.Options) bool
	}{
		{"empty", nil, "", func(o llama.Options) bool {
			return o.KVType == cache.Float32 && o.KVBudget == 0 && !o.NoPrefixCache && o.BlockSize == 0 && !o.NoRepack && !o.NoMmap
		}},
		{"all", map[string]any{"kv_type": "f16", "kv_budget_mb": int64(64), "block_size": int64(32), "prefix_cache": false, "context_length": int64(100), "batch_tokens": int64(64), "repack": false, "mmap": false}, "",
			func(o llama.Options) bool {
				return o.KVType == cache.Float16 && o.KVBudget == 64<<20 && o.BlockSize == 32 && o.NoPrefixCache && o.ContextLength == 100 && o.BatchTokens == 64 && o.NoRepack && o.NoMmap
			}},
		{"q8_0 kv", map[string]any{"kv_type": "q8_0"}, "", func(o llama.Options) bool { return o.KVType == cache.Q8_0 }},
		{"bad kv type", map[string]any{"kv_type": "q8"}, "kv_type", nil},
		{"kv type not a string", map[string]any{"kv_type": int64(3)}, "kv_type", nil},
		{"negative budget", map[string]any{"kv_budget_mb": int64(-1)}, "kv_budget_mb", nil},
		{"fractional block", map[string]any{"block_size": 1.5}, "block_size", nil},
		{"prefix cache not bool", map[string]any{"prefix_cache": "yes"}, "prefix_cache", nil},
		{"repack not bool", map[string]any{"repack": int64(1)}, "repack", nil},
		{"mmap not bool", map[string]any{"mmap": "no"}, "mmap", nil},
		{"unknown", map[string]any{"threads": int64(2)}, "unknown model option", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := ParseOptions(tc.in)
			if tc.wantErr != "" {
				var pe *core.ParamError
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &pe) {
					t.Fatalf("err = %v, want a ParamError mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(o) {
				t.Fatalf("options %+v", o)
			}
		})
	}
}
