package gguf

import (
	"fmt"
	"io"
	"os"
	"unsafe"
)

// readFile reads size bytes of fh into memory, for when a mapping is not possible.
func readFile(fh *os.File, size int64) ([]byte, func() error, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(fh, 0, size), data); err != nil {
		return nil, nil, err
	}
	return data, nil, nil
}

// ReadFile reads the GGUF file at path into memory of the process's own instead of mapping
// it, as llama.cpp's --no-mmap does. On Linux that memory is an anonymous mapping aligned to
// 2 MiB and advised for transparent huge pages (madvise MADV_HUGEPAGE), so that a forward
// pass streaming the weights needs a page-table walk per 2 MiB instead of per 4 KiB; on
// virtual machines whose file-backed pages are slow to read through, such as the one
// docs/BENCHMARKS.md measures on, it also avoids those. progress, when not nil, is told the
// bytes read so far as the reading goes. Close releases the memory.
func ReadFile(path string, progress func(done, total int64)) (*File, error) {
	fh, size, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if int64(int(size)) != size {
		return nil, fmt.Errorf("gguf: %s: %d bytes do not fit in memory here", path, size)
	}
	data, free, err := allocate(int(size))
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	release := func() {
		if free != nil {
			free()
		}
	}
	const chunk = 32 << 20
	for off := int64(0); off < size; {
		n := min(chunk, size-off)
		if _, err := fh.ReadAt(data[off:off+n], off); err != nil {
			release()
			return nil, fmt.Errorf("gguf: %s: %w", path, err)
		}
		off += n
		if progress != nil {
			progress(off, size)
		}
	}
	f, err := parse(data, path)
	if err != nil {
		release()
		return nil, err
	}
	f.unmap = free
	return f, nil
}

// hugePage is the size of a transparent huge page on the systems loom runs on (x86-64 and
// arm64 with 4 KiB base pages).
const hugePage = 2 << 20

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
