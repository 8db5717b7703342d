package llama

import (
	"context"
	"fmt"
	"math"

	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/fastmath"
	"github.com/loomlm/loom/model/ggml"
	"github.com/loomlm/loom/model/kernels"
)

// rowInfo is one token row of a pass: the batch item it belongs to, its position and token,
// and where its logits go (nil when not asked for).
type rowInfo struct {
	item  int
	pos   int
	token int32
	out   []float32
}

// segment is a run of consecutive rows [a, b) of one item within a pass.
type segment struct{ item, a, b int }

// itemRun is one batch item during Forward.
type itemRun struct {
	st     *state
	start  int     // the sequence's length before Forward, for rollback
	tokens []int32 // the tokens to compute, after prefix reuse
	first  int     // index in ForwardItem.Tokens of tokens[0]
}

// Forward implements core.Model. Each item's state advances by its tokens; an item that
// starts a fresh sequence (or continues one at a block boundary) first takes whatever cached
// blocks match the start of its tokens, keeping at least the last token to compute (unless it
// asks for all logits, which need every row). On any error every state is left as it was.
func (m *Model) Forward(ctx context.Context, batch []core.ForwardItem) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.life.RLock()
	defer m.life.RUnlock()
	if m.closed {
		return ErrClosed
	}
	kernels.HoldWorkers() // the pool's workers stay awake through the serial work between products
	defer kernels.ReleaseWorkers()
	ws := m.getWorkspace()
	defer func() {
		// Keep no states or logits rows alive through the pool.
		clear(ws.runs)
		clear(ws.rows)
		m.workspaces.Put(ws)
	}()
	runs := ws.runs[:0]
	for i := range batch {
		it := &batch[i]
		st, ok := it.State.(*state)
		switch {
		case !ok || st == nil:
			return fmt.Errorf("llama: batch item %d: state %T is not from this model", i, it.State)
		case st.m != m:
			return fmt.Errorf("llama: batch item %d: state belongs to another model", i)
		case st.closed:
			return fmt.Errorf("llama: batch item %d: state is closed", i)
		case len(it.Tokens) == 0:
			return fmt.Errorf("llama: batch item %d: no tokens", i)
		}
		for j := range i {
			if batch[j].State == it.State {
				return fmt.Errorf("llama: batch item %d: state appears twice in the batch (items %d and %d)", i, j, i)
			}
		}
		if n := st.Len() + len(it.Tokens); n > m.p.ContextLength {
			return fmt.Errorf("llama: batch item %d: %d positions exceed the context length %d", i, n, m.p.ContextLength)
		}
		for j, id := range it.Tokens {
			if id < 0 || int(id) >= m.p.VocabSize {
				return fmt.Errorf("llama: batch item %d: token %d = %d is outside the vocabulary [0, %d)", i, j, id, m.p.VocabSize)
			}
		}
		runs = append(runs, itemRun{st: st, start: st.Len(), tokens: it.Tokens})
	}
	ws.runs = runs

	rollback := func(upTo int) {
		for i := 0; i < upTo; i++ {
			runs[i].st.seq.Truncate(runs[i].start)
		}
	}
	for i := range runs {
		r := &runs[i]
		if !batch[i].AllLogits && len(r.tokens) > 1 {
			n := r.st.seq.MatchPrefix(r.tokens[:len(r.tokens)-1])
			r.tokens, r.first = r.tokens[n:], n
			r.st.reused += n
		}
		if err := r.st.seq.Grow(r.tokens); err != nil {
			rollback(i + 1)
			return fmt.Errorf("llama: batch item %d: %w (the budget is set by Options.KVBudget, the model option kv_budget_mb)", i, err)
		}
	}

	// Lay out the rows and their logits destinations.
	total := 0
	for i := range runs {
		total += len(runs[i].tokens)
	}
	rows := ws.rows[:0]
	for i := range runs {
		r := &runs[i]
		it := &batch[i]
		n := 1
		if it.AllLogits {
			n = len(it.Tokens)
		}
		out := r.st.setRows(n, m.p.VocabSize)
		it.Logits = out
		pos := r.st.seq.Len() - len(r.tokens)
		for j, tok := range r.tokens {
			ri := rowInfo{item: i, pos: pos + j, token: tok}
			if k := r.first + j - (len(it.Tokens) - n); k >= 0 {
				ri.out = out[k]
			}
			rows = append(rows, ri)
		}
	}

	ws.rows = rows
	for c0 := 0; c0 < len(rows); c0 += m.opts.BatchTokens {
		if err := ctx.Err(); err != nil {
			rollback(len(runs))
			for i := range batch {
				batch[i].Logits = nil
			}
			return err
		}
		c1 := min(c0+m.opts.BatchTokens, len(rows))
		m.pass(ws, rows[c0:c1], runs)
		if m.opts.Progress != nil && len(rows) > m.opts.BatchTokens {
			m.opts.Progress("prefill", int64(c1), int64(len(rows)))
		}
	}
	for i := range runs {
		runs[i].st.seq.Commit()
	}
	return nil
}

