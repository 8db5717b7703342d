package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/loomlm/loom/model/ggml"
)

// allValues has one metadata entry of every value type, arrays of every element type, nested
// and empty arrays.
var allValues = []KV{
	{"general.architecture", "llama"},
	{"u8", uint8(200)},
	{"i8", int8(-100)},
	{"u16", uint16(60000)},
	{"i16", int16(-30000)},
	{"u32", uint32(4000000000)},
	{"i32", int32(-2000000000)},
	{"u64", uint64(1) << 63},
	{"i64", int64(-1) << 62},
	{"f32", float32(3.25)},
	{"f64", math.Pi},
	{"true", true},
	{"false", false},
	{"empty string", ""},
	{"unicode", "▁héllo 世界 🦙"},
	{"a.u8", []uint8{0, 1, 255}},
	{"a.i8", []int8{-128, 0, 127}},
	{"a.u16", []uint16{1, 65535}},
	{"a.i16", []int16{-32768, 32767}},
	{"a.u32", []uint32{7, 4294967295}},
	{"a.i32", []int32{-1, 2, -3}},
	{"a.u64", []uint64{math.MaxUint64, 0}},
	{"a.i64", []int64{math.MinInt64, math.MaxInt64}},
	{"a.f32", []float32{0.5, -1.5, float32(math.Inf(1))}},
	{"a.f64", []float64{1e300, -0.0}},
	{"a.bool", []bool{true, false, true}},
	{"a.string", []string{"a", "", "▁b"}},
	{"a.empty", []float32{}},
	{"a.nested", []any{[]uint32{1, 2}, []string{"x"}, []any{[]int8{-1}}, []any{}}},
	{"llama.context_length", uint32(4096)},
	{"llama.rope.freq_base", float32(10000)},
}

type testTensor struct {
	name string
	typ  ggml.Type
	dims []uint64
}

var testTensors = []testTensor{
	{"token_embd.weight", ggml.F32, []uint64{3, 5}},
	{"blk.0.attn_q.weight", ggml.Q8_0, []uint64{64, 2}},
	{"blk.0.ffn_down.weight", ggml.Q4_K, []uint64{256}},
	{"scalar-ish", ggml.F16, []uint64{1}},
	{"empty", ggml.F32, []uint64{0, 4}},
	{"bf16", ggml.BF16, []uint64{7, 1, 1, 2}},
}

// tensorBytes returns deterministic data of the right size for t.
func tensorBytes(t testing.TB, tt testTensor) []byte {
	n := uint64(1)
	for _, d := range tt.dims {
		n *= d
	}
	size, err := tt.typ.RowBytes(int(n))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i*7 + len(tt.name))
	}
	if tt.typ == ggml.F32 {
		for i := range n {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(i)/4))
		}
	}
	return b
}

