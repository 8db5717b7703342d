//go:build !linux

package gguf

// adviseHugePages does nothing where loom does not advise huge pages.
func adviseHugePages([]byte) {}