// workspace holds the activations of one pass.
type workspace struct {
	x, xb, q, k, v, att, tmp, hb, hb2 []float32
	e                                 []float32
	cos, sin                          []float32
	cosLocal, sinLocal                []float32 // the sliding-window layers' own RoPE (gemma3)
	xr, logits                        []float32
	segs                              []segment
	tasks                             []attnTask // the pass's attention tasks, their layer unset (planAttention)
	attnWork                          int        // rows × positions a pass's attention reads
	group                             []int      // each segment's group for attention, or -1 (groupSegments)
	groups                            []segGroup // attention's groups of segments
	outs                              [][]float32
	runs                              []itemRun
	rows                              []rowInfo
	spans                             [][]cache.Span
	putByTask                         []bool // rows whose keys and values their attention task writes (planAttention)
	scratch                           []attnScratch
	moe                               moeScratch
}

// getWorkspace returns a pooled workspace, or a new one, with attention scratch for each of
// the model's workers (a pooled one made when the model had fewer is given more: tests vary
// the workers of one model).
func (m *Model) getWorkspace() *workspace {
	ws, ok := m.workspaces.Get().(*workspace)
	if !ok {
		ws = &workspace{}
	}
	if n := m.workers - len(ws.scratch); n > 0 {
		ws.scratch = append(ws.scratch, make([]attnScratch, n)...)
	}
	return ws
}

// grow returns buf resliced to n elements, or a new slice when its capacity is short (the
// old contents are not kept).
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// pass runs rows (at most BatchTokens) through every layer and writes the logits rows asked
// for. The rows' positions are reserved in their sequences.
func (m *Model) pass(ws *workspace, rows []rowInfo, runs []itemRun) {
	p := &m.p
	n := len(rows)
	qDim, kvDim := p.Heads*p.HeadDim, p.KVHeads*p.HeadDim
	ws.x = grow(ws.x, n*p.Dim)
	ws.xb = grow(ws.xb, n*p.Dim)
	ws.tmp = grow(ws.tmp, n*p.Dim)
	ws.q = grow(ws.q, n*qDim)
	ws.att = grow(ws.att, n*qDim)
	ws.k = grow(ws.k, n*kvDim)
	ws.v = grow(ws.v, n*kvDim)

	for r, row := range rows {
		src := m.embd.Data[int(row.token)*m.embdRow : (int(row.token)+1)*m.embdRow]
		x := ws.x[r*p.Dim : (r+1)*p.Dim]
		if err := ggml.Dequantize(m.embd.Type, src, x); err != nil {
			panic(err) // the type and size were checked at load time
		}
		if p.EmbedScale != 0 {
			for i := range x {
				x[i] *= p.EmbedScale
			}
		}
	}
	m.ropeTables(ws, rows)
	ws.segs = ws.segs[:0]
	for r := range rows {
		if r == 0 || rows[r].item != rows[r-1].item {
			ws.segs = append(ws.segs, segment{item: rows[r].item, a: r})
		}
		ws.segs[len(ws.segs)-1].b = r + 1
	}
	m.planAttention(ws, rows, runs)
	for li := range m.layers {
		m.layer(ws, li, rows, runs)
	}

	// Logits for the rows that asked.
	nOut := 0
	for _, row := range rows {
		if row.out != nil {
			nOut++
		}
	}
	if nOut == 0 {
		return
	}
	ws.xr = grow(ws.xr, nOut*p.Dim)
	ws.logits = grow(ws.logits, nOut*p.VocabSize)
	k := 0
	for r, row := range rows {
		if row.out != nil {
			copy(ws.xr[k*p.Dim:(k+1)*p.Dim], ws.x[r*p.Dim:(r+1)*p.Dim])
			k++
		}
	}
	rmsNormRows(ws.xr[:nOut*p.Dim], ws.xr[:nOut*p.Dim], m.outputNorm, p.Dim, p.RMSEps)
	kernels.MatMul(ws.logits, m.output, ws.xr, nOut)
	if c := p.FinalSoftcap; c != 0 {
		softcap(ws.logits[:nOut*p.VocabSize], c)
	}
	k = 0
	for _, row := range rows {
		if row.out != nil {
			copy(row.out, ws.logits[k*p.VocabSize:(k+1)*p.VocabSize])
			k++
		}
	}
}

