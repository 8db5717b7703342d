package gguf

import (
	"fmt"
	"math"
)

// Value returns the value of a metadata key.
func (f *File) Value(key string) (any, bool) {
	i, ok := f.keys[key]
	if !ok {
		return nil, false
	}
	return f.Metadata[i].Value, true
}

// Has reports whether the metadata has key.
func (f *File) Has(key string) bool {
	_, ok := f.keys[key]
	return ok
}

func (f *File) lookup(key string) (any, error) {
	v, ok := f.Value(key)
	if !ok {
		return nil, &KeyError{Key: key, Err: ErrKeyNotFound}
	}
	return v, nil
}

// describeType names the GGUF type of a metadata value for errors: "string", "array of
// uint32".
func describeType(v any) string {
	if et, ok := ElemTypeOf(v); ok {
		return "array of " + et.String()
	}
	if t, ok := TypeOf(v); ok {
		return t.String()
	}
	return fmt.Sprintf("%T", v)
}

func mistyped(key string, v any, want string) error {
	return &KeyError{Key: key, Err: fmt.Errorf("is %s, want %s", describeType(v), want)}
}

// asInt returns an integer value as int64 (ok false for non-integers); big reports a uint64
// above math.MaxInt64, whose value is then in u.
func asInt(v any) (i int64, u uint64, big, ok bool) {
	switch x := v.(type) {
	case uint8:
		return int64(x), 0, false, true
	case int8:
		return int64(x), 0, false, true
	case uint16:
		return int64(x), 0, false, true
	case int16:
		return int64(x), 0, false, true
	case uint32:
		return int64(x), 0, false, true
	case int32:
		return int64(x), 0, false, true
	case int64:
		return x, 0, false, true
	case uint64:
		if x > math.MaxInt64 {
			return 0, x, true, true
		}
		return int64(x), 0, false, true
	}
	return 0, 0, false, false
}

// integer returns the value of key as an integer in [lo, hi].
func (f *File) integer(key string, lo, hi int64, want string) (int64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	i, u, big, ok := asInt(v)
	if !ok {
		return 0, mistyped(key, v, want)
	}
	if big {
		return 0, &KeyError{Key: key, Err: fmt.Errorf("value %d does not fit %s", u, want)}
	}
	if i < lo || i > hi {
		return 0, &KeyError{Key: key, Err: fmt.Errorf("value %d does not fit %s", i, want)}
	}
	return i, nil
}

// Uint32 returns the value of key, which may be stored as any integer type that holds it.
func (f *File) Uint32(key string) (uint32, error) {
	i, err := f.integer(key, 0, math.MaxUint32, "a uint32")
	return uint32(i), err
}

// Int32 returns the value of key, which may be stored as any integer type that holds it.
func (f *File) Int32(key string) (int32, error) {
	i, err := f.integer(key, math.MinInt32, math.MaxInt32, "an int32")
	return int32(i), err
}

// Int64 returns the value of key, which may be stored as any integer type that holds it.
func (f *File) Int64(key string) (int64, error) {
	return f.integer(key, math.MinInt64, math.MaxInt64, "an int64")
}

// Uint64 returns the value of key, which may be stored as any non-negative integer.
func (f *File) Uint64(key string) (uint64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	if x, ok := v.(uint64); ok {
		return x, nil
	}
	i, err := f.integer(key, 0, math.MaxInt64, "a uint64")
	return uint64(i), err
}

// Float32 returns the value of key, stored as a float or an integer.
func (f *File) Float32(key string) (float32, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case float32:
		return x, nil
	case float64:
		return float32(x), nil
	}
	if i, u, big, ok := asInt(v); ok {
		if big {
			return float32(u), nil
		}
		return float32(i), nil
	}
	return 0, mistyped(key, v, "a number")
}

// Bool returns the value of key, which must be a bool.
func (f *File) Bool(key string) (bool, error) {
	v, err := f.lookup(key)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, mistyped(key, v, "bool")
	}
	return b, nil
}

// String returns the value of key, which must be a string.
func (f *File) String(key string) (string, error) {
	v, err := f.lookup(key)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", mistyped(key, v, "string")
	}
	return s, nil
}

