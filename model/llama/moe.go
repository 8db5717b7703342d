package llama

import (
	"math"

	"github.com/loomlm/loom/internal/fastmath"
	"github.com/loomlm/loom/model/kernels"
)

// moeScratch holds the buffers of a mixture-of-experts feed-forward pass.
type moeScratch struct {
	router  []float32 // n × Experts router probabilities
	choice  []int32   // n × ExpertsUsed chosen experts, most probable first
	weight  []float32 // n × ExpertsUsed their weights
	rows    []int32   // rows routed to the expert at hand, as row·ExpertsUsed + slot
	in, out []float32 // the rows gathered for one expert, and that expert's output
	slots   []float32 // n × ExpertsUsed × Dim weighted expert outputs, summed in slot order
}

// moe runs the feed-forward network of a mixture-of-experts layer on the n normalised rows of
// ws.xb and adds its output to ws.x. Each row's router probabilities (a softmax of the router
// logits) choose its ExpertsUsed most probable experts; each expert then runs once, on the
// rows that chose it, so a pass costs the active experts' weights, not all of them. A row's
// output is the sum of its experts' outputs, each scaled by its probability (renormalised over
// the chosen ones when NormExpertWeights), in the order of the choice, plus qwen2moe's shared
// expert scaled by sigmoid(sharedGate · x).
func (m *Model) moe(ws *workspace, l *layer, n int) {
	p := &m.p
	ms := &ws.moe
	dim, E, K, hid := p.Dim, p.Experts, p.ExpertsUsed, p.ExpertFFNDim
	ms.router = grow(ms.router, n*E)
	kernels.MatMul(ms.router, l.router, ws.xb, n)
	if cap(ms.choice) < n*K {
		ms.choice = make([]int32, n*K)
	}
	ms.choice = ms.choice[:n*K]
	ms.weight = grow(ms.weight, n*K)
	for r := range n {
		probs := ms.router[r*E : (r+1)*E]
		softmax32(probs)
		choice, weight := ms.choice[r*K:(r+1)*K], ms.weight[r*K:(r+1)*K]
		topK(probs, choice)
		var sum float32
		for s, e := range choice {
			weight[s] = probs[e]
			sum += weight[s]
		}
		if p.NormExpertWeights {
			for s := range weight {
				weight[s] /= sum
			}
		}
	}

	ms.slots = grow(ms.slots, n*K*dim)
	for e := range E {
		ms.rows = ms.rows[:0]
		for i, c := range ms.choice {
			if int(c) == e {
				ms.rows = append(ms.rows, int32(i))
			}
		}
		cnt := len(ms.rows)
		if cnt == 0 {
			continue
		}
		ms.in = grow(ms.in, cnt*dim)
		for j, i := range ms.rows {
			r := int(i) / K
			copy(ms.in[j*dim:(j+1)*dim], ws.xb[r*dim:(r+1)*dim])
		}
		ms.out = grow(ms.out, cnt*dim)
		m.runFFN(ws, &l.experts[e], ms.in, ms.out, cnt, hid)
		for j, i := range ms.rows {
			w := ms.weight[i]
			dst, src := ms.slots[int(i)*dim:(int(i)+1)*dim], ms.out[j*dim:(j+1)*dim]
			for c, v := range src {
				dst[c] = v * w
			}
		}
	}
	for r := range n {
		dst := ws.tmp[r*dim : (r+1)*dim]
		copy(dst, ms.slots[r*K*dim:(r*K+1)*dim])
		for s := 1; s < K; s++ {
			fastmath.Add(dst, ms.slots[(r*K+s)*dim:(r*K+s+1)*dim])
		}
	}
	if l.sharedGate != nil {
		ms.out = grow(ms.out, n*dim)
		m.runFFN(ws, &l.shared, ws.xb, ms.out, n, p.SharedFFNDim)
		for r := range n {
			var g float32
			for c, w := range l.sharedGate {
				g += w * ws.xb[r*dim+c]
			}
			g = float32(1 / (1 + math.Exp(-float64(g))))
			dst, src := ws.tmp[r*dim:(r+1)*dim], ms.out[r*dim:(r+1)*dim]
			for c, v := range src {
				dst[c] += v * g
			}
		}
	}
	fastmath.Add(ws.x[:n*dim], ws.tmp[:n*dim])
}

// runFFN sets out (n rows of Dim) to the gated network f (SwiGLU, or GeGLU when Params.GELU) applied to the n rows of in, whose
// hidden width is hid.
func (m *Model) runFFN(ws *workspace, f *ffn, in, out []float32, n, hid int) {
	ws.hb = grow(ws.hb, n*hid)
	ws.hb2 = grow(ws.hb2, n*hid)
	ws.outs = append(ws.outs[:0], ws.hb, ws.hb2)
	kernels.MatMuls(ws.outs, f.gateUp, in, n)
	ws.e = grow(ws.e, m.workers*4096)
	m.overRows(n, hid, func(r0, r1, w int) {
		gate, up := ws.hb[r0*hid:r1*hid], ws.hb2[r0*hid:r1*hid]
		if m.p.GELU {
			geGLU(gate, up)
		} else {
			swiGLU(gate, up, ws.e[w*4096:(w+1)*4096])
		}
	})
	kernels.MatMul(out, f.down, ws.hb, n)
}

// softmax32 replaces x by its softmax, computed as llama.cpp does: exponentials in float32
// after subtracting the maximum, their sum in float64, then one scale.
func softmax32(x []float32) {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range x {
		e := float32(math.Exp(float64(v - mx)))
		x[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// topK writes to choice the indices of the len(choice) largest values of x, largest first
// (the lower index first among equal values).
func topK(x []float32, choice []int32) {
	for s := range choice {
		best := -1
		for i, v := range x {
			if best >= 0 && v <= x[best] {
				continue
			}
			taken := false
			for _, c := range choice[:s] {
				if int(c) == i {
					taken = true
					break
				}
			}
			if !taken {
				best = i
			}
		}
		choice[s] = int32(best)
	}
}