// layer runs one transformer block on the rows of ws.x in place.
func (m *Model) layer(ws *workspace, li int, rows []rowInfo, runs []itemRun) {
	p := &m.p
	l := &m.layers[li]
	n := len(rows)
	dim, qDim, kvDim, hd := p.Dim, p.Heads*p.HeadDim, p.KVHeads*p.HeadDim, p.HeadDim

	// Attention.
	m.overRows(n, dim, func(r0, r1, _ int) {
		rmsNormRows(ws.xb[r0*dim:r1*dim], ws.x[r0*dim:r1*dim], l.attnNorm, dim, p.RMSEps)
	})
	ws.outs = append(ws.outs[:0], ws.q, ws.k, ws.v)
	kernels.MatMuls(ws.outs, l.qkv, ws.xb, n)
	addBias(ws.q, l.bq)
	addBias(ws.k, l.bk)
	addBias(ws.v, l.bv)
	if l.qNorm != nil { // qwen3: each query and key head RMS-normalised before RoPE
		// Every head of every row is a row of hd values.
		rmsNormRows(ws.q[:n*qDim], ws.q[:n*qDim], l.qNorm, hd, p.RMSEps)
		rmsNormRows(ws.k[:n*kvDim], ws.k[:n*kvDim], l.kNorm, hd, p.RMSEps)
	}
	half := p.RopeDims / 2
	cosAll, sinAll := ws.cos, ws.sin
	if l.window > 0 && m.invFreqLocal != nil {
		cosAll, sinAll = ws.cosLocal, ws.sinLocal
	}
	m.overRows(n, qDim+kvDim, func(r0, r1, _ int) {
		for r := r0; r < r1; r++ {
			cos, sin := cosAll[r*half:(r+1)*half], sinAll[r*half:(r+1)*half]
			m.rope(ws.q[r*qDim:(r+1)*qDim], hd, cos, sin)
			m.rope(ws.k[r*kvDim:(r+1)*kvDim], hd, cos, sin)
		}
	})
	// Each row's key and value go to its cache block: on the workers from two rows on for
	// large weights (see putShareBytes), else here (the shared form's closure is made only
	// then: it escapes to the heap).
	if m.sharePuts && n > 1 {
		m.overRows(n, minParallelValues, func(r0, r1, _ int) { m.putRows(ws, li, rows, runs, r0, r1) })
	} else {
		m.putRows(ws, li, rows, runs, 0, n)
	}
	if p.AttnSoftcap != 0 {
		// With a soft cap the score is an argument of tanh, where the last bit shows: scale
		// the queries before the product, as llama.cpp does for these models.
		s := float32(1 / math.Sqrt(float64(hd)))
		for i := range ws.q[:n*qDim] {
			ws.q[i] *= s
		}
	}
	m.attention(ws, li, rows, runs)
	kernels.MatMul(ws.tmp, l.wo, ws.att, n)
	if l.postAttnNorm != nil {
		rmsNormRows(ws.tmp[:n*dim], ws.tmp[:n*dim], l.postAttnNorm, dim, p.RMSEps)
	}
	m.overRows(n, dim, func(r0, r1, _ int) {
		fastmath.Add(ws.x[r0*dim:r1*dim], ws.tmp[r0*dim:r1*dim])
		rmsNormRows(ws.xb[r0*dim:r1*dim], ws.x[r0*dim:r1*dim], l.ffnNorm, dim, p.RMSEps)
	})
	if l.experts != nil {
		m.moe(ws, l, n)
		return
	}
	m.runFFN(ws, &l.dense, ws.xb, ws.tmp, n, p.FFNDim)
	if l.postFFNNorm != nil {
		rmsNormRows(ws.tmp[:n*dim], ws.tmp[:n*dim], l.postFFNNorm, dim, p.RMSEps)
	}
	m.overRows(n, dim, func(r0, r1, _ int) { fastmath.Add(ws.x[r0*dim:r1*dim], ws.tmp[r0*dim:r1*dim]) })
}

