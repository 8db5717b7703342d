package gguf

import "golang.org/x/sys/unix"

// adviseHugePages asks the kernel to back mem with transparent huge pages. It is advice: a
// kernel built without them, or set to never use them, leaves the memory as it is.
func adviseHugePages(mem []byte) { _ = unix.Madvise(mem, unix.MADV_HUGEPAGE) }
