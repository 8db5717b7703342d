// Package gguf reads and writes GGUF files, the model format of the GGML family (llama.cpp,
// ollama): a header, typed metadata (key → value), tensor descriptions, and aligned tensor
// data.
//
// Open memory-maps a file; tensor data is returned as slices of the mapping, never copied.
// ReadFile reads a file into memory of the process's own instead (on Linux on transparent
// huge pages), and Read parses a file already in memory. Any input that is not a valid GGUF file yields a
// *FormatError naming what was being read (a metadata key, a tensor) and the byte offset;
// counts and lengths are checked against the bytes that remain before anything is allocated.
//
// Metadata values keep their GGUF type as a Go type: uint8, int8, uint16, int16, uint32,
// int32, uint64, int64, float32, float64, bool and string; an array is a slice of one of these
// ([]uint32, []string, …), and an array of arrays is a []any whose elements are such slices.
// The typed accessors (Uint32, String, Strings, …) convert between integer widths where the
// value fits and fail with a *KeyError naming the key otherwise.
//
// Writer produces GGUF version 3 files with the same value types.
package gguf

import (
	"errors"
	"fmt"

	"github.com/loomlm/loom/model/ggml"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the alignment of tensor data when the metadata has no
// "general.alignment".
const DefaultAlignment = 32

// KeyAlignment is the metadata key that sets the alignment of tensor data.
const KeyAlignment = "general.alignment"

// maxDims is the most dimensions a tensor may have (GGML's limit).
const maxDims = 4

// maxNesting is the deepest nesting of arrays the reader accepts.
const maxNesting = 16

// ValueType is the type tag of a metadata value in a GGUF file.
type ValueType uint32

// The metadata value types of GGUF.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

// String returns the type's name ("uint32"), or "type(N)" for an unknown tag.
func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// size returns the encoded size of a scalar of type t, 0 for strings and arrays, and -1 for
// an unknown tag.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	case TypeString, TypeArray:
		return 0
	}
	return -1
}

// minSize is the fewest bytes a value of type t takes: a string its length, an array its
// element type and count.
func (t ValueType) minSize() int {
	switch t {
	case TypeString:
		return 8
	case TypeArray:
		return 12
	}
	return t.size()
}

// TypeOf returns the GGUF type of a Go value as the package represents metadata, and false
// for a Go type that has no GGUF equivalent. For arrays it returns TypeArray; ElemTypeOf gives
// the element type.
func TypeOf(v any) (ValueType, bool) {
	switch v.(type) {
	case uint8:
		return TypeUint8, true
	case int8:
		return TypeInt8, true
	case uint16:
		return TypeUint16, true
	case int16:
		return TypeInt16, true
	case uint32:
		return TypeUint32, true
	case int32:
		return TypeInt32, true
	case float32:
		return TypeFloat32, true
	case bool:
		return TypeBool, true
	case string:
		return TypeString, true
	case uint64:
		return TypeUint64, true
	case int64:
		return TypeInt64, true
	case float64:
		return TypeFloat64, true
	}
	if _, ok := ElemTypeOf(v); ok {
		return TypeArray, true
	}
	return 0, false
}

// ElemTypeOf returns the element type of an array value, and false when v is not an array as
// the package represents them.
func ElemTypeOf(v any) (ValueType, bool) {
	switch v.(type) {
	case []uint8:
		return TypeUint8, true
	case []int8:
		return TypeInt8, true
	case []uint16:
		return TypeUint16, true
	case []int16:
		return TypeInt16, true
	case []uint32:
		return TypeUint32, true
	case []int32:
		return TypeInt32, true
	case []float32:
		return TypeFloat32, true
	case []bool:
		return TypeBool, true
	case []string:
		return TypeString, true
	case []uint64:
		return TypeUint64, true
	case []int64:
		return TypeInt64, true
	case []float64:
		return TypeFloat64, true
	case []any:
		return TypeArray, true
	}
	return 0, false
}

// KV is one metadata entry.
type KV struct {
	Key   string
	Value any
}

// TensorInfo describes a tensor stored in a file.
type TensorInfo struct {
	// Name is the tensor's name ("blk.0.attn_q.weight").
	Name string
	// Dims are the sizes of the dimensions, fastest-varying first: Dims[0] is the length of a
	// row.
	Dims []uint64
	// Type is the storage type of the elements.
	Type ggml.Type
	// Offset is the position of the tensor's data relative to the file's data section.
	Offset uint64
	// Size is the number of bytes of the tensor's data.
	Size int64
}

// Elements returns the number of elements of the tensor.
func (t *TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	return n
}

// FormatError reports input that is not a valid GGUF file.
type FormatError struct {
	// Path is the file's path, empty when reading from memory.
	Path string
	// Offset is the byte offset at which the problem was found.
	Offset int64
	// What names the part being read: `metadata key "general.name"`, `tensor "output.weight"`;
	// empty for the header.
	What string
	// Msg says what is wrong.
	Msg string
}

// Error returns "gguf: PATH: offset N: WHAT: MSG".
func (e *FormatError) Error() string {
	s := "gguf: "
	if e.Path != "" {
		s += e.Path + ": "
	}
	s += fmt.Sprintf("offset %d: ", e.Offset)
	if e.What != "" {
		s += e.What + ": "
	}
	return s + e.Msg
}

// ErrKeyNotFound is the error (wrapped in a *KeyError) of a metadata accessor whose key is
// absent.
var ErrKeyNotFound = errors.New("not found")

// KeyError reports a metadata key that is missing or whose value has the wrong type.
type KeyError struct {
	Key string
	// Err is ErrKeyNotFound or says how the value does not fit.
	Err error
}

// Error returns `gguf: metadata key "KEY": ERR`.
func (e *KeyError) Error() string { return fmt.Sprintf("gguf: metadata key %q: %v", e.Key, e.Err) }

// Unwrap returns e.Err.
func (e *KeyError) Unwrap() error { return e.Err }
