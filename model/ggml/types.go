// Package ggml describes the tensor storage types of the GGML family of formats (GGUF): their
// ids, names and block layout. It is the one table the GGUF reader, the dequantisers and the
// kernels share.
package ggml

import "fmt"

// Type is a GGML tensor type id as stored in GGUF tensor infos.
type Type uint32

// The GGML tensor types. Ids 4, 5 and 31–33 are retired in GGML and not listed.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
)

// TypeInfo is the layout of a type: elements are stored in blocks of BlockSize elements, each
// block taking TypeSize bytes.
type TypeInfo struct {
	Name      string
	BlockSize int
	TypeSize  int
}

var typeInfo = map[Type]TypeInfo{
	F32:     {"F32", 1, 4},
	F16:     {"F16", 1, 2},
	BF16:    {"BF16", 1, 2},
	F64:     {"F64", 1, 8},
	I8:      {"I8", 1, 1},
	I16:     {"I16", 1, 2},
	I32:     {"I32", 1, 4},
	I64:     {"I64", 1, 8},
	Q4_0:    {"Q4_0", 32, 2 + 16},
	Q4_1:    {"Q4_1", 32, 2 + 2 + 16},
	Q5_0:    {"Q5_0", 32, 2 + 4 + 16},
	Q5_1:    {"Q5_1", 32, 2 + 2 + 4 + 16},
	Q8_0:    {"Q8_0", 32, 2 + 32},
	Q8_1:    {"Q8_1", 32, 2 + 2 + 32},
	Q2_K:    {"Q2_K", 256, 16 + 64 + 2 + 2},
	Q3_K:    {"Q3_K", 256, 32 + 64 + 12 + 2},
	Q4_K:    {"Q4_K", 256, 2 + 2 + 12 + 128},
	Q5_K:    {"Q5_K", 256, 2 + 2 + 12 + 32 + 128},
	Q6_K:    {"Q6_K", 256, 128 + 64 + 16 + 2},
	Q8_K:    {"Q8_K", 256, 4 + 256 + 32},
	IQ4_NL:  {"IQ4_NL", 32, 2 + 16},
	IQ4_XS:  {"IQ4_XS", 256, 2 + 2 + 4 + 128},
	IQ2_XXS: {"IQ2_XXS", 256, 2 + 64},
	IQ2_XS:  {"IQ2_XS", 256, 2 + 64 + 8},
	IQ2_S:   {"IQ2_S", 256, 2 + 64 + 8 + 8},
	IQ3_XXS: {"IQ3_XXS", 256, 2 + 96},
	IQ3_S:   {"IQ3_S", 256, 2 + 64 + 32 + 8 + 4},
	IQ1_S:   {"IQ1_S", 256, 2 + 32 + 16},
	IQ1_M:   {"IQ1_M", 256, 32 + 16 + 8},
	TQ1_0:   {"TQ1_0", 256, 48 + 4 + 2},
	TQ2_0:   {"TQ2_0", 256, 64 + 2},
}

// Info returns the layout of t, and false for an unknown id.
func (t Type) Info() (TypeInfo, bool) {
	ti, ok := typeInfo[t]
	return ti, ok
}

// String returns the type's GGML name, or "type(N)" for an unknown id.
func (t Type) String() string {
	if ti, ok := typeInfo[t]; ok {
		return ti.Name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// ParseType returns the type with the given GGML name ("Q8_0").
func ParseType(name string) (Type, bool) {
	for t, ti := range typeInfo {
		if ti.Name == name {
			return t, true
		}
	}
	return 0, false
}

// RowBytes returns the bytes taken by n elements of type t. It fails for an unknown type and
// when n is not a whole number of blocks.
func (t Type) RowBytes(n int) (int, error) {
	ti, ok := typeInfo[t]
	if !ok {
		return 0, fmt.Errorf("unknown tensor type %d", uint32(t))
	}
	if n%ti.BlockSize != 0 {
		return 0, fmt.Errorf("%d elements of %s: not a multiple of the block size %d", n, ti.Name, ti.BlockSize)
	}
	return n / ti.BlockSize * ti.TypeSize, nil
}
