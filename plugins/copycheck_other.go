//go:build !amd64 || purego

package plugins

// copyChecked copies src into dst (same length) and returns the index of the first NaN or
// +Inf among the copied values, or -1.
func copyChecked(dst, src []float32) int {
	copy(dst, src)
	return firstInvalid(dst)
}
