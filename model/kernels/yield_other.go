//go:build !linux

package kernels

// yieldThread does nothing where loom does not yield threads to the operating system.
func yieldThread() {}
