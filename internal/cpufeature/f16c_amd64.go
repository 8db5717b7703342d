//go:build !purego

package cpufeature

import "golang.org/x/sys/cpu"

// HasF16C reports whether the CPU converts between float32 and float16 with the F16C
// instructions (VCVTPS2PH, VCVTPH2PS) on YMM registers: CPUID leaf 1, ECX bit 29, and the
// operating system saves the YMM registers.
var HasF16C = cpu.X86.HasAVX && cpuid1ECX()&(1<<29) != 0

// cpuid1ECX returns ECX of CPUID leaf 1 (feature information).
func cpuid1ECX() uint32