func buildFile(t testing.TB, alignment uint32, kvs []KV, tensors []testTensor) []byte {
	t.Helper()
	w := NewWriter()
	if alignment != 0 {
		if err := w.Set(KeyAlignment, alignment); err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range kvs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range tensors {
		if err := w.AddTensor(tt.name, tt.typ, tt.dims, tensorBytes(t, tt)); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo reported %d bytes, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	for _, align := range []uint32{0, 1, 64, 4096} {
		data := buildFile(t, align, allValues, testTensors)
		f, err := Read(data)
		if err != nil {
			t.Fatalf("alignment %d: %v", align, err)
		}
		want := allValues
		if align != 0 {
			want = append([]KV{{KeyAlignment, align}}, allValues...)
		}
		if !reflect.DeepEqual(f.Metadata, want) {
			t.Errorf("alignment %d: metadata differs:\n got %#v\nwant %#v", align, f.Metadata, want)
		}
		wantAlign := int(align)
		if align == 0 {
			wantAlign = DefaultAlignment
		}
		if f.Alignment != wantAlign || f.DataOffset%int64(wantAlign) != 0 || f.Version != 3 {
			t.Errorf("alignment %d: got alignment %d, data offset %d, version %d", align, f.Alignment, f.DataOffset, f.Version)
		}
		if len(f.Tensors) != len(testTensors) {
			t.Fatalf("got %d tensors", len(f.Tensors))
		}
		for i, tt := range testTensors {
			info := f.Tensors[i]
			if info.Name != tt.name || info.Type != tt.typ || !reflect.DeepEqual(info.Dims, tt.dims) {
				t.Errorf("tensor %d: got %+v, want %+v", i, info, tt)
			}
			if info.Offset%uint64(wantAlign) != 0 {
				t.Errorf("tensor %q: offset %d not aligned to %d", tt.name, info.Offset, wantAlign)
			}
			got, err := f.TensorData(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tensorBytes(t, tt)) {
				t.Errorf("tensor %q: data differs", tt.name)
			}
		}
	}
}

func TestTensorFloat32(t *testing.T) {
	f, err := Read(buildFile(t, 0, nil, testTensors))
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.TensorFloat32("token_embd.weight")
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != float32(i)/4 {
			t.Fatalf("element %d = %v, want %v", i, v, float32(i)/4)
		}
	}
	if _, err := f.TensorFloat32("missing"); err == nil || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("missing tensor: %v", err)
	}
	w := NewWriter()
	if err := w.AddTensor("q5", ggml.IQ2_XXS, []uint64{256}, make([]byte, 66)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err = Read(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.TensorFloat32("q5"); err == nil || !strings.Contains(err.Error(), `"q5"`) || !strings.Contains(err.Error(), "IQ2_XXS") {
		t.Errorf("unsupported type: %v", err)
	}
}

func TestOpenAndWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	w := NewWriter()
	if err := w.Set("general.architecture", "llama"); err != nil {
		t.Fatal(err)
	}
	tt := testTensors[1]
	if err := w.AddTensor(tt.name, tt.typ, tt.dims, tensorBytes(t, tt)); err != nil {
		t.Fatal(err)
	}
	err := w.AddTensorFunc("streamed", ggml.F32, []uint64{4}, func(out io.Writer) error {
		_, err := out.Write(bytes.Repeat([]byte{0, 0, 0x80, 0x3f}, 4)) // four 1.0s
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var reported []int64
	openers := []struct {
		name string
		open func(string) (*File, error)
	}{
		{"Open", Open},
		{"ReadFile", func(p string) (*File, error) {
			return ReadFile(p, func(done, total int64) {
				if total != st.Size() {
					t.Errorf("ReadFile progress: total %d, the file has %d bytes", total, st.Size())
				}
				reported = append(reported, done)
			})
		}},
	}
	for _, o := range openers {
		f, err := o.open(path)
		if err != nil {
			t.Fatalf("%s: %v", o.name, err)
		}
		if f.Path() != path {
			t.Errorf("%s: Path() = %q", o.name, f.Path())
		}
		got, err := f.TensorFloat32("streamed")
		if err != nil || !reflect.DeepEqual(got, []float32{1, 1, 1, 1}) {
			t.Errorf("%s: streamed tensor: %v, %v", o.name, got, err)
		}
		data, err := f.TensorData(tt.name)
		if err != nil || !bytes.Equal(data, tensorBytes(t, tt)) {
			t.Errorf("%s: tensor data: %v", o.name, err)
		}
		if o.name == "ReadFile" && runtime.GOOS == "linux" {
			if a := uintptrOf(f.data) % hugePage; a != 0 {
				t.Errorf("ReadFile: the data starts %d bytes past a huge page boundary", a)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatalf("%s: Close: %v", o.name, err)
		}
		if _, err := f.TensorData(tt.name); err == nil {
			t.Errorf("%s: TensorData after Close: no error", o.name)
		}
	}
	if len(reported) == 0 || reported[len(reported)-1] != st.Size() {
		t.Errorf("ReadFile progress %v does not end at the file's %d bytes", reported, st.Size())
	}
}

// TestReadFileErrors checks that ReadFile names the file it could not read: a missing one, a
// directory, and a file that is not GGUF.
func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.gguf")
	if err := os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00truncated"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.gguf"), "missing.gguf"},
		{dir, "not a regular file"},
		{bad, "bad.gguf"},
	} {
		f, err := ReadFile(tc.path, nil)
		if err == nil {
			f.Close()
			t.Errorf("ReadFile(%s): no error", tc.path)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadFile(%s): %v, want it to say %q", tc.path, err, tc.want)
		}
	}
}

