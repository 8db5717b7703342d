package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"

	"github.com/loomlm/loom/model/ggml"
)

// File is a parsed GGUF file. Tensor data is read from the bytes the file was parsed from;
// for a file from Open, those are a read-only memory mapping valid until Close.
type File struct {
	// Version is the GGUF version, 2 or 3.
	Version uint32
	// Metadata holds the entries in file order.
	Metadata []KV
	// Tensors holds the tensor descriptions in file order.
	Tensors []TensorInfo
	// Alignment is the alignment of tensor data in bytes.
	Alignment int
	// DataOffset is the position of the data section in the file.
	DataOffset int64
	// Size is the file's size in bytes.
	Size int64

	path    string
	data    []byte
	unmap   func() error
	keys    map[string]int
	tensors map[string]int
}

// Open reads the GGUF file at path. Its tensor data is memory-mapped; call Close to release it.
func Open(path string) (*File, error) {
	fh, size, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, unmap, err := mapFile(fh, size)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	f, err := parse(data, path)
	if err != nil {
		if unmap != nil {
			unmap()
		}
		return nil, err
	}
	f.unmap = unmap
	return f, nil
}

// openRegular opens the regular file at path and returns it with its size.
func openRegular(path string) (*os.File, int64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		fh.Close()
		return nil, 0, fmt.Errorf("gguf: %s: not a regular file", path)
	}
	return fh, st.Size(), nil
}

// Read parses a GGUF file held in data. The File refers to data for tensor contents; data
// must not change while the File is in use.
func Read(data []byte) (*File, error) {
	return parse(data, "")
}

// Close releases the memory mapping of a file from Open; slices returned by TensorData must
// not be used afterwards. Close on a File from Read does nothing.
func (f *File) Close() error {
	f.data = nil
	if f.unmap != nil {
		u := f.unmap
		f.unmap = nil
		return u()
	}
	return nil
}

// Path returns the path the file was opened from, or "" for a File from Read.
func (f *File) Path() string { return f.path }

// Tensor returns the description of the named tensor.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensors[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorData returns the bytes of the named tensor, a slice of the file's memory (do not
// modify it).
func (f *File) TensorData(name string) ([]byte, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: %s: no tensor %q", f.describe(), name)
	}
	if f.data == nil {
		return nil, fmt.Errorf("gguf: %s: tensor %q: file is closed", f.describe(), name)
	}
	start := f.DataOffset + int64(t.Offset)
	return f.data[start : start+t.Size : start+t.Size], nil
}

// TensorFloat32 returns the named tensor's elements dequantised to float32 (a new slice).
func (f *File) TensorFloat32(name string) ([]float32, error) {
	data, err := f.TensorData(name)
	if err != nil {
		return nil, err
	}
	t, _ := f.Tensor(name)
	if !ggml.CanDequantize(t.Type) {
		return nil, fmt.Errorf("gguf: %s: tensor %q: type %s is not supported", f.describe(), name, t.Type)
	}
	out := make([]float32, t.Elements())
	if err := ggml.Dequantize(t.Type, data, out); err != nil {
		return nil, fmt.Errorf("gguf: %s: tensor %q: %w", f.describe(), name, err)
	}
	return out, nil
}

func (f *File) describe() string {
	if f.path != "" {
		return f.path
	}
	return "file"
}

// reader decodes little-endian values from data, remembering the first error.
type reader struct {
	data []byte
	off  int
	path string
	err  *FormatError
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = &FormatError{Path: r.path, Offset: int64(r.off), Msg: fmt.Sprintf(format, args...)}
	}
}

// failed reports whether an error happened, and names what was being read in it if it does
// not name anything yet.
func (r *reader) failed(what string) bool {
	if r.err == nil {
		return false
	}
	if r.err.What == "" {
		r.err.What = what
	}
	return true
}

func (r *reader) left() int { return len(r.data) - r.off }

// take returns the next n bytes, or nil after recording an error when fewer remain.
func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.left() {
		r.fail("%s needs %d bytes, %d left", what, n, r.left())
		return nil
	}
	b := r.data[r.off : r.off+n]
	r.off += n
	return b
}

