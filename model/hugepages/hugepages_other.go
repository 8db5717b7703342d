//go:build !linux

package hugepages

func available() bool { return false }

func alloc(int) (*Memory, error) { return nil, ErrUnavailable }
