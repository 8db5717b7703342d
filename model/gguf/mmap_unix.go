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

// allocate returns size bytes of anonymous memory starting on a hugePage boundary, advised
// for huge pages where the system has them, with the function that unmaps it.
func allocate(size int) ([]byte, func() error, error) {
	if size == 0 {
		return []byte{}, nil, nil
	}
	mem, err := syscall.Mmap(-1, 0, size+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil, err
	}
	skip := 0
	if r := int(uintptrOf(mem) % hugePage); r != 0 {
		skip = hugePage - r
	}
	data := mem[skip : skip+size : skip+size]
	adviseHugePages(data)
	return data, func() error { return syscall.Munmap(mem) }, nil
}