// putRows writes the keys and values of rows [r0, r1) of layer li to their sequences' caches,
// but for the rows whose attention task writes them (putByTask).
func (m *Model) putRows(ws *workspace, li int, rows []rowInfo, runs []itemRun, r0, r1 int) {
	kvDim := m.p.KVHeads * m.p.HeadDim
	for r := r0; r < r1; r++ {
		if ws.putByTask[r] {
			continue
		}
		runs[rows[r].item].st.seq.Put(li, rows[r].pos, ws.k[r*kvDim:(r+1)*kvDim], ws.v[r*kvDim:(r+1)*kvDim])
	}
}

// overRows runs fn over the n rows of a batch, in up to m.workers contiguous ranges when the
// rows hold enough values (n·width) to be worth sharing out, else at once on the caller. The
// row-wise operations it runs (norms, RoPE, residual additions, activations) give every row
// the same bits either way.
func (m *Model) overRows(n, width int, fn func(r0, r1, worker int)) {
	tasks := min(m.workers, n)
	if tasks < 2 || n*width < minParallelValues {
		fn(0, n, 0)
		return
	}
	m.parallel(tasks, func(t, w int) { fn(t*n/tasks, (t+1)*n/tasks, w) })
}

// minParallelValues is the fewest values a row-wise operation shares out among the workers:
// handing out work costs a few microseconds, a pass over 32 768 values about as much.
const minParallelValues = 32 << 10

// ropeTables fills ws.cos and ws.sin with the rotation of every rotated pair at every row's
// position.
func (m *Model) ropeTables(ws *workspace, rows []rowInfo) {
	half := m.p.RopeDims / 2
	ws.cos = grow(ws.cos, len(rows)*half)
	ws.sin = grow(ws.sin, len(rows)*half)
	for r, row := range rows {
		pos := float64(row.pos) * m.p.RopeFreqScale
		for i, f := range m.invFreq {
			s, c := math.Sincos(pos * f)
			ws.cos[r*half+i], ws.sin[r*half+i] = float32(c), float32(s)
		}
		if a := m.p.RopeAttnFactor; a != 1 {
			for i := range half {
				ws.cos[r*half+i] *= float32(a)
				ws.sin[r*half+i] *= float32(a)
			}
		}
	}
	if m.invFreqLocal == nil {
		return
	}
	// The sliding-window layers' own base, with positions unscaled.
	ws.cosLocal = grow(ws.cosLocal, len(rows)*half)
	ws.sinLocal = grow(ws.sinLocal, len(rows)*half)
	for r, row := range rows {
		for i, f := range m.invFreqLocal {
			s, c := math.Sincos(float64(row.pos) * f)
			ws.cosLocal[r*half+i], ws.sinLocal[r*half+i] = float32(c), float32(s)
		}
	}
}

// rope rotates the first RopeDims dimensions of each head (hd values) of one row's vectors:
// adjacent pairs (2i, 2i+1), or, in the NeoX layout, pairs (i, i + RopeDims/2), all heads in
// one call where the rotation spans the head.
func (m *Model) rope(v []float32, hd int, cos, sin []float32) {
	rotate := fastmath.RotatePairs
	if m.p.RopeNeoX {
		rotate = fastmath.RotateHalves
	}
	if 2*len(cos) == hd {
		rotate(v, cos, sin)
		return
	}
	for h := 0; h+hd <= len(v); h += hd {
		rotate(v[h:h+2*len(cos)], cos, sin)
	}
}
