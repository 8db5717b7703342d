//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package gguf

import "os"

// mapFile reads the file into memory on systems where loom does not memory-map.
func mapFile(fh *os.File, size int64) ([]byte, func() error, error) {
	return readFile(fh, size)
}
