package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/loomlm/loom/model/ggml"
)

// Writer builds a GGUF version 3 file: metadata entries in the order they are first set, then
// tensors in the order they are added, each tensor's data aligned to the file's alignment
// ("general.alignment" when set, otherwise DefaultAlignment).
type Writer struct {
	kvs     []KV
	keys    map[string]int
	tensors []writerTensor
	names   map[string]bool
}

type writerTensor struct {
	info  TensorInfo
	data  []byte
	write func(io.Writer) error
}

// NewWriter returns an empty Writer.
func NewWriter() *Writer {
	return &Writer{keys: map[string]int{}, names: map[string]bool{}}
}

// Set sets a metadata entry. The value must be one of the types the package uses for
// metadata (see the package documentation); setting a key again replaces its value in place.
// An alignment must be a uint32 power of two.
func (w *Writer) Set(key string, value any) error {
	if err := checkValue(value, 0); err != nil {
		return &KeyError{Key: key, Err: err}
	}
	if key == KeyAlignment {
		a, ok := value.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return &KeyError{Key: key, Err: fmt.Errorf("alignment must be a uint32 power of two, got %v (%T)", value, value)}
		}
	}
	if i, ok := w.keys[key]; ok {
		w.kvs[i].Value = value
		return nil
	}
	w.keys[key] = len(w.kvs)
	w.kvs = append(w.kvs, KV{Key: key, Value: value})
	return nil
}

func checkValue(v any, depth int) error {
	if depth > maxNesting {
		return fmt.Errorf("arrays nested more than %d deep", maxNesting)
	}
	if _, ok := TypeOf(v); !ok {
		return fmt.Errorf("unsupported value type %T", v)
	}
	if nested, ok := v.([]any); ok {
		for i, e := range nested {
			if _, isArray := ElemTypeOf(e); !isArray {
				return fmt.Errorf("element %d of an array of arrays is %T, not an array", i, e)
			}
			if err := checkValue(e, depth+1); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
	}
	return nil
}

// AddTensor adds a tensor with the given type and dimensions (fastest-varying first) whose
// data is data, which must be exactly the tensor's size. The Writer keeps data until written.
func (w *Writer) AddTensor(name string, typ ggml.Type, dims []uint64, data []byte) error {
	t, err := w.newTensor(name, typ, dims)
	if err != nil {
		return err
	}
	if int64(len(data)) != t.info.Size {
		return fmt.Errorf("gguf: tensor %q: %d bytes of data, want %d for %v %s", name, len(data), t.info.Size, dims, typ)
	}
	t.data = data
	w.add(t)
	return nil
}

// AddTensorFunc adds a tensor whose data is produced when the file is written: write must
// write exactly the tensor's size in bytes. It lets large files be written without holding
// their data in memory.
func (w *Writer) AddTensorFunc(name string, typ ggml.Type, dims []uint64, write func(io.Writer) error) error {
	t, err := w.newTensor(name, typ, dims)
	if err != nil {
		return err
	}
	t.write = write
	w.add(t)
	return nil
}

func (w *Writer) add(t writerTensor) {
	w.names[t.info.Name] = true
	w.tensors = append(w.tensors, t)
}

func (w *Writer) newTensor(name string, typ ggml.Type, dims []uint64) (writerTensor, error) {
	if w.names[name] {
		return writerTensor{}, fmt.Errorf("gguf: tensor %q added twice", name)
	}
	if len(dims) > maxDims {
		return writerTensor{}, fmt.Errorf("gguf: tensor %q: %d dimensions, at most %d allowed", name, len(dims), maxDims)
	}
	info, ok := typ.Info()
	if !ok {
		return writerTensor{}, fmt.Errorf("gguf: tensor %q: unknown type %d", name, uint32(typ))
	}
	n := uint64(1)
	for _, d := range dims {
		if d != 0 && n > math.MaxInt64/d {
			return writerTensor{}, fmt.Errorf("gguf: tensor %q: dimensions %v overflow", name, dims)
		}
		n *= d
	}
	rowLen := uint64(1) // a tensor without dimensions holds one element
	if len(dims) > 0 {
		rowLen = dims[0]
	}
	if rowLen%uint64(info.BlockSize) != 0 {
		return writerTensor{}, fmt.Errorf("gguf: tensor %q: row length %d of %s is not a multiple of the block size %d", name, rowLen, typ, info.BlockSize)
	}
	blocks := n / uint64(info.BlockSize)
	if blocks > math.MaxInt64/uint64(info.TypeSize) {
		return writerTensor{}, fmt.Errorf("gguf: tensor %q: size overflows", name)
	}
	return writerTensor{info: TensorInfo{Name: name, Dims: append([]uint64(nil), dims...), Type: typ, Size: int64(blocks * uint64(info.TypeSize))}}, nil
}

func (w *Writer) alignment() int64 {
	if i, ok := w.keys[KeyAlignment]; ok {
		return int64(w.kvs[i].Value.(uint32))
	}
	return DefaultAlignment
}

// WriteTo writes the file to out.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	cw := &countingWriter{w: bufio.NewWriterSize(out, 1<<16)}
	e := &encoder{w: cw}
	e.raw([]byte(Magic))
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		e.str(kv.Key)
		t, _ := TypeOf(kv.Value)
		e.u32(uint32(t))
		e.value(kv.Value)
	}
	align := w.alignment()
	var off int64
	for i := range w.tensors {
		t := &w.tensors[i].info
		t.Offset = uint64(off)
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(t.Offset)
		off += pad(t.Size, align)
	}
	e.zeros(pad(cw.n, align) - cw.n)
	for _, t := range w.tensors {
		if e.err != nil {
			break
		}
		start := cw.n
		if t.write != nil {
			if err := t.write(cw); err != nil {
				return cw.n, fmt.Errorf("gguf: tensor %q: %w", t.info.Name, err)
			}
		} else {
			e.raw(t.data)
		}
		if e.err == nil && cw.err == nil && cw.n-start != t.info.Size {
			return cw.n, fmt.Errorf("gguf: tensor %q: wrote %d bytes, want %d", t.info.Name, cw.n-start, t.info.Size)
		}
		e.zeros(pad(t.info.Size, align) - t.info.Size)
	}
	if e.err == nil {
		e.err = cw.err
	}
	if e.err == nil {
		e.err = cw.w.Flush()
	}
	return cw.n, e.err
}

