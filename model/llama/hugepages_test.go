package llama

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/fixtures"
	"github.com/loomlm/loom/model/hugepages"
)

// TestHugePages opens models of every shape of weights (a fused QKV and gate/up as views of
// one tensor, experts as views of one tensor, a tied output, F32, F16 and Q8_0 weights, packed
// or not) with and without the copy onto huge pages: where the system has huge pages, every
// matrix the kernels read in place lies in the copy, and eight greedy steps give the same
// logits bit for bit either way.
func TestHugePages(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(archRefDir, "*.gguf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no reference models in %s (%v)", archRefDir, err)
	}
	files = append(files, fixtures.Path(t, "models", "stories260K-f32.gguf"), fixtures.Path(t, "models", "stories260K-f16.gguf"))
	// Copy jobs of a page, so that these small models' copies take many jobs, views across
	// jobs and jobs across views.
	defer func(n int) { copyJobBytes = n }(copyJobBytes)
	copyJobBytes = 4096
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".gguf"), func(t *testing.T) {
			var logits [2][]float32
			for i, no := range []bool{false, true} {
				m, err := Open(file, Options{NoHugePages: no, NoPrefixCache: true})
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case no || !hugepages.Available():
					if m.huge != nil {
						t.Fatalf("NoHugePages %v, huge pages available %v: the weights were copied", no, hugepages.Available())
					}
				case m.huge == nil:
					t.Fatal("the weights were not copied onto huge pages")
				default:
					lo := uintptr(unsafe.Pointer(unsafe.SliceData(m.huge.Bytes)))
					hi := lo + uintptr(len(m.huge.Bytes))
					inPlace := 0
					for k, w := range m.matrices() {
						if len(w.Data) == 0 || w.Packed() {
							continue
						}
						inPlace++
						a := uintptr(unsafe.Pointer(unsafe.SliceData(w.Data)))
						if a < lo || a+uintptr(len(w.Data)) > hi {
							t.Fatalf("matrix %d (%v %d×%d) is not in the copy", k, w.Type, w.Rows, w.Cols)
						}
					}
					for i := range m.layers {
						l := &m.layers[i]
						if len(l.qkv) != 3 || unsafe.SliceData(l.qkv[0].Data) != unsafe.SliceData(l.wq.Data) ||
							unsafe.SliceData(l.qkv[2].Data) != unsafe.SliceData(l.wv.Data) {
							t.Fatalf("layer %d: the QKV group does not read the moved matrices", i)
						}
					}
					t.Logf("%d matrices read in place, %.1f MB on huge pages", inPlace, float64(len(m.huge.Bytes))/1e6)
				}
				st, err := m.NewState()
				if err != nil {
					t.Fatal(err)
				}
				items := []core.ForwardItem{{State: st, Tokens: []int32{1, 20, 30, 40, 50}}}
				for range 8 {
					if err := m.Forward(context.Background(), items); err != nil {
						t.Fatal(err)
					}
					logits[i] = append(logits[i], items[0].Logits[0]...)
					items[0].Tokens = []int32{argmax(items[0].Logits[0])}
				}
				st.Close()
				if err := m.Close(); err != nil {
					t.Fatal(err)
				}
				if m.huge != nil {
					t.Fatal("Close left the copy")
				}
			}
			for k := range logits[0] {
				if logits[0][k] != logits[1][k] {
					t.Fatalf("logit %d: %g on huge pages, %g in the mapping", k, logits[0][k], logits[1][k])
				}
			}
		})
	}
}
