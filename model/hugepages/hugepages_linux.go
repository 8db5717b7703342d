package hugepages

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// thpSetting is the kernel's transparent huge page setting.
const thpSetting = "/sys/kernel/mm/transparent_hugepage/enabled"

var available = sync.OnceValue(func() bool {
	b, err := os.ReadFile(thpSetting)
	if err != nil { // no such file: a kernel without transparent huge pages
		return false
	}
	// "always [madvise] never": the setting in brackets.
	return !bytes.Contains(b, []byte("[never]"))
})

func alloc(n int) (*Memory, error) {
	size := (n + Size - 1) &^ (Size - 1)
	// Map a huge page more than needed, so that an aligned start lies inside, and give the
	// unaligned ends back. (MmapPtr and MunmapPtr, unlike Mmap, keep no record of the
	// mapping, so parts of it can be unmapped.)
	raw, err := unix.MmapPtr(-1, 0, nil, uintptr(size+Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("hugepages: mapping %d bytes: %w", size, err)
	}
	lead := (Size - uintptr(raw)%Size) % Size
	start := unsafe.Add(raw, lead)
	if lead > 0 {
		if err := unix.MunmapPtr(raw, lead); err != nil {
			unix.MunmapPtr(raw, uintptr(size+Size))
			return nil, fmt.Errorf("hugepages: munmap: %w", err)
		}
	}
	if tail := Size - lead; tail > 0 {
		if err := unix.MunmapPtr(unsafe.Add(start, size), tail); err != nil {
			unix.MunmapPtr(start, uintptr(size))
			return nil, fmt.Errorf("hugepages: munmap: %w", err)
		}
	}
	b := unsafe.Slice((*byte)(start), size)
	if err := unix.Madvise(b, unix.MADV_HUGEPAGE); err != nil {
		unix.MunmapPtr(start, uintptr(size))
		if errors.Is(err, unix.EINVAL) { // a kernel without transparent huge pages
			return nil, ErrUnavailable
		}
		return nil, fmt.Errorf("hugepages: madvise: %w", err)
	}
	free := func() error {
		if err := unix.MunmapPtr(start, uintptr(size)); err != nil {
			return fmt.Errorf("hugepages: munmap: %w", err)
		}
		return nil
	}
	return &Memory{Bytes: b[:n:n], free: free}, nil
}
