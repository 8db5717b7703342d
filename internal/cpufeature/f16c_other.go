//go:build !amd64 || purego

package cpufeature

// HasF16C is false: there is no assembly that would use F16C here.
const HasF16C = false
