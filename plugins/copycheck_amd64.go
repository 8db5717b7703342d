//go:build !purego

package plugins

import "golang.org/x/sys/cpu"

//go:noescape
func copyCheckAVX2(dst, src *float32, n int) (bad bool)

// copyChecked copies src into dst (same length) and returns the index of the first NaN or
// +Inf among the copied values, or -1, in one pass over the row when the CPU has AVX2.
func copyChecked(dst, src []float32) int {
	n := len(src) &^ 31
	if !cpu.X86.HasAVX2 || n == 0 {
		copy(dst, src)
		return firstInvalid(dst)
	}
	dst = dst[:len(src)]
	bad := copyCheckAVX2(&dst[0], &src[0], n)
	copy(dst[n:], src[n:])
	if !bad && firstInvalid(dst[n:]) < 0 {
		return -1
	}
	return firstInvalid(dst)
}
