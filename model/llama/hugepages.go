package llama

import (
	"cmp"
	"errors"
	"runtime"
	"slices"
	"syscall"
	"unsafe"

	"github.com/loomlm/loom/model/hugepages"
	"github.com/loomlm/loom/model/kernels"
)

// matrices returns every weight matrix of the model, for changes made to all of them. Views of
// one tensor (a fused QKV's parts, a tied output, experts) appear as the views they are.
func (m *Model) matrices() []*kernels.Matrix {
	ms := []*kernels.Matrix{&m.embd, &m.output}
	addFFN := func(f *ffn) {
		for k := range f.gateUp {
			ms = append(ms, &f.gateUp[k])
		}
		ms = append(ms, &f.down)
	}
	for i := range m.layers {
		l := &m.layers[i]
		ms = append(ms, &l.wq, &l.wk, &l.wv, &l.wo, &l.router)
		addFFN(&l.dense)
		addFFN(&l.shared)
		for e := range l.experts {
			addFFN(&l.experts[e])
		}
	}
	return ms
}

// hugePageAlign aligns each copied tensor in the huge-page memory, as GGUF aligns tensors in
// its file (32 bytes by default; the kernels read rows best from 64-byte lines).
const hugePageAlign = 64

// moveToHugePages copies the weights the kernels read in place — every matrix not packed
// (kernels.Pack keeps its packed copy on the Go heap) — out of the file's memory mapping
// into memory on transparent huge pages (package hugepages), and points the matrices at the
// copies. It reports ok = false, changing nothing, where huge pages are not available.
// The copy reads every page of those weights, as prefetch would, and drops the mapping's
// pages of them from the process's resident memory as it goes (gguf.File.DropPages), so that
// the process holds the weights about once at any time.
func (m *Model) moveToHugePages() (ok bool, err error) {
	type view struct {
		w      *kernels.Matrix
		lo, hi uintptr // the addresses of its bytes
	}
	var views []view
	for _, w := range m.matrices() {
		if len(w.Data) == 0 || w.Packed() {
			continue
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(w.Data)))
		views = append(views, view{w, lo, lo + uintptr(len(w.Data))})
	}
	if len(views) == 0 {
		return false, nil
	}
	// Views of one tensor overlap: the copies keep the tensors' extents, each a span of the
	// merged views at an aligned offset, and every view keeps its place in its span.
	slices.SortFunc(views, func(a, b view) int { return cmp.Or(cmp.Compare(a.lo, b.lo), cmp.Compare(b.hi, a.hi)) })
	span := make([]int, len(views)) // the span of each view
	spanLo, spanHi := []uintptr{views[0].lo}, []uintptr{views[0].hi}
	for i, v := range views[1:] {
		if n := len(spanLo) - 1; v.lo >= spanHi[n] {
			spanLo, spanHi = append(spanLo, v.lo), append(spanHi, v.hi)
		} else {
			spanHi[n] = max(spanHi[n], v.hi)
		}
		span[i+1] = len(spanLo) - 1
	}
	spanOff := make([]uintptr, len(spanLo)) // each span's offset in the copy
	var total, bytes uintptr
	for k := range spanLo {
		total = (total + hugePageAlign - 1) &^ (hugePageAlign - 1)
		spanOff[k] = total
		total += spanHi[k] - spanLo[k]
		bytes += spanHi[k] - spanLo[k]
	}
	mem, err := hugepages.Alloc(int(total))
	if errors.Is(err, hugepages.ErrUnavailable) || errors.Is(err, syscall.ENOMEM) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// The copy in jobs of a huge page, on every core (the first write to each page has the
	// kernel clear it), in batches after which progress is reported.
	type job struct{ view, off, end int }
	var jobs []job
	copied := uintptr(0) // the address up to which the views' bytes are copied
	for i, v := range views {
		for off := int(max(copied, v.lo) - v.lo); off < len(v.w.Data); off += copyJobBytes {
			jobs = append(jobs, job{i, off, min(off+copyJobBytes, len(v.w.Data))})
		}
		copied = max(copied, v.hi)
	}
	const batch = 16 // jobs between progress reports
	errs := make([]error, len(jobs))
	var done int64
	for lo := 0; lo < len(jobs); lo += batch {
		hi := min(lo+batch, len(jobs))
		kernels.Parallel(hi-lo, runtime.GOMAXPROCS(0), func(k, _ int) {
			j := jobs[lo+k]
			v := views[j.view]
			dst := mem.Bytes[spanOff[span[j.view]]+v.lo-spanLo[span[j.view]]:]
			copy(dst[j.off:j.end], v.w.Data[j.off:j.end])
			// The mapping's pages of the copied bytes leave the process's resident memory
			// (they stay in the page cache): the copy is what the kernels read now.
			errs[lo+k] = m.file.DropPages(v.w.Data[j.off:j.end])
		})
		for _, j := range jobs[lo:hi] {
			done += int64(j.end - j.off)
		}
		if m.opts.Progress != nil {
			m.opts.Progress("load", done, int64(bytes))
		}
	}
	if err := errors.Join(errs...); err != nil {
		mem.Free()
		return false, err
	}
	for i, v := range views {
		start := spanOff[span[i]] + v.lo - spanLo[span[i]]
		v.w.Data = mem.Bytes[start : start+uintptr(len(v.w.Data)) : start+uintptr(len(v.w.Data))]
	}
	m.huge = mem
	return true, nil
}

// copyJobBytes is the bytes of a copy job: a huge page (a variable for the tests, whose models
// are smaller).
var copyJobBytes = hugepages.Size
