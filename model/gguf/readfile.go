package gguf

import (
	"io"
	"os"
)

// readFile reads size bytes of fh into memory, for when a mapping is not possible.
func readFile(fh *os.File, size int64) ([]byte, func() error, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(fh, 0, size), data); err != nil {
		return nil, nil, err
	}
	return data, nil, nil
}
