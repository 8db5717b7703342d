//go:build !amd64 || purego

package cache

const hasF16C = false

func encodeHalfF16C(dst *uint16, src *float32, n int) { panic("unreachable") }
func decodeHalfF16C(dst *float32, src *uint16, n int) { panic("unreachable") }