func TestWriterErrors(t *testing.T) {
	w := NewWriter()
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"int value", w.Set("k", 7), `"k": unsupported value type int`},
		{"bad nested", w.Set("n", []any{"x"}), `"n": element 0 of an array of arrays is string`},
		{"bad alignment", w.Set(KeyAlignment, uint32(24)), "power of two"},
		{"alignment type", w.Set(KeyAlignment, uint64(32)), "power of two"},
		{"size mismatch", w.AddTensor("t", ggml.F32, []uint64{4}, make([]byte, 15)), `"t": 15 bytes of data, want 16`},
		{"partial block", w.AddTensor("q", ggml.Q8_0, []uint64{16}, make([]byte, 17)), "block size 32"},
		{"unknown type", w.AddTensor("u", ggml.Type(77), []uint64{1}, nil), "unknown type 77"},
		{"too many dims", w.AddTensor("d", ggml.F32, []uint64{1, 1, 1, 1, 1}, make([]byte, 4)), "5 dimensions"},
	}
	for _, tc := range tests {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, tc.err, tc.want)
		}
	}
	if err := w.AddTensor("t", ggml.F32, []uint64{1}, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("t", ggml.F32, []uint64{1}, make([]byte, 4)); err == nil {
		t.Error("duplicate tensor: no error")
	}
	short := NewWriter()
	short.AddTensorFunc("s", ggml.F32, []uint64{2}, func(out io.Writer) error {
		_, err := out.Write(make([]byte, 4))
		return err
	})
	if _, err := short.WriteTo(io.Discard); err == nil || !strings.Contains(err.Error(), "wrote 4 bytes, want 8") {
		t.Errorf("short tensor function: %v", err)
	}
}

func TestAccessors(t *testing.T) {
	f, err := Read(buildFile(t, 0, allValues, nil))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		v   any
		err error
	}
	r := func(v any, err error) result { return result{v, err} }
	tests := []struct {
		name    string
		got     result
		want    any
		wantErr string
	}{
		{"uint32 from uint32", r(f.Uint32("u32")), uint32(4000000000), ""},
		{"uint32 from uint8", r(f.Uint32("u8")), uint32(200), ""},
		{"uint32 from negative", r(f.Uint32("i8")), nil, `"i8": value -100 does not fit a uint32`},
		{"uint32 from big", r(f.Uint32("u64")), nil, "does not fit a uint32"},
		{"uint32 from string", r(f.Uint32("unicode")), nil, `"unicode": is string, want a uint32`},
		{"uint32 missing", r(f.Uint32("nope")), nil, `"nope": not found`},
		{"int32 from int16", r(f.Int32("i16")), int32(-30000), ""},
		{"int64", r(f.Int64("i64")), int64(-1) << 62, ""},
		{"uint64", r(f.Uint64("u64")), uint64(1) << 63, ""},
		{"uint64 from u16", r(f.Uint64("u16")), uint64(60000), ""},
		{"float32", r(f.Float32("f32")), float32(3.25), ""},
		{"float32 from float64", r(f.Float32("f64")), float32(math.Pi), ""},
		{"float32 from int", r(f.Float32("i16")), float32(-30000), ""},
		{"float32 from bool", r(f.Float32("true")), nil, "is bool, want a number"},
		{"bool", r(f.Bool("true")), true, ""},
		{"bool from u8", r(f.Bool("u8")), nil, "is uint8, want bool"},
		{"string", r(f.String("unicode")), "▁héllo 世界 🦙", ""},
		{"strings", r(f.Strings("a.string")), []string{"a", "", "▁b"}, ""},
		{"strings from ints", r(f.Strings("a.i32")), nil, `"a.i32": is array of int32, want array of string`},
		{"float32s", r(f.Float32s("a.f32")), []float32{0.5, -1.5, float32(math.Inf(1))}, ""},
		{"float32s from int32s", r(f.Float32s("a.i32")), []float32{-1, 2, -3}, ""},
		{"float32s from strings", r(f.Float32s("a.string")), nil, "want array of float32"},
		{"int32s", r(f.Int32s("a.i32")), []int32{-1, 2, -3}, ""},
		{"int32s from u8", r(f.Int32s("a.u8")), []int32{0, 1, 255}, ""},
		{"int32s overflow", r(f.Int32s("a.u32")), nil, "element 1: value 4294967295 does not fit an int32"},
		{"array len", r(f.ArrayLen("a.nested")), 4, ""},
		{"array len of scalar", r(f.ArrayLen("u8")), nil, "is uint8, want an array"},
		{"architecture", r(f.Architecture()), "llama", ""},
		{"arch key", r(f.ArchKey("context_length"), nil), "llama.context_length", ""},
		{"arch uint32", r(f.ArchUint32("context_length")), uint32(4096), ""},
		{"arch float32", r(f.ArchFloat32("rope.freq_base")), float32(10000), ""},
		{"arch missing", r(f.ArchUint32("block_count")), nil, `"llama.block_count": not found`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wantErr != "" {
				if tc.got.err == nil || !strings.Contains(tc.got.err.Error(), tc.wantErr) {
					t.Fatalf("got %v, %v; want an error containing %q", tc.got.v, tc.got.err, tc.wantErr)
				}
				var ke *KeyError
				if !errors.As(tc.got.err, &ke) {
					t.Errorf("error %T is not a *KeyError", tc.got.err)
				}
				return
			}
			if tc.got.err != nil || !reflect.DeepEqual(tc.got.v, tc.want) {
				t.Fatalf("got %#v, %v; want %#v", tc.got.v, tc.got.err, tc.want)
			}
		})
	}
	if _, err := f.Uint32("nope"); !errors.Is(err, ErrKeyNotFound) {
		t.Errorf("missing key error %v is not ErrKeyNotFound", err)
	}
	if !f.Has("u8") || f.Has("nope") {
		t.Error("Has")
	}
}

