package llama

import (
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/internal/fastmath"
	"github.com/loomlm/loom/model/ggml"
	"github.com/loomlm/loom/model/kernels"
)

// rmsNorm sets dst = x · scale · w with scale = 1/sqrt(mean(x²) + eps), rounded as llama.cpp
// rounds it: each square in float32, their sum in float64, the mean narrowed to float32, and
// the square root and its inverse in float32. The last bit of scale matters for fidelity: the
// normalised row is quantised to 8 bits next, and a row whose values sit on rounding ties (as
// rows from Q4_0 embeddings do, every value a small multiple of one scale) rounds differently
// when scale moves by one ulp.
func rmsNorm(dst, x, w []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(float32(v * v))
	}
	rmsScale(dst, x, w, ss, eps)
}

// rmsScale sets dst = x · scale · w, scale from ss, the sum of x's squares, as rmsNorm does.
func rmsScale(dst, x, w []float32, ss float64, eps float32) {
	mean := float32(ss / float64(len(x)))
	scale := 1 / float32(math.Sqrt(float64(mean+eps)))
	fastmath.ScaleMul(dst[:len(x)], x, w, scale)
}

// rmsNormRows is rmsNorm over every row of width values of x (len(x)/width rows), each into
// the same place of dst, with every row's bits as rmsNorm gives them. A row's sum of squares
// is one chain of float64 additions, each waiting for the one before (llama.cpp's order,
// which rmsNorm keeps); four rows' chains are run side by side, so that four rows take about
// the time of one.
func rmsNormRows(dst, x, w []float32, width int, eps float32) {
	n := len(x) / width
	r := 0
	for ; r+4 <= n; r += 4 {
		x0 := x[r*width : (r+1)*width]
		x1 := x[(r+1)*width : (r+2)*width]
		x2 := x[(r+2)*width : (r+3)*width]
		x3 := x[(r+3)*width : (r+4)*width]
		var s0, s1, s2, s3 float64
		for i, v := range x0 {
			v1, v2, v3 := x1[i], x2[i], x3[i]
			s0 += float64(float32(v * v))
			s1 += float64(float32(v1 * v1))
			s2 += float64(float32(v2 * v2))
			s3 += float64(float32(v3 * v3))
		}
		for j, ss := range [4]float64{s0, s1, s2, s3} {
			o := (r + j) * width
			rmsScale(dst[o:o+width], x[o:o+width], w, ss, eps)
		}
	}
	for ; r < n; r++ {
		rmsNorm(dst[r*width:(r+1)*width], x[r*width:(r+1)*width], w, eps)
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

// swiGLU sets gate = silu(gate) · up, silu(g) = g / (1 + e^-g); tmp is scratch of at least
// min(len(gate), 4096) values.
func swiGLU(gate, up, tmp []float32) {
	up = up[:len(gate)]
	for lo := 0; lo < len(gate); lo += 4096 {
		g := gate[lo:min(lo+4096, len(gate))]
		e := tmp[:len(g)]
		copy(e, g)
		fastmath.Scale(e, -1) // -v exactly
		fastmath.ExpShiftSum(e, e, 0)
		fastmath.SiLUGate(g, e, up[lo:lo+len(g)])
	}
}

// geGLU sets gate = gelu(gate) · up with the tanh approximation of GELU,
// gelu(g) = g/2 · (1 + tanh(√(2/π) · (g + 0.044715 g³))), evaluated as llama.cpp's CPU backend
// does: through a table over every binary16 value, so g and gelu(g) are rounded to binary16
// (relative error ≤ 2⁻¹¹), with gelu(g) = 0 below -10 and g above 10. Matching llama.cpp here
// keeps loom's logits on the files users bring equal to llama.cpp's: computed exactly, the
// rounding differences alone flip 8-bit activation roundings over a deep model and, on a
// 26-layer Gemma 2 reference, a greedy token. The table is also faster than tanh.
func geGLU(gate, up []float32) {
	up = up[:len(gate)]
	table := geluTable()
	for i, g := range gate {
		switch {
		case g <= -10:
			gate[i] = 0
		case g >= 10:
			gate[i] = g * up[i]
		default:
			gate[i] = ggml.HalfToFloat32(table[ggml.Float32ToHalf(g)]) * up[i]
		}
	}
}

// geluTable holds gelu(h) rounded to binary16 for every binary16 bit pattern h.
var geluTable = sync.OnceValue(func() *[1 << 16]uint16 {
	const c = 0.7978845608028654 // √(2/π)
	t := new([1 << 16]uint16)
	for h := range t {
		x := float64(ggml.HalfToFloat32(uint16(h)))
		t[h] = ggml.Float32ToHalf(float32(0.5 * x * (1 + math.Tanh(c*(x+0.044715*x*x*x)))))
	}
	return t
})

// softcap sets every x to c·tanh(x/c), which keeps values within (-c, c).
func softcap(x []float32, c float32) {
	inv := 1 / c
	for i, v := range x {
		x[i] = c * float32(math.Tanh(float64(v*inv)))
	}
}

// attnScratch is one worker's buffers for attention.
type attnScratch struct {
	q, s     []float32
	sum, acc []float32
	qq       []byte // the queries quantized for Q8_0 keys (kernels.QuantizeQuery)
	blocks   []blockClusters
	runs     []queryRun // attendGroup's kernel calls for a set of rows holding a block
	spans    [4][]cache.Span
}

// blockClusters is, for one cache block of a group's rows (attendGroup), the sets of rows
// that hold the same block: the rows of cluster c are members[from[c]:from[c+1]], in order.
type blockClusters struct {
	n       int
	members [4]int
	from    [5]int
}

// rows returns the rows of cluster c.
func (b *blockClusters) rows(c int) []int { return b.members[b.from[c]:b.from[c+1]] }

// attention computes ws.att for every row: for each query head, the softmax-weighted sum of
// the value rows of its key/value head over the positions up to the row's own, read from the
// row's sequence. Work is split by segment and key/value heads. A task walks the sequence's
// cache blocks for its rows and query heads (in chunks that bound the scores' memory): per
// block kernels.AttnScores gives each query's scores against the block's keys; a softmax
// over each query's positions makes them weights; a second walk adds each block's values
// with kernels.AttnAccumulate. Single rows of sequences that share their first cache blocks
// (beams, samples of one prompt) are taken in groups of up to four (groupSegments,
// attendGroup), each shared block read once for the rows that share it. Each query is computed alone and in the same order whatever else
// is in the batch.
func (m *Model) attention(ws *workspace, li int, rows []rowInfo, runs []itemRun) {
	p := &m.p
	// The tasks were planned at the start of the pass (planAttention). Each task makes its
	// own segments' spans of the layer (attendTask, attendGroup): spans written here for
	// every layer were read by the other core's tasks from this core's cache, a transfer for
	// every span.
	fn := func(task, worker int) {
		t := ws.tasks[task]
		t.li = li
		if t.group >= 0 {
			m.attendGroup(ws, &ws.scratch[worker], rows, runs, t)
			return
		}
		m.attendTask(ws, &ws.scratch[worker], rows, runs, t)
	}
	// Small work is not worth waking other goroutines for.
	if ws.attnWork*p.Heads*p.HeadDim < 1<<15 {
		for t := range ws.tasks {
			fn(t, 0)
		}
		return
	}
	m.parallel(len(ws.tasks), fn)
}

// planAttention groups the segments (groupSegments), hands out the pass's attention tasks
// (without their layer) and counts its work, from the first layer's spans: the tasks depend
// on the segments and on the cache blocks they share, which are the same in every layer (a
// block holds all of them). It marks the rows whose keys and values their group's tasks
// write (ws.putByTask).
func (m *Model) planAttention(ws *workspace, rows []rowInfo, runs []itemRun) {
	p := &m.p
	for len(ws.spans) < len(ws.segs) {
		ws.spans = append(ws.spans, nil)
	}
	for s, sg := range ws.segs {
		ws.spans[s] = runs[sg.item].st.seq.Spans(0, rows[sg.b-1].pos+1, ws.spans[s][:0])
	}
	ws.attnWork = 0
	for _, sg := range ws.segs {
		ws.attnWork += (sg.b - sg.a) * (rows[sg.b-1].pos + 1)
	}
	group := m.groupSegments(ws)
	ws.putByTask = grow(ws.putByTask, len(rows))
	for s, sg := range ws.segs {
		for r := sg.a; r < sg.b; r++ {
			ws.putByTask[r] = group[s] >= 0
		}
	}
	heads, split := attnSplit(len(ws.segs), p.KVHeads, m.workers)
	ws.tasks = ws.tasks[:0]
	// A group's rows go in one task per set of heads, the heads split so that the workers
	// have two tasks each at least: a group of four beams in one task of every head left a
	// worker idle.
	gheads := heads
	if ng := len(ws.groups); ng > 0 && ng < 2*m.workers {
		per := (2*m.workers + ng - 1) / ng
		gheads = max(1, (p.KVHeads+per-1)/per)
	}
	for gi := range ws.groups {
		for g := 0; g < p.KVHeads; g += gheads {
			ws.tasks = append(ws.tasks, attnTask{group: gi, g0: g, g1: min(g+gheads, p.KVHeads)})
		}
	}
	for s, sg := range ws.segs {
		if group[s] >= 0 {
			continue
		}
		parts := min(split, sg.b-sg.a)
		for g := 0; g < p.KVHeads; g += heads {
			for k := range parts {
				a := sg.a + k*(sg.b-sg.a)/parts
				b := sg.a + (k+1)*(sg.b-sg.a)/parts
				ws.tasks = append(ws.tasks, attnTask{seg: s, group: -1, g0: g, g1: min(g+heads, p.KVHeads), a: a, b: b})
			}
		}
	}
}

// attnSplit returns how attention shares its work among workers: tasks of heads key/value
// heads each, each segment's rows cut into split parts. With two segments a worker or more,
// a task takes all of its segment's heads: a task per head made a step of sixteen one-row
// sequences 192 tasks a layer, each reading 1–2 KB from each of its blocks, where a task of
// all heads reads the blocks' keys (values) of every head side by side (attendTask). Tasks of
// some of a segment's heads walked that way were slower (four sequences, F16 cache, six heads
// a task: attention 1.21–1.32 ms a step against 0.85–1.01 with all twelve). Rows are split
// further only when the segments' heads alone give the workers too little to share (few
// key/value heads, one long prompt).
func attnSplit(segs, kvHeads, workers int) (heads, split int) {
	heads = 1
	if segs >= 2*workers {
		heads = kvHeads
	}
	split = 1
	if n := segs * kvHeads; n < 2*workers {
		split = (2*workers + n - 1) / n
	}
	return heads, split
}

// maxAttnScores bounds the scores a task holds at once (a variable for tests).
var maxAttnScores = 1 << 20

// attnTask is the attention in layer li of key/value heads [g0, g1) for rows [a, b) of
// segment seg, or, when group is not -1, for the single rows of the segments of
// workspace.groups[group] (attendGroup). planAttention makes a pass's tasks; attention sets
// the layer as it runs them.
type attnTask struct{ li, seg, group, g0, g1, a, b int }

// segGroup is up to four segments of one row each whose sequences share their first cache
// blocks (groupSegments).
type segGroup struct {
	n    int
	segs [4]int
}

// attendTask computes the attention output of the query heads of key/value heads
// [task.g0, task.g1) for rows [task.a, task.b) of a segment, in two passes over the
// sequence's blocks: per block and query, kernels.AttnScores writes the query's scores against
// the block's keys of its head (stored transposed) into its row of scores
// (kernels.AttnScoresStrided, and below kernels.AttnAccumulateStrided, for two consecutive
// queries of one key/value head, with the same bits); each query's row of scores becomes its
// softmax (one vectorised exp-sum over the row); per block and query, kernels.AttnAccumulate
// then adds the block's values of its head weighted by their probabilities. Each pass takes
// the blocks in order and, in each, every query of the task, so that the keys (values) of
// the task's heads, side by side in the block, are read together. Queries are taken in
// chunks of whole rows that bound the scores buffer. Over Q8_0 keys each query is quantized
// once (kernels.QuantizeQuery) and scored with kernels.AttnScoresQ8 in every block.
func (m *Model) attendTask(ws *workspace, sc *attnScratch, rows []rowInfo, runs []itemRun, task attnTask) {
	p := &m.p
	sg := ws.segs[task.seg]
	sc.spans[0] = runs[sg.item].st.seq.Spans(task.li, rows[sg.b-1].pos+1, sc.spans[0][:0])
	spans := sc.spans[0]
	hd := p.HeadDim
	qDim := p.Heads * hd
	group := p.Heads / p.KVHeads
	g0, g1 := task.g0, task.g1
	// Query i is row task.a + i/perRow, query head g0·group + i%perRow, of key/value head
	// kvOf(i).
	perRow := (g1 - g0) * group
	nq := (task.b - task.a) * perRow
	kvOf := func(i int) int { return g0 + i%perRow/group }
	ap := m.attnParamsOf(task.li)
	bs, kvType, dt := ap.bs, ap.kvType, ap.dt
	first := rows[task.a].pos // the rows' positions are first, first+1, …
	end := rows[task.b-1].pos + 1

	sc.q = grow(sc.q, nq*hd)
	for r := task.a; r < task.b; r++ {
		i := (r - task.a) * perRow
		copy(sc.q[i*hd:(i+perRow)*hd], ws.q[r*qDim+g0*group*hd:r*qDim+g1*group*hd])
	}
	qb := 0 // bytes of a quantized query, for Q8_0 keys
	if dt == ggml.Q8_0 {
		qb = kernels.Q8QueryBytes(hd)
		sc.qq = grow(sc.qq, nq*qb)
		for i := range nq {
			kernels.QuantizeQuery(sc.qq[i*qb:(i+1)*qb], sc.q[i*hd:(i+1)*hd])
		}
	}
	qc := max(perRow, min(nq, maxAttnScores/end/perRow*perRow))
	sc.acc = grow(sc.acc, qc*hd)
	sc.sum = grow(sc.sum, qc)

	for c0 := 0; c0 < nq; c0 += qc {
		c1 := min(nq, c0+qc)
		n := c1 - c0
		cEnd := first + (c1-1)/perRow + 1 // positions the chunk's last query sees
		// A query's scores, by position, in whole blocks: the kernels write a block's every
		// score straight into the row, those past what the query sees included (never read).
		stride := (cEnd + bs - 1) / bs * bs
		sc.s = grow(sc.s, n*stride)
		scores := sc.s[:n*stride]
		// seen returns the first query of the chunk that sees position start.
		seen := func(start int) int { return max(c0, (start-first)*perRow) }

		for k := range spans {
			sp := &spans[k]
			if sp.Start >= cEnd {
				break
			}
			if k+1 < len(spans) && spans[k+1].Start < cEnd {
				for g := g0; g < g1; g++ {
					kernels.Prefetch(spans[k+1].KHead(g))
				}
			}
			q0 := seen(sp.Start)
			for i := q0; i < c1; i++ {
				out := scores[(i-c0)*stride+sp.Start:]
				if qb == 0 && i+1 < c1 && kvOf(i+1) == kvOf(i) {
					// Two queries of one key/value head (grouped-query attention): each key
					// row loaded once, each query's scores as AttnScores gives them.
					kernels.AttnScoresStrided(out, stride, sc.q[i*hd:], hd, 2, sp.KHead(kvOf(i)), dt, hd, bs)
					i++
					continue
				}
				if qb > 0 {
					kernels.AttnScoresQ8(out, sc.qq[i*qb:(i+1)*qb], sp.KHead(kvOf(i)), hd, bs)
				} else {
					kernels.AttnScores(out, sc.q[i*hd:(i+1)*hd], sp.KHead(kvOf(i)), dt, hd, bs)
				}
			}
		}
		for i := range n {
			sc.sum[i] = ap.softmax(scores[i*stride:i*stride+cEnd], first+(c0+i)/perRow)
		}

		acc := sc.acc[:n*hd]
		clear(acc)
		for k := range spans {
			sp := &spans[k]
			if sp.Start >= cEnd {
				break
			}
			if k+1 < len(spans) && spans[k+1].Start < cEnd {
				for g := g0; g < g1; g++ {
					kernels.Prefetch(spans[k+1].VHead(g))
				}
			}
			q0 := seen(sp.Start)
			nr := min(sp.Rows, cEnd-sp.Start)
			vBytes := nr * kvType.Bytes(hd)
			for i := q0; i < c1; i++ {
				w := 1
				if i+1 < c1 && kvOf(i+1) == kvOf(i) { // two queries of one head (Q8_0 values one at a time)
					w = 2
				}
				kernels.AttnAccumulateStrided(acc[(i-c0)*hd:], hd, scores[(i-c0)*stride+sp.Start:], stride, w,
					sp.VHead(kvOf(i))[:vBytes], dt, hd, nr)
				i += w - 1
			}
		}
		for i := range n {
			qi := c0 + i
			r := task.a + qi/perRow
			h := g0*group + qi%perRow
			normalise(ws.att[r*qDim+h*hd:r*qDim+(h+1)*hd], acc[i*hd:(i+1)*hd], sc.sum[i])
		}
	}
}

// groupWindow is how many later segments groupSegments looks at for a segment's companions:
// beam search and sampling list a sequence's forks together.
const groupWindow = 8

// groupSegments groups the segments whose attention can share its reads of keys and values:
// up to four segments of one row each (at any positions) whose sequences start with the same
// cache blocks (forks sharing a prefix copy-on-write, or the prefix cache's blocks: beams,
// samples of one prompt, requests with one system prompt), a segment with the (up to three)
// among the next groupWindow that share most blocks with it. It sets ws.groups and returns
// each segment's group, or -1.
func (m *Model) groupSegments(ws *workspace) []int {
	n := len(ws.segs)
	ws.group = ws.group[:0]
	for range n {
		ws.group = append(ws.group, -1)
	}
	ws.groups = ws.groups[:0]
	single := func(s int) bool { return ws.segs[s].b-ws.segs[s].a == 1 }
	type companion struct{ seg, shared int }
	for s := range n {
		if ws.group[s] >= 0 || !single(s) {
			continue
		}
		var found [groupWindow]companion
		cs := found[:0]
		for t := s + 1; t < min(n, s+1+groupWindow); t++ {
			if ws.group[t] >= 0 || !single(t) {
				continue
			}
			if k := sharedSpans(ws.spans[s], ws.spans[t]); k > 0 {
				cs = append(cs, companion{t, k})
			}
		}
		if len(cs) == 0 {
			continue
		}
		slices.SortStableFunc(cs, func(a, b companion) int { return b.shared - a.shared })
		g := segGroup{n: 1, segs: [4]int{s}}
		for _, c := range cs[:min(3, len(cs))] {
			g.segs[g.n] = c.seg
			g.n++
		}
		// The rows in order, so that a group of four sharing a block has its queries (and
		// their scores) evenly spaced for the four-row kernels.
		slices.Sort(g.segs[:g.n])
		for _, t := range g.segs[:g.n] {
			ws.group[t] = len(ws.groups)
		}
		ws.groups = append(ws.groups, g)
	}
	return ws.group
}

// sharedSpans counts the leading spans of a and b that are the same cache block. Sharing is
// a prefix (a sequence shares a block with another only if it shares every block before it),
// so the count is found by bisection.
func sharedSpans(a, b []cache.Span) int {
	return sort.Search(min(len(a), len(b)), func(k int) bool { return !sameBlock(&a[k], &b[k]) })
}

// sameBlock reports whether a and b are the same rows of the same cache block.
func sameBlock(a, b *cache.Span) bool {
	return a.Start == b.Start && a.Rows == b.Rows && len(a.K) > 0 && len(b.K) > 0 && &a.K[0] == &b.K[0]
}

// attendGroup is attendTask for the single rows of a group of segments (groupSegments) and
// key/value heads [task.g0, task.g1): in each cache block that several of the rows' sequences
// share, a key (value) row of a head is loaded once for them, and a block that one row holds
// alone is read once for the query heads of each of its key/value heads
// (kernels.AttnScoresStrided and AttnAccumulateStrided, up to four queries a call; Q8_0 keys
// are scored a query at a time). The kernels write a block's scores straight into each
// query's row of scores. Every output has the bits attendTask gives the row alone: the same
// scores, softmax and sums in the same order.
func (m *Model) attendGroup(ws *workspace, sc *attnScratch, rows []rowInfo, runs []itemRun, task attnTask) {
	p := &m.p
	ap := m.attnParamsOf(task.li)
	hd, group := p.HeadDim, p.Heads/p.KVHeads
	qDim := p.Heads * hd
	g0, g1 := task.g0, task.g1
	perRow := (g1 - g0) * group
	grp := ws.groups[task.group]
	n := grp.n
	var spans [4][]cache.Span
	var pos [4]int
	stride := 0 // a query's scores, by position
	nb := 0     // the most blocks of a row
	kvDim := p.KVHeads * hd
	for j, s := range grp.segs[:n] {
		sg := ws.segs[s]
		r := sg.a
		pos[j] = rows[r].pos
		// The row's keys and values of the task's heads go to the cache here (the pass left
		// them to the task: putByTask), in this core's cache where the walk reads them.
		seq := runs[sg.item].st.seq
		seq.PutHeads(task.li, pos[j], g0, g1, ws.k[r*kvDim:(r+1)*kvDim], ws.v[r*kvDim:(r+1)*kvDim])
		sc.spans[j] = seq.Spans(task.li, pos[j]+1, sc.spans[j][:0])
		spans[j] = sc.spans[j]
		stride = max(stride, pos[j]+1)
		nb = max(nb, len(spans[j]))
	}
	// Whole blocks: the kernels write a block's every score straight into each query's row,
	// those past its position included (never read).
	stride = (stride + ap.bs - 1) / ap.bs * ap.bs
	// Query j·perRow + i is row j's query head g0·group + i, of key/value head g0 + i/group.
	nq := n * perRow
	sc.q = grow(sc.q, nq*hd)
	for j, s := range grp.segs[:n] {
		r := ws.segs[s].a
		copy(sc.q[j*perRow*hd:(j+1)*perRow*hd], ws.q[r*qDim+g0*group*hd:r*qDim+g1*group*hd])
	}
	qb := 0 // bytes of a quantized query, for Q8_0 keys
	if ap.dt == ggml.Q8_0 {
		qb = kernels.Q8QueryBytes(hd)
		sc.qq = grow(sc.qq, nq*qb)
		for i := range nq {
			kernels.QuantizeQuery(sc.qq[i*qb:(i+1)*qb], sc.q[i*hd:(i+1)*hd])
		}
	}
	sc.s = grow(sc.s, nq*stride)
	sc.acc = grow(sc.acc, nq*hd)
	sc.sum = grow(sc.sum, nq)
	// span returns row j's block k, nil past its last.
	span := func(j, k int) *cache.Span {
		if k < len(spans[j]) {
			return &spans[j][k]
		}
		return nil
	}
	// Each block's rows split into sets holding the same block (the same for both walks and
	// their prefetches: worked out once).
	if cap(sc.blocks) < nb {
		sc.blocks = make([]blockClusters, nb)
	}
	blocks := sc.blocks[:nb]
	for k := range blocks {
		b := &blocks[k]
		var done [4]bool
		c, m := 0, 0
		for j := range n {
			sp := span(j, k)
			if done[j] || sp == nil {
				continue
			}
			b.from[c] = m
			for j2 := j; j2 < n; j2++ {
				if sp2 := span(j2, k); !done[j2] && sp2 != nil && sameBlock(sp, sp2) {
					b.members[m], done[j2] = j2, true
					m++
				}
			}
			c++
		}
		b.from[c], b.n = m, c
	}
	// walk calls fn for every block in order, every set of rows holding it and every kernel
	// call that set takes (queryRuns: a set of rows query head by query head, up to four rows
	// evenly apart at once; a row alone, the query heads of each key/value head together),
	// with where the block starts and how many of its positions the rows attend to (the same
	// for every row holding it), having asked for the next block's keys (values) to be
	// prefetched (head: the block's keys or values of a head). Query q's scores are
	// sc.s[q·stride:], its input sc.q[q·hd:] and its sums sc.acc[q·hd:].
	walk := func(head func(*cache.Span, int) []byte, fn func(sp *cache.Span, run queryRun, st, nr int)) {
		for k := range nb {
			if k+1 < nb {
				next := &blocks[k+1]
				for c := range next.n {
					sp := span(next.rows(c)[0], k+1)
					for g := g0; g < g1; g++ {
						kernels.Prefetch(head(sp, g))
					}
				}
			}
			b := &blocks[k]
			for c := range b.n {
				rs := b.rows(c)
				sp := span(rs[0], k)
				sc.runs = queryRuns(sc.runs[:0], rs, perRow, group)
				for _, run := range sc.runs {
					fn(sp, run, sp.Start, min(sp.Rows, pos[rs[0]]+1-sp.Start))
				}
			}
		}
	}
	walk((*cache.Span).KHead, func(sp *cache.Span, run queryRun, st, _ int) {
		keys := sp.KHead(g0 + run.i/group)
		if qb == 0 {
			kernels.AttnScoresStrided(sc.s[run.q*stride+st:], run.step*stride, sc.q[run.q*hd:], run.step*hd, run.n, keys, ap.dt, hd, ap.bs)
			return
		}
		for j := range run.n {
			q := run.q + j*run.step
			kernels.AttnScoresQ8(sc.s[q*stride+st:], sc.qq[q*qb:(q+1)*qb], keys, hd, ap.bs)
		}
	})
	for q := range nq {
		j := q / perRow
		sc.sum[q] = ap.softmax(sc.s[q*stride:q*stride+pos[j]+1], pos[j])
	}

	clear(sc.acc[:nq*hd])
	walk((*cache.Span).VHead, func(sp *cache.Span, run queryRun, st, nr int) {
		values := sp.VHead(g0 + run.i/group)[:nr*ap.kvType.Bytes(hd)]
		kernels.AttnAccumulateStrided(sc.acc[run.q*hd:], run.step*hd, sc.s[run.q*stride+st:], run.step*stride, run.n, values, ap.dt, hd, nr)
	})
	for j, s := range grp.segs[:n] {
		r := ws.segs[s].a
		for i := range perRow {
			h := g0*group + i
			q := j*perRow + i
			normalise(ws.att[r*qDim+h*hd:r*qDim+(h+1)*hd], sc.acc[q*hd:(q+1)*hd], sc.sum[q])
		}
	}
}

// normalise sets dst to acc divided by sum: a query's weighted sum of values over its
// softmax's denominator.
func normalise(dst, acc []float32, sum float32) {
	copy(dst, acc[:len(dst)])
	fastmath.Scale(dst, 1/sum) // each value times 1/sum, one rounding, as a loop gives it
}

// queryRun is a call of the attention kernels on n queries (1, 2 or 4) of a group's scratch
// (attendGroup): queries q, q+step, …, all of query head i of their rows.
type queryRun struct{ q, step, n, i int }

// queryRuns appends the calls that take the queries of rows rs (a set of a group's rows
// holding one block, in order) for perRow query heads a row, group of them a key/value head:
// for a set of rows, each query head for all four rows at once (a set of four is the group's
// rows 0 to 3, evenly apart), else for two rows at a time and the last alone; for a row alone,
// the query heads of each key/value head four, two or one at a time.
func queryRuns(dst []queryRun, rs []int, perRow, group int) []queryRun {
	if len(rs) == 1 {
		r := rs[0]
		for i := 0; i < perRow; {
			n := 1
			for _, w := range [2]int{4, 2} {
				if i+w <= perRow && i/group == (i+w-1)/group {
					n = w
					break
				}
			}
			dst = append(dst, queryRun{q: r*perRow + i, step: 1, n: n, i: i})
			i += n
		}
		return dst
	}
	for i := range perRow {
		for rest := rs; len(rest) > 0; {
			n, d := 1, 1
			switch {
			case len(rest) == 4: // a group's four rows, 0 to 3
				n = 4
			case len(rest) >= 2:
				n, d = 2, rest[1]-rest[0]
			}
			dst = append(dst, queryRun{q: rest[0]*perRow + i, step: d * perRow, n: n, i: i})
			rest = rest[n:]
		}
	}
	return dst
}

// attnParams are what attention needs of a layer and of the cache: the cache's block size
// and element type (as a kernel type), the score scale, the layer's window and the soft cap.
type attnParams struct {
	bs           int
	kvType       cache.DType
	dt           ggml.Type
	scale, capAt float32
	window       int
}

func (m *Model) attnParamsOf(li int) attnParams {
	p := &m.p
	ap := attnParams{bs: m.pool.Config().BlockSize, kvType: m.pool.Config().DType, dt: ggml.F32,
		scale: float32(1 / math.Sqrt(float64(p.HeadDim))), window: m.layers[li].window, capAt: p.AttnSoftcap}
	switch ap.kvType {
	case cache.Float16:
		ap.dt = ggml.F16
	case cache.Q8_0:
		ap.dt = ggml.Q8_0
	}
	if p.AttnScale != 0 {
		ap.scale = float32(p.AttnScale)
	}
	if ap.capAt != 0 {
		ap.scale = 1 // the queries were scaled before the product (see layer)
	}
	return ap
}

// softmax turns the scores of a query at position pos (row, at least pos+1 long, indexed by
// position) into the exponentials of its softmax, scaled (or soft-capped) and shifted by their
// maximum, zero outside the positions it attends to, and returns their sum.
func (ap *attnParams) softmax(row []float32, pos int) float32 {
	lo := 0 // the first position the row attends to
	if ap.window > 0 {
		lo = max(0, pos-ap.window+1)
	}
	clear(row[:lo])
	clear(row[pos+1:]) // later positions weigh nothing
	row = row[lo : pos+1]
	var mx float32
	if ap.capAt == 0 { // vectorised: the same products, the same maximum
		fastmath.Scale(row, ap.scale)
		var nan bool
		if mx, nan = fastmath.MaxValue(row); nan {
			mx = float32(math.NaN()) // as max gives
		}
	} else {
		mx = float32(math.Inf(-1))
		for t, v := range row {
			v = ap.capAt * float32(math.Tanh(float64(v*ap.scale*(1/ap.capAt))))
			row[t] = v
			mx = max(mx, v)
		}
	}
	return float32(fastmath.ExpShiftSum(row, row, mx))
}

// parallel runs fn(task, worker) for every task in [0, n) on up to m.workers goroutines, the
// caller being worker 0, and returns when all are done: on the kernels' pool, whose workers
// are already awake between the products of a forward pass.
func (m *Model) parallel(n int, fn func(task, worker int)) {
	kernels.Parallel(n, m.workers, fn)
}
