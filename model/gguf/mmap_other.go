//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package gguf

import "os"

// mapFile reads the file into memory on systems where loom does not memory-map.
func mapFile(fh *os.File, size int64) ([]byte, func() error, error) {
	return readFile(fh, size)
}

// allocate returns size bytes of memory from the Go heap (large allocations start on a page
// boundary), released by the collector.
func allocate(size int) ([]byte, func() error, error) {
	return make([]byte, size), nil, nil
}
