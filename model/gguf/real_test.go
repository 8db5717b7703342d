package gguf

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/loomlm/loom/internal/fixtures"

	"github.com/loomlm/loom/model/ggml"
)

func TestStories260K(t *testing.T) {
	dir := filepath.Join(fixtures.Path(t), "models")
	f32, err := Open(filepath.Join(dir, "stories260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f32.Close()
	f16, err := Open(filepath.Join(dir, "stories260K-f16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f16.Close()

	if arch, err := f32.Architecture(); err != nil || arch != "llama" {
		t.Errorf("architecture %q, %v", arch, err)
	}
	for _, c := range []struct {
		key  string
		want uint32
	}{{"context_length", 512}, {"embedding_length", 64}, {"block_count", 5}, {"attention.head_count", 8}, {"attention.head_count_kv", 4}, {"feed_forward_length", 172}} {
		if got, err := f32.ArchUint32(c.key); err != nil || got != c.want {
			t.Errorf("%s = %d, %v; want %d", c.key, got, err, c.want)
		}
	}
	if toks, err := f32.Strings("tokenizer.ggml.tokens"); err != nil || len(toks) != 512 || toks[1] != "<s>" || toks[3] != "<0x00>" {
		t.Errorf("tokens: %d, %v", len(toks), err)
	}
	if len(f32.Tensors) != 47 || len(f16.Tensors) != 47 {
		t.Fatalf("got %d and %d tensors, want 47", len(f32.Tensors), len(f16.Tensors))
	}
	emb, ok := f32.Tensor("token_embd.weight")
	if !ok || emb.Type != ggml.F32 || emb.Dims[0] != 64 || emb.Dims[1] != 512 {
		t.Fatalf("token_embd.weight: %+v", emb)
	}
	// The F16 file holds the F32 weights rounded to half precision.
	for _, ti := range f32.Tensors {
		a, err := f32.TensorFloat32(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := f16.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		other, _ := f16.Tensor(ti.Name)
		if other.Type != ggml.F16 {
			// Norm weights may stay F32 in the F16 file.
			b, err := f16.TensorFloat32(ti.Name)
			if err != nil {
				t.Fatal(err)
			}
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("%s[%d]: %v vs %v", ti.Name, i, a[i], b[i])
				}
			}
			continue
		}
		for i := range a {
			if h := binary.LittleEndian.Uint16(raw[2*i:]); h != ggml.Float32ToHalf(a[i]) {
				t.Fatalf("%s[%d]: F16 file has %#04x, F32 file %v rounds to %#04x", ti.Name, i, h, a[i], ggml.Float32ToHalf(a[i]))
			}
		}
	}
}

// TestRewriteReal reads the real files, writes them again with Writer and checks that the copy
// reads back the same.
func TestRewriteReal(t *testing.T) {
	td := fixtures.Path(t)
	for _, name := range []string{"models/stories260K-f16.gguf", "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-llama-spm.gguf"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(td, name))
			if err != nil {
				t.Fatal(err)
			}
			checkRewrite(t, data)
		})
	}
}
