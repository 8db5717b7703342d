//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package gguf

import (
	"os"
	"syscall"
)

// mapFile maps size bytes of fh read-only and returns them with the function that unmaps
// them. An empty file maps to an empty slice.
func mapFile(fh *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return []byte{}, nil, nil
	}
	if int64(int(size)) != size {
		return nil, nil, syscall.EFBIG
	}
	data, err := syscall.Mmap(int(fh.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		// Some file systems cannot be mapped; read the file instead.
		return readFile(fh, size)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
