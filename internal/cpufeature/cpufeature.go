// Package cpufeature reports the CPU features loom's assembly needs that golang.org/x/sys/cpu
// does not expose. Everything else comes from cpu.X86 directly.
//
// x/sys/cpu (v0.48) has no F16C flag, and F16C is not implied by the flags it has: a
// hypervisor may offer AVX2 and hide F16C. So the F16C bit is read with one CPUID instruction
// (leaf 1, ECX bit 29), the only hand-written CPUID in loom; the operating system's support
// for the YMM registers the conversions use comes from cpu.X86.HasAVX. With -tags purego, or
// on other architectures, every feature here is false.
package cpufeature
