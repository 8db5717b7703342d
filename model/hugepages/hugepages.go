// Package hugepages allocates memory for large data that is read again and again in long
// sequential streams — a model's weights, read once per generated token — on transparent
// huge pages, where the operating system grants them.
//
// Streaming hundreds of megabytes through 4 KiB pages takes a page-table walk every 4 KiB,
// and the processors' stream prefetchers stop at every page boundary; on 2 MiB pages a 110M
// F32 model's one-row forward pass took 7–10 % less time and its four-row pass (four beams)
// 10–17 % less (docs/BENCHMARKS.md). The weights of a GGUF file mapped from the page cache
// are on 4 KiB pages, and so is the Go heap unless the kernel gives huge pages to every
// mapping, hence this package: an anonymous mapping aligned to 2 MiB and advised with
// MADV_HUGEPAGE (Linux, through golang.org/x/sys/unix), which the kernel backs with huge
// pages as it is first written.
package hugepages

import (
	"errors"
)

// Size is the huge page size allocations are aligned to and rounded up to.
const Size = 2 << 20

// ErrUnavailable is returned by Alloc where transparent huge pages cannot be had: another
// operating system, a kernel built without them, or their setting "never".
var ErrUnavailable = errors.New("hugepages: transparent huge pages are not available")

// Memory is an allocation from Alloc.
type Memory struct {
	// Bytes is the allocation, zeroed, its start aligned to Size.
	Bytes []byte
	free  func() error
}

// Free returns the memory to the operating system. Bytes must not be used afterwards;
// freeing twice does nothing.
func (m *Memory) Free() error {
	if m == nil || m.free == nil {
		return nil
	}
	f := m.free
	m.free, m.Bytes = nil, nil
	return f()
}

// Available reports whether Alloc can give huge pages here.
func Available() bool { return available() }

// Alloc returns n bytes (n > 0) of zeroed memory on transparent huge pages, aligned to Size.
// Where huge pages are not available it returns ErrUnavailable and allocates nothing; the
// caller then keeps its data where it was.
func Alloc(n int) (*Memory, error) {
	if n <= 0 {
		return nil, errors.New("hugepages: allocation of no bytes")
	}
	if !available() {
		return nil, ErrUnavailable
	}
	return alloc(n)
}
