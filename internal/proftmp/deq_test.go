package prof

import (
	"encoding/binary"
	"math"
	"os"
	"testing"

	"github.com/loomlm/loom/model/ggml"
	"github.com/loomlm/loom/model/gguf"
)

func TestDeq(t *testing.T) {
	for _, c := range [][2]string{{"../../testdata/llamacpp-quant/wide-iq4_xs.gguf", "/tmp/iq4xs.deq"}, {"../../testdata/llamacpp-quant/wide-q3_k_m.gguf", "/tmp/q3k.deq"}} {
		f, err := gguf.Open(c[0])
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := os.ReadFile(c[1])
		for len(raw) > 0 {
			n := binary.LittleEndian.Uint32(raw)
			name := string(raw[4 : 4+n])
			raw = raw[4+n:]
			cnt := int(binary.LittleEndian.Uint32(raw))
			raw = raw[4:]
			ref := make([]float32, cnt)
			for i := range ref {
				ref[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
			raw = raw[4*cnt:]
			data, err := f.TensorData(name)
			if err != nil {
				t.Fatal(err)
			}
			var ti *gguf.TensorInfo
			for i := range f.Tensors {
				if f.Tensors[i].Name == name {
					ti = &f.Tensors[i]
				}
			}
			got := make([]float32, cnt)
			if err := ggml.Dequantize(ti.Type, data, got); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i := range got {
				if math.Abs(float64(got[i]-ref[i])) > 1e-6*math.Max(1, math.Abs(float64(ref[i]))) {
					if bad < 3 {
						t.Logf("%s %s [%d]: loom %g gguf-py %g", name, ti.Type, i, got[i], ref[i])
					}
					bad++
				}
			}
			t.Logf("%s %s: %d of %d differ", name, ti.Type, bad, cnt)
		}
	}
}
