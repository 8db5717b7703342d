package hugepages_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/loomlm/loom/model/hugepages"
)

// mapping returns the /proc/self/smaps entry of the mapping that holds addr ("" if none).
func mapping(t *testing.T, addr uintptr) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	entries := strings.Split(string(b), "\n")
	var cur []string
	found := ""
	flush := func() {
		if len(cur) == 0 {
			return
		}
		var lo, hi uintptr
		if _, err := fmt.Sscanf(cur[0], "%x-%x", &lo, &hi); err == nil && lo <= addr && addr < hi {
			found = strings.Join(cur, "\n")
		}
		cur = nil
	}
	for _, line := range entries {
		if line != "" && !strings.Contains(strings.Fields(line)[0], ":") { // a mapping's first line: "lo-hi perms …"
			flush()
		}
		cur = append(cur, line)
	}
	flush()
	return found
}

func TestAlloc(t *testing.T) {
	for _, n := range []int{1, 4096, hugepages.Size, hugepages.Size + 1, 3*hugepages.Size + 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m, err := hugepages.Alloc(n)
			if !hugepages.Available() {
				if !errors.Is(err, hugepages.ErrUnavailable) || m != nil {
					t.Fatalf("without huge pages: got %v, %v; want ErrUnavailable", m, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b := m.Bytes
			addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
			if len(b) != n || cap(b) != n {
				t.Fatalf("len %d cap %d, want %d", len(b), cap(b), n)
			}
			if addr%hugepages.Size != 0 {
				t.Fatalf("start %#x is not aligned to %d", addr, hugepages.Size)
			}
			for i := range b {
				if b[i] != 0 {
					t.Fatalf("byte %d is %d, not zero", i, b[i])
				}
				b[i] = byte(i)
			}
			if runtime.GOOS == "linux" {
				smaps := mapping(t, addr)
				if !strings.Contains(smaps, "VmFlags:") || !strings.Contains(smaps[strings.Index(smaps, "VmFlags:"):], " hg") {
					t.Fatalf("the mapping is not advised for huge pages:\n%s", smaps)
				}
				for _, line := range strings.Split(smaps, "\n") {
					if strings.HasPrefix(line, "AnonHugePages:") {
						t.Log(strings.Join(strings.Fields(line), " "))
					}
				}
			}
			if err := m.Free(); err != nil {
				t.Fatal(err)
			}
			if m.Bytes != nil {
				t.Fatal("Free left Bytes set")
			}
			if err := m.Free(); err != nil {
				t.Fatalf("second Free: %v", err)
			}
			if runtime.GOOS == "linux" {
				if smaps := mapping(t, addr); smaps != "" {
					t.Fatalf("the memory is still mapped after Free:\n%s", smaps)
				}
			}
		})
	}
}

func TestAllocNothing(t *testing.T) {
	for _, n := range []int{0, -1} {
		if m, err := hugepages.Alloc(n); err == nil || m != nil {
			t.Errorf("Alloc(%d) = %v, %v; want an error", n, m, err)
		}
	}
}