// bld assembles raw GGUF bytes for malformed-input tests.
type bld struct{ bytes.Buffer }

func (b *bld) u32(v uint32) *bld { binary.Write(b, binary.LittleEndian, v); return b }
func (b *bld) u64(v uint64) *bld { binary.Write(b, binary.LittleEndian, v); return b }
func (b *bld) str(s string) *bld { b.u64(uint64(len(s))); b.WriteString(s); return b }
func (b *bld) header(version uint32, tensors, kvs uint64) *bld {
	b.WriteString(Magic)
	return b.u32(version).u64(tensors).u64(kvs)
}

// tensorInfo appends a tensor description.
func (b *bld) tensorInfo(name string, typ ggml.Type, offset uint64, dims ...uint64) *bld {
	b.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		b.u64(d)
	}
	return b.u32(uint32(typ)).u64(offset)
}

func (b *bld) padTo(align int) *bld {
	for b.Len()%align != 0 {
		b.WriteByte(0)
	}
	return b
}

func TestMalformed(t *testing.T) {
	nested := new(bld).header(3, 0, 1).str("deep").u32(uint32(TypeArray))
	for range 20 {
		nested.u32(uint32(TypeArray)).u64(1)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "offset 0: magic needs 4 bytes, 0 left"},
		{"wrong magic", []byte("GGML\x03\x00\x00\x00"), `not a GGUF file (magic "GGML")`},
		{"version 1", new(bld).header(1, 0, 0).Bytes(), "version 1 is not supported"},
		{"version 9", new(bld).header(9, 0, 0).Bytes(), "unsupported GGUF version 9"},
		{"big endian", new(bld).header(3<<24, 0, 0).Bytes(), "big-endian"},
		{"no counts", []byte("GGUF\x03\x00\x00\x00"), "offset 8: tensor count needs 8 bytes"},
		{"absurd tensor count", new(bld).header(3, 1<<62, 0).Bytes(), "tensor count 4611686018427387904 is more than"},
		{"absurd kv count", new(bld).header(3, 0, math.MaxUint64).Bytes(), "metadata count 18446744073709551615"},
		{"absurd key length", new(bld).header(3, 0, 1).u64(1 << 60).u64(0).Bytes(), "offset 24: metadata entry 0: key length 1152921504606846976 is more than the 8 bytes left"},
		{"truncated value", new(bld).header(3, 0, 1).str("k").u32(uint32(TypeUint64)).u32(1).Bytes(), `offset 37: metadata key "k": uint64 needs 8 bytes, 4 left`},
		{"unknown value type", new(bld).header(3, 0, 1).str("k").u32(13).Bytes(), `offset 33: metadata key "k": unknown value type 13`},
		{"absurd string", new(bld).header(3, 0, 1).str("name").u32(uint32(TypeString)).u64(1 << 40).Bytes(), `metadata key "name": string length 1099511627776 is more than the 0 bytes left`},
		{"absurd array", new(bld).header(3, 0, 1).str("a").u32(uint32(TypeArray)).u32(uint32(TypeUint32)).u64(1 << 61).Bytes(), `metadata key "a": array length 2305843009213693952`},
		{"unknown element type", new(bld).header(3, 0, 1).str("a").u32(uint32(TypeArray)).u32(99).u64(0).Bytes(), "unknown array element type 99"},
		{"bad string in array", new(bld).header(3, 0, 1).str("toks").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(2).str("a").u64(1000).Bytes(), `metadata key "toks": element 1: string length 1000`},
		{"nesting", nested.Bytes(), "nested more than 16 deep"},
		{"duplicate key", new(bld).header(3, 0, 2).str("k").u32(uint32(TypeBool)).u32(0).Bytes()[:0:0], ""},
		{"alignment zero", new(bld).header(3, 0, 1).str(KeyAlignment).u32(uint32(TypeUint32)).u32(0).Bytes(), `offset 24: metadata key "general.alignment": alignment must be a uint32 power of two, got 0 (uint32)`},
		{"alignment type", new(bld).header(3, 0, 1).str(KeyAlignment).u32(uint32(TypeString)).str("32").Bytes(), "alignment must be a uint32 power of two"},
		{"too many dims", new(bld).header(3, 1, 0).tensorInfo("t", ggml.F32, 0, 1, 1, 1, 1, 1).Bytes(), `tensor "t" (#0): 5 dimensions`},
		{"dims overflow", new(bld).header(3, 1, 0).tensorInfo("big", ggml.F32, 0, 1<<40, 1<<40).Bytes(), `tensor "big" (#0): dimensions [1099511627776 1099511627776] overflow`},
		{"size overflow", new(bld).header(3, 1, 0).tensorInfo("big", ggml.F64, 0, 1<<62).Bytes(), "overflow the byte size"},
		{"unknown tensor type", new(bld).header(3, 1, 0).tensorInfo("w", ggml.Type(4), 0, 1).Bytes(), `tensor "w" (#0): unknown tensor type 4`},
		{"partial block", new(bld).header(3, 1, 0).tensorInfo("q", ggml.Q4_0, 0, 16).Bytes(), "row length 16 of Q4_0 is not a multiple of the block size 32"},
		{"misaligned", new(bld).header(3, 1, 0).tensorInfo("m", ggml.F32, 4, 1).padTo(32).u64(0).Bytes(), `tensor "m" (#0): data offset 4 is not a multiple of the alignment 32`},
		{"data past end", new(bld).header(3, 1, 0).tensorInfo("p", ggml.F32, 0, 16).padTo(32).u64(0).Bytes(), `tensor "p" (#0): data [0, +64) runs past the end of the file (data section holds 8 bytes)`},
		{"offset past end", new(bld).header(3, 1, 0).tensorInfo("o", ggml.F32, 1<<40, 1).padTo(32).Bytes(), `tensor "o" (#0): data [1099511627776, +4) runs past the end`},
		{"no data section", new(bld).header(3, 1, 0).tensorInfo("n", ggml.F32, 0, 0).Bytes(), "data section at offset 64 starts past the end"},
	}
	// A duplicate key and a duplicate tensor.
	dupKey := new(bld).header(3, 0, 2)
	dupKey.str("k").u32(uint32(TypeBool)).WriteByte(1)
	dupKey.str("k").u32(uint32(TypeBool)).WriteByte(0)
	tests[16] = struct {
		name string
		data []byte
		want string
	}{"duplicate key", dupKey.Bytes(), `offset 38: metadata key "k": duplicate key`}
	dupTensor := new(bld).header(3, 2, 0).tensorInfo("t", ggml.F32, 0, 1).tensorInfo("t", ggml.F32, 32, 1).padTo(32)
	dupTensor.Write(make([]byte, 64))
	tests = append(tests, struct {
		name string
		data []byte
		want string
	}{"duplicate tensor", dupTensor.Bytes(), `tensor "t" (#1): duplicate tensor name`})

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Read(tc.data)
			if err == nil {
				t.Fatalf("no error; got %d keys, %d tensors", len(f.Metadata), len(f.Tensors))
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Errorf("error %T is not a *FormatError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestTruncated checks that every prefix of a valid file is rejected with an error.
func TestTruncated(t *testing.T) {
	data := buildFile(t, 0, allValues, testTensors)
	for n := range len(data) {
		if _, err := Read(data[:n]); err == nil {
			// Only a cut in the padding after the last tensor is harmless, and the writer
			// pads the last tensor too: the last tensor's end must be past n.
			f, _ := Read(data)
			last := f.Tensors[len(f.Tensors)-1]
			if int64(n) >= f.DataOffset+int64(last.Offset)+last.Size {
				continue
			}
			t.Fatalf("prefix of %d of %d bytes: no error", n, len(data))
		}
	}
}

func TestFormatErrorPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.gguf")
	if err := os.WriteFile(path, []byte("GGUF\x03\x00\x00\x00\x01"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	if err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("gguf: %s: offset 8: ", path)) {
		t.Errorf("got %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "none.gguf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.gguf")
	os.WriteFile(empty, nil, 0o644)
	if _, err := Open(empty); err == nil {
		t.Error("empty file: no error")
	}
}