// Strings returns the value of key, which must be an array of strings. The slice is the
// File's own: do not modify it.
func (f *File) Strings(key string) ([]string, error) {
	v, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.([]string)
	if !ok {
		return nil, mistyped(key, v, "array of string")
	}
	return s, nil
}

// Float32s returns the value of key, an array of numbers. An array of float32 is returned as
// stored (do not modify it); other numeric arrays are converted.
func (f *File) Float32s(key string) ([]float32, error) {
	v, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case []float32:
		return x, nil
	case []float64:
		return convert(x, func(e float64) float32 { return float32(e) }), nil
	}
	ints, ok := intArray(v)
	if !ok {
		return nil, mistyped(key, v, "array of float32")
	}
	return convert(ints, func(e int64) float32 { return float32(e) }), nil
}

// Int32s returns the value of key, an array of integers that fit int32. An array of int32 is
// returned as stored (do not modify it); other integer arrays are converted.
func (f *File) Int32s(key string) ([]int32, error) {
	v, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	if x, ok := v.([]int32); ok {
		return x, nil
	}
	ints, ok := intArray(v)
	if !ok {
		return nil, mistyped(key, v, "array of int32")
	}
	out := make([]int32, len(ints))
	for i, e := range ints {
		if e < math.MinInt32 || e > math.MaxInt32 {
			return nil, &KeyError{Key: key, Err: fmt.Errorf("element %d: value %d does not fit an int32", i, e)}
		}
		out[i] = int32(e)
	}
	return out, nil
}

func convert[E, F any](in []E, fn func(E) F) []F {
	out := make([]F, len(in))
	for i, e := range in {
		out[i] = fn(e)
	}
	return out
}

// intArray converts an array of any integer type to int64 (uint64 elements above
// math.MaxInt64 saturate).
func intArray(v any) ([]int64, bool) {
	switch x := v.(type) {
	case []uint8:
		return convert(x, func(e uint8) int64 { return int64(e) }), true
	case []int8:
		return convert(x, func(e int8) int64 { return int64(e) }), true
	case []uint16:
		return convert(x, func(e uint16) int64 { return int64(e) }), true
	case []int16:
		return convert(x, func(e int16) int64 { return int64(e) }), true
	case []uint32:
		return convert(x, func(e uint32) int64 { return int64(e) }), true
	case []int32:
		return convert(x, func(e int32) int64 { return int64(e) }), true
	case []int64:
		return x, true
	case []uint64:
		return convert(x, func(e uint64) int64 { return int64(min(e, math.MaxInt64)) }), true
	}
	return nil, false
}

// ArrayLen returns the number of elements of the array stored at key.
func (f *File) ArrayLen(key string) (int, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case []uint8:
		return len(x), nil
	case []int8:
		return len(x), nil
	case []uint16:
		return len(x), nil
	case []int16:
		return len(x), nil
	case []uint32:
		return len(x), nil
	case []int32:
		return len(x), nil
	case []float32:
		return len(x), nil
	case []bool:
		return len(x), nil
	case []string:
		return len(x), nil
	case []uint64:
		return len(x), nil
	case []int64:
		return len(x), nil
	case []float64:
		return len(x), nil
	case []any:
		return len(x), nil
	}
	return 0, mistyped(key, v, "an array")
}

// Architecture returns "general.architecture", the name that prefixes the model's own keys
// ("llama", "qwen2").
func (f *File) Architecture() (string, error) {
	return f.String("general.architecture")
}

// ArchKey returns the key name prefixed with the file's architecture: ArchKey("context_length")
// is "llama.context_length" in a llama model. Without an architecture it returns name.
func (f *File) ArchKey(name string) string {
	arch, err := f.Architecture()
	if err != nil || arch == "" {
		return name
	}
	return arch + "." + name
}

// ArchUint32 returns the architecture-prefixed key name as a uint32 (see ArchKey).
func (f *File) ArchUint32(name string) (uint32, error) {
	return f.Uint32(f.ArchKey(name))
}

// ArchFloat32 returns the architecture-prefixed key name as a float32 (see ArchKey).
func (f *File) ArchFloat32(name string) (float32, error) {
	return f.Float32(f.ArchKey(name))
}
