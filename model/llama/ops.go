package llama

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/internal/fastmath"
	"github.com/loomlm/loom/model/kernels"
)

// rmsNorm sets dst = x / sqrt(mean(x²) + eps) · w, the mean accumulated in float64.
func rmsNorm(dst, x, w []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	scale := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	w = w[:len(x)]
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = v * scale * w[i]
	}
}

// addBias adds b to every row of x (rows of len(b) values); nil b does nothing.
func addBias(x, b []float32) {
	if b == nil {
		return
	}
	for r := 0; r+len(b) <= len(x); r += len(b) {
		row := x[r : r+len(b)]
		for i, v := range b {
			row[i] += v
		}
	}
}

// add sets x += y.
func add(x, y []float32) {
	y = y[:len(x)]
	for i := range x {
		x[i] += y[i]
	}
}

// swiGLU sets gate = silu(gate) · up, silu(g) = g / (1 + e^-g).
func swiGLU(gate, up []float32) {
	up = up[:len(gate)]
	for i, g := range gate {
		gate[i] = g / (1 + fastmath.Exp(-g)) * up[i]
	}
}

// attnScratch is one worker's buffers for attention.
type attnScratch struct {
	scores  []float32
	mx, sum []float32
	acc     []float32
	kb, vb  []float32
}

// attention computes ws.att for every row: for each query head, the softmax-weighted sum of
// the value rows of its key/value head over the positions up to the row's own, read from the
// row's sequence. Work is split by (segment, key/value head); each task walks the sequence's
// cache blocks once for all of its rows and query heads, keeping a running maximum and sum
// per (row, head) so that every block is read once (the online softmax).
func (m *Model) attention(ws *workspace, li int, rows []rowInfo, runs []itemRun) {
	p := &m.p
	// Every segment's spans, up to its last row.
	for len(ws.spans) < len(ws.segs) {
		ws.spans = append(ws.spans, nil)
	}
	work := 0
	for s, sg := range ws.segs {
		end := rows[sg.b-1].pos + 1
		ws.spans[s] = runs[sg.item].st.seq.Spans(li, end, ws.spans[s][:0])
		work += (sg.b - sg.a) * end
	}
	tasks := len(ws.segs) * p.KVHeads
	fn := func(task, worker int) {
		m.attendTask(ws, &ws.scratch[worker], li, rows, task/p.KVHeads, task%p.KVHeads)
	}
	// Small work is not worth waking other goroutines for.
	if work*p.Heads*p.HeadDim < 1<<15 {
		for t := range tasks {
			fn(t, 0)
		}
		return
	}
	m.parallel(tasks, fn)
}

// attendTask computes the attention output of the query heads of key/value head g for the
// rows of segment s.
func (m *Model) attendTask(ws *workspace, sc *attnScratch, li int, rows []rowInfo, s, g int) {
	p := &m.p
	sg := ws.segs[s]
	spans := ws.spans[s]
	hd := p.HeadDim
	qDim, kvDim := p.Heads*hd, p.KVHeads*hd
	group := p.Heads / p.KVHeads
	nr := sg.b - sg.a
	n := nr * group
	bs := m.pool.Config().BlockSize
	half := m.pool.Config().DType == cache.Float16
	scale := float32(1 / math.Sqrt(float64(hd)))

	sc.mx = grow(sc.mx, n)
	sc.sum = grow(sc.sum, n)
	sc.acc = grow(sc.acc, n*hd)
	sc.scores = grow(sc.scores, bs)
	for i := range sc.mx {
		sc.mx[i] = float32(math.Inf(-1))
		sc.sum[i] = 0
	}
	clear(sc.acc)
	if half {
		sc.kb = grow(sc.kb, bs*hd)
		sc.vb = grow(sc.vb, bs*hd)
	}

	for _, sp := range spans {
		// This span's rows of head g, as float32 with a row stride.
		kv, vv, stride, off := sp.K, sp.V, kvDim, g*hd
		if half {
			for t := range sp.Rows {
				cache.DecodeHalf(sc.kb[t*hd:(t+1)*hd], sp.K16[t*kvDim+g*hd:t*kvDim+(g+1)*hd])
				cache.DecodeHalf(sc.vb[t*hd:(t+1)*hd], sp.V16[t*kvDim+g*hd:t*kvDim+(g+1)*hd])
			}
			kv, vv, stride, off = sc.kb, sc.vb, hd, 0
		}
		for r := sg.a; r < sg.b; r++ {
			pos := rows[r].pos
			if pos < sp.Start {
				continue
			}
			tn := min(sp.Rows, pos-sp.Start+1)
			for hh := range group {
				h := g*group + hh
				q := ws.q[r*qDim+h*hd : r*qDim+(h+1)*hd]
				idx := (r-sg.a)*group + hh
				scores := sc.scores[:tn]
				mx := float32(math.Inf(-1))
				for t := range tn {
					v := kernels.Dot(q, kv[t*stride+off:t*stride+off+hd]) * scale
					scores[t] = v
					mx = max(mx, v)
				}
				acc := sc.acc[idx*hd : (idx+1)*hd]
				if mx > sc.mx[idx] {
					if sc.sum[idx] > 0 {
						c := fastmath.Exp(sc.mx[idx] - mx)
						sc.sum[idx] *= c
						for j := range acc {
							acc[j] *= c
						}
					}
					sc.mx[idx] = mx
				}
				mi := sc.mx[idx]
				sum := sc.sum[idx]
				for t, v := range scores {
					w := fastmath.Exp(v - mi)
					sum += w
					kernels.Axpy(w, vv[t*stride+off:t*stride+off+hd], acc)
				}
				sc.sum[idx] = sum
			}
		}
	}
	for r := sg.a; r < sg.b; r++ {
		for hh := range group {
			h := g*group + hh
			idx := (r-sg.a)*group + hh
			inv := 1 / sc.sum[idx]
			out := ws.att[r*qDim+h*hd : r*qDim+(h+1)*hd]
			for j, a := range sc.acc[idx*hd : (idx+1)*hd] {
				out[j] = a * inv
			}
		}
	}
}

// parallel runs fn(task, worker) for every task in [0, n) on up to m.workers goroutines, the
// caller being worker 0, and returns when all are done.
func (m *Model) parallel(n int, fn func(task, worker int)) {
	w := min(m.workers, n)
	if w <= 1 {
		for t := range n {
			fn(t, 0)
		}
		return
	}
	var next atomic.Int64
	work := func(worker int) {
		for {
			t := int(next.Add(1) - 1)
			if t >= n {
				return
			}
			fn(t, worker)
		}
	}
	var wg sync.WaitGroup
	wg.Add(w - 1)
	for k := 1; k < w; k++ {
		go func() {
			defer wg.Done()
			work(k)
		}()
	}
	work(0)
	wg.Wait()
}