// WriteFile writes the file to path.
func (w *Writer) WriteFile(path string) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = w.WriteTo(fh)
	return errors.Join(err, fh.Close())
}

func pad(n, align int64) int64 { return (n + align - 1) / align * align }

type countingWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// encoder writes little-endian values, remembering the first error.
type encoder struct {
	w   io.Writer
	buf [8]byte
	err error
}

func (e *encoder) raw(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

func (e *encoder) zeros(n int64) {
	var z [64]byte
	for n > 0 {
		k := min(n, int64(len(z)))
		e.raw(z[:k])
		n -= k
	}
}

func (e *encoder) u8(v uint8) { e.buf[0] = v; e.raw(e.buf[:1]) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], v)
	e.raw(e.buf[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], v)
	e.raw(e.buf[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.raw(e.buf[:8])
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		_, e.err = io.WriteString(e.w, s)
	}
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// value writes v without its type tag.
func (e *encoder) value(v any) {
	switch x := v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		e.u8(boolByte(x))
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	default:
		et, _ := ElemTypeOf(v)
		e.u32(uint32(et))
		switch x := v.(type) {
		case []uint8:
			e.u64(uint64(len(x)))
			e.raw(x)
		case []int8:
			writeArray(e, x)
		case []uint16:
			writeArray(e, x)
		case []int16:
			writeArray(e, x)
		case []uint32:
			writeArray(e, x)
		case []int32:
			writeArray(e, x)
		case []float32:
			writeArray(e, x)
		case []bool:
			writeArray(e, x)
		case []string:
			writeArray(e, x)
		case []uint64:
			writeArray(e, x)
		case []int64:
			writeArray(e, x)
		case []float64:
			writeArray(e, x)
		case []any:
			writeArray(e, x)
		}
	}
}

func writeArray[E any](e *encoder, s []E) {
	e.u64(uint64(len(s)))
	for _, x := range s {
		e.value(x)
	}
}
