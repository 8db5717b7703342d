package cpufeature

import (
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestAgreesWithLinux compares the features with the flags Linux reports in /proc/cpuinfo,
// which it reads from CPUID and clears when it does not save the registers they use.
func TestAgreesWithLinux(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("/proc/cpuinfo flags are compared on linux/amd64 only, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	var flags []string
	for line := range strings.Lines(string(data)) {
		if name, value, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "flags" {
			flags = strings.Fields(value)
			break
		}
	}
	if len(flags) == 0 {
		t.Fatal("/proc/cpuinfo has no flags line")
	}
	want := slices.Contains(flags, "f16c") && slices.Contains(flags, "avx") && !purego
	if HasF16C != want {
		t.Errorf("HasF16C = %v; /proc/cpuinfo says f16c %v, avx %v (purego build: %v)",
			HasF16C, slices.Contains(flags, "f16c"), slices.Contains(flags, "avx"), purego)
	}
	// The same source agrees with x/sys/cpu on a flag both know, as a check of the parsing.
	if got := slices.Contains(flags, "avx2"); got != cpu.X86.HasAVX2 {
		t.Errorf("/proc/cpuinfo avx2 %v, cpu.X86.HasAVX2 %v", got, cpu.X86.HasAVX2)
	}
}