func (r *reader) u32(what string) uint32 {
	b := r.take(4, what)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func (r *reader) u64(what string) uint64 {
	b := r.take(8, what)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

// count reads a uint64 count of items each taking at least minSize bytes and checks that
// they can fit in what remains.
func (r *reader) count(what string, minSize int) int {
	at := r.off
	n := r.u64(what)
	if r.err != nil {
		return 0
	}
	if left := r.left(); n > uint64(left/minSize) {
		r.off = at
		r.fail("%s %d is more than the %d bytes left can hold", what, n, left)
		return 0
	}
	return int(n)
}

func (r *reader) str(what string) string {
	at := r.off
	n := r.u64(what + " length")
	if r.err != nil {
		return ""
	}
	if left := r.left(); n > uint64(left) {
		r.off = at
		r.fail("%s length %d is more than the %d bytes left", what, n, left)
		return ""
	}
	return string(r.take(int(n), what))
}

func parse(data []byte, path string) (*File, error) {
	r := &reader{data: data, path: path}
	f := &File{path: path, data: data, Size: int64(len(data))}
	magic := r.take(4, "magic")
	if r.err != nil {
		return nil, r.err
	}
	if string(magic) != Magic {
		r.off = 0
		r.fail("not a GGUF file (magic %q)", magic)
		return nil, r.err
	}
	f.Version = r.u32("version")
	if r.err != nil {
		return nil, r.err
	}
	switch {
	case f.Version == 2 || f.Version == 3:
	case f.Version == 1:
		r.off = 4
		r.fail("GGUF version 1 is not supported (only 2 and 3)")
	case f.Version&0xffff == 0 && (f.Version>>24 == 2 || f.Version>>24 == 3):
		r.off = 4
		r.fail("big-endian GGUF files are not supported")
	default:
		r.off = 4
		r.fail("unsupported GGUF version %d (only 2 and 3)", f.Version)
	}
	if r.err != nil {
		return nil, r.err
	}
	// A tensor description takes at least a name length, a dimension count, a type and an
	// offset; a metadata entry at least a key length, a type and one byte.
	nTensors := r.count("tensor count", 8+4+4+8)
	nKV := r.count("metadata count", 8+4+1)
	if r.err != nil {
		return nil, r.err
	}

	f.Metadata = make([]KV, 0, nKV)
	f.keys = make(map[string]int, nKV)
	alignAt := 0 // where the alignment entry is, for its error
	for i := range nKV {
		at := r.off
		key := r.str("key")
		if r.failed(fmt.Sprintf("metadata entry %d", i)) {
			return nil, r.err
		}
		what := fmt.Sprintf("metadata key %q", key)
		if _, dup := f.keys[key]; dup {
			r.off = at
			r.fail("duplicate key")
			r.failed(what)
			return nil, r.err
		}
		vt := ValueType(r.u32("value type"))
		v := r.value(vt, 0)
		if r.failed(what) {
			return nil, r.err
		}
		if key == KeyAlignment {
			alignAt = at
		}
		f.keys[key] = len(f.Metadata)
		f.Metadata = append(f.Metadata, KV{Key: key, Value: v})
	}

	f.Alignment = DefaultAlignment
	if i, ok := f.keys[KeyAlignment]; ok {
		a, isU32 := f.Metadata[i].Value.(uint32)
		if !isU32 || a == 0 || a&(a-1) != 0 {
			r.off = alignAt
			r.fail("metadata key %q: alignment must be a uint32 power of two, got %v (%T)", KeyAlignment, f.Metadata[i].Value, f.Metadata[i].Value)
			return nil, r.err
		}
		f.Alignment = int(a)
	}

	f.Tensors = make([]TensorInfo, 0, nTensors)
	f.tensors = make(map[string]int, nTensors)
	for i := range nTensors {
		at := r.off
		t := r.tensorInfo(i)
		what := fmt.Sprintf("tensor %q (#%d)", t.Name, i)
		if r.failed(what) {
			return nil, r.err
		}
		if _, dup := f.tensors[t.Name]; dup {
			r.off = at
			r.fail("duplicate tensor name")
			r.failed(what)
			return nil, r.err
		}
		if t.Offset%uint64(f.Alignment) != 0 {
			r.off = at
			r.fail("data offset %d is not a multiple of the alignment %d", t.Offset, f.Alignment)
			r.failed(what)
			return nil, r.err
		}
		f.tensors[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}

	// The data section starts at the next multiple of the alignment.
	end := int64(r.off)
	f.DataOffset = (end + int64(f.Alignment) - 1) / int64(f.Alignment) * int64(f.Alignment)
	dataLen := int64(len(data)) - f.DataOffset
	if len(f.Tensors) > 0 && dataLen < 0 {
		r.fail("data section at offset %d starts past the end of the file (%d bytes)", f.DataOffset, len(data))
		return nil, r.err
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset > uint64(dataLen) || uint64(t.Size) > uint64(dataLen)-t.Offset {
			return nil, &FormatError{Path: path, Offset: f.DataOffset + int64(min(t.Offset, uint64(dataLen))),
				What: fmt.Sprintf("tensor %q (#%d)", t.Name, i),
				Msg:  fmt.Sprintf("data [%d, +%d) runs past the end of the file (data section holds %d bytes)", t.Offset, t.Size, dataLen)}
		}
	}
	return f, nil
}

func (r *reader) tensorInfo(i int) TensorInfo {
	var t TensorInfo
	t.Name = r.str("name")
	nd := r.u32("dimension count")
	if r.err != nil {
		return t
	}
	if nd > maxDims {
		r.off -= 4
		r.fail("%d dimensions, at most %d allowed", nd, maxDims)
		return t
	}
	t.Dims = make([]uint64, nd)
	elems := uint64(1)
	for d := range t.Dims {
		t.Dims[d] = r.u64("dimension")
		if r.err != nil {
			return t
		}
		if t.Dims[d] > math.MaxInt64 || (t.Dims[d] != 0 && elems > math.MaxInt64/t.Dims[d]) {
			r.off -= 8
			r.fail("dimensions %v overflow the element count", t.Dims[:d+1])
			return t
		}
		elems *= t.Dims[d]
	}
	t.Type = ggml.Type(r.u32("tensor type"))
	if r.err != nil {
		return t
	}
	info, ok := t.Type.Info()
	if !ok {
		r.off -= 4
		r.fail("unknown tensor type %d", uint32(t.Type))
		return t
	}
	rowLen := uint64(1) // a tensor without dimensions holds one element
	if len(t.Dims) > 0 {
		rowLen = t.Dims[0]
	}
	if rowLen%uint64(info.BlockSize) != 0 {
		r.off -= 4
		r.fail("row length %d of %s is not a multiple of the block size %d", rowLen, t.Type, info.BlockSize)
		return t
	}
	blocks := elems / uint64(info.BlockSize)
	if blocks > math.MaxInt64/uint64(info.TypeSize) {
		r.off -= 4
		r.fail("%d elements of %s overflow the byte size", elems, t.Type)
		return t
	}
	t.Size = int64(blocks * uint64(info.TypeSize))
	t.Offset = r.u64("data offset")
	return t
}

// value reads a value of type vt; depth counts enclosing arrays.
func (r *reader) value(vt ValueType, depth int) any {
	if r.err != nil {
		return nil
	}
	switch vt {
	case TypeString:
		return r.str("string")
	case TypeArray:
		return r.array(depth + 1)
	}
	n := vt.size()
	if n < 0 {
		r.off -= 4
		r.fail("unknown value type %d", uint32(vt))
		return nil
	}
	b := r.take(n, vt.String())
	if b == nil {
		return nil
	}
	return decodeScalar(vt, b)
}

func decodeScalar(vt ValueType, b []byte) any {
	switch vt {
	case TypeUint8:
		return b[0]
	case TypeInt8:
		return int8(b[0])
	case TypeUint16:
		return binary.LittleEndian.Uint16(b)
	case TypeInt16:
		return int16(binary.LittleEndian.Uint16(b))
	case TypeUint32:
		return binary.LittleEndian.Uint32(b)
	case TypeInt32:
		return int32(binary.LittleEndian.Uint32(b))
	case TypeFloat32:
		return math.Float32frombits(binary.LittleEndian.Uint32(b))
	case TypeBool:
		return b[0] != 0
	case TypeUint64:
		return binary.LittleEndian.Uint64(b)
	case TypeInt64:
		return int64(binary.LittleEndian.Uint64(b))
	case TypeFloat64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	return nil
}

func (r *reader) array(depth int) any {
	if depth > maxNesting {
		r.fail("arrays nested more than %d deep", maxNesting)
		return nil
	}
	et := ValueType(r.u32("array element type"))
	if r.err != nil {
		return nil
	}
	ms := et.minSize()
	if ms < 0 {
		r.off -= 4
		r.fail("unknown array element type %d", uint32(et))
		return nil
	}
	n := r.count("array length", ms)
	if r.err != nil {
		return nil
	}
	switch et {
	case TypeString:
		out := make([]string, n)
		for i := range out {
			out[i] = r.str("string")
			if r.err != nil {
				r.err.Msg = fmt.Sprintf("element %d: %s", i, r.err.Msg)
				return nil
			}
		}
		return out
	case TypeArray:
		out := make([]any, n)
		for i := range out {
			out[i] = r.array(depth + 1)
			if r.err != nil {
				r.err.Msg = fmt.Sprintf("element %d: %s", i, r.err.Msg)
				return nil
			}
		}
		return out
	}
	b := r.take(n*ms, "array")
	if b == nil {
		return nil
	}
	return decodeScalars(et, b, n)
}

func decodeScalars(et ValueType, b []byte, n int) any {
	le := binary.LittleEndian
	switch et {
	case TypeUint8:
		return append([]uint8(nil), b...)
	case TypeInt8:
		out := make([]int8, n)
		for i := range out {
			out[i] = int8(b[i])
		}
		return out
	case TypeBool:
		out := make([]bool, n)
		for i := range out {
			out[i] = b[i] != 0
		}
		return out
	case TypeUint16:
		out := make([]uint16, n)
		for i := range out {
			out[i] = le.Uint16(b[2*i:])
		}
		return out
	case TypeInt16:
		out := make([]int16, n)
		for i := range out {
			out[i] = int16(le.Uint16(b[2*i:]))
		}
		return out
	case TypeUint32:
		out := make([]uint32, n)
		for i := range out {
			out[i] = le.Uint32(b[4*i:])
		}
		return out
	case TypeInt32:
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(le.Uint32(b[4*i:]))
		}
		return out
	case TypeFloat32:
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		return out
	case TypeUint64:
		out := make([]uint64, n)
		for i := range out {
			out[i] = le.Uint64(b[8*i:])
		}
		return out
	case TypeInt64:
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(le.Uint64(b[8*i:]))
		}
		return out
	case TypeFloat64:
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
		return out
	}
	return nil
}
