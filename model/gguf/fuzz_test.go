package gguf

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/loomlm/loom/internal/fixtures"
	"github.com/loomlm/loom/model/ggml"
)

// checkRewrite parses data, writes the result with Writer and checks that it parses to the
// same metadata, tensors and tensor bytes.
func checkRewrite(t *testing.T, data []byte) {
	t.Helper()
	f, err := Read(data)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter()
	for _, kv := range f.Metadata {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatalf("Set(%q): %v", kv.Key, err)
		}
	}
	for _, ti := range f.Tensors {
		b, err := f.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, b); err != nil {
			t.Fatalf("AddTensor(%q): %v", ti.Name, err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	g, err := Read(buf.Bytes())
	if err != nil {
		t.Fatalf("rewritten file: %v", err)
	}
	if !reflect.DeepEqual(normalizeNaN(f.Metadata), normalizeNaN(g.Metadata)) {
		t.Fatal("metadata differs after a rewrite")
	}
	if len(f.Tensors) != len(g.Tensors) {
		t.Fatalf("%d tensors after a rewrite, want %d", len(g.Tensors), len(f.Tensors))
	}
	for i, ti := range f.Tensors {
		gi := g.Tensors[i]
		if ti.Name != gi.Name || ti.Type != gi.Type || !reflect.DeepEqual(ti.Dims, gi.Dims) || ti.Size != gi.Size {
			t.Fatalf("tensor %d: %+v after a rewrite, want %+v", i, gi, ti)
		}
		a, _ := f.TensorData(ti.Name)
		b, _ := g.TensorData(ti.Name)
		if !bytes.Equal(a, b) {
			t.Fatalf("tensor %q: data differs after a rewrite", ti.Name)
		}
	}
}

// normalizeNaN replaces float NaNs, which DeepEqual never finds equal, by a marker.
func normalizeNaN(kvs []KV) []KV {
	out := make([]KV, len(kvs))
	for i, kv := range kvs {
		out[i] = KV{kv.Key, normalizeValue(kv.Value)}
	}
	return out
}

func normalizeValue(v any) any {
	switch x := v.(type) {
	case float32:
		if x != x {
			return "NaN"
		}
	case float64:
		if x != x {
			return "NaN"
		}
	case []float32:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeValue(e)
		}
		return out
	case []float64:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeValue(e)
		}
		return out
	}
	return v
}

// FuzzRead feeds arbitrary bytes to Read: it must return a File or an error, never panic or
// allocate without bound, and every File it returns must survive a rewrite unchanged and
// have readable tensors.
func FuzzRead(f *testing.F) {
	for _, align := range []uint32{0, 1, 64} {
		f.Add(buildFile(f, align, allValues, testTensors))
	}
	f.Add(buildFile(f, 0, allValues[:5], nil))
	f.Add(buildFile(f, 0, nil, testTensors[:2]))
	f.Add(new(bld).header(3, 0, 1).str("a").u32(uint32(TypeArray)).u32(uint32(TypeArray)).u64(2).
		u32(uint32(TypeString)).u64(1).str("x").u32(uint32(TypeArray)).u64(0).Bytes())
	f.Add(new(bld).header(2, 1, 0).tensorInfo("t", ggml.Q8_0, 0, 32).padTo(32).Bytes())
	// The beginnings of the real files, where the metadata is.
	for _, name := range []string{"models/stories260K-f32.gguf", "vocab/ggml-vocab-llama-spm.gguf"} {
		data := fixtures.Read(f, filepath.FromSlash(name))
		f.Add(data[:min(len(data), 4096)])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Read(data)
		if err != nil {
			if file != nil {
				t.Fatal("a File and an error")
			}
			return
		}
		for _, ti := range file.Tensors {
			b, err := file.TensorData(ti.Name)
			if err != nil || int64(len(b)) != ti.Size {
				t.Fatalf("tensor %q: %d bytes, %v", ti.Name, len(b), err)
			}
			if ggml.CanDequantize(ti.Type) && ti.Elements() <= 1<<16 {
				if _, err := file.TensorFloat32(ti.Name); err != nil {
					t.Fatal(err)
				}
			}
		}
		checkRewrite(t, data)
	})
}
