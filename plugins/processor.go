package plugins

import (
	"fmt"
	"unsafe"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/sdk/pluginpb"
	"github.com/loomlm/loom/sdk/shm"
)

// processor is a plugin's logits processor as the pipeline sees it. It is a
// core.BatchProcessor: the session hands it all rows of a step at once, and it crosses to the
// plugin once per step.
type processor struct {
	pl    *Plugin
	part  uint32
	typ   string
	needs pluginpb.Needs
	topN  int
	vocab int

	// Scratch, used under pl.mu.
	rows []*pluginpb.Row
	top  [][]core.Candidate
	pos  []int32
	one  [1]*core.Sequence
	oneC [1]*core.Candidates
}

var _ core.BatchProcessor = (*processor)(nil)

func (pl *Plugin) newProcessor(idx uint32, typ string, env *pipeline.Env) (*processor, error) {
	vocab, err := pl.useVocabulary(env)
	if err != nil {
		return nil, err
	}
	p := pl.parts[idx]
	return &processor{pl: pl, part: idx, typ: typ, needs: p.Needs, topN: int(p.TopN), vocab: vocab}, nil
}

// Name implements core.LogitsProcessor: the type name the pipeline used.
func (p *processor) Name() string { return p.typ }

// Process implements core.LogitsProcessor.
func (p *processor) Process(seq *core.Sequence, c *core.Candidates) error {
	return p.pl.with(func(proc *process) error {
		p.one[0], p.oneC[0] = seq, c
		defer func() { p.one[0], p.oneC[0] = nil, nil }()
		return p.step(proc, p.one[:], p.oneC[:])
	})
}

// ProcessBatch implements core.BatchProcessor.
func (p *processor) ProcessBatch(seqs []*core.Sequence, cands []*core.Candidates) error {
	return p.pl.with(func(proc *process) error { return p.step(proc, seqs, cands) })
}

// headerSize is the region's first bytes, never used for data (offset 0 means "inline").
const headerSize = shm.MailboxOffset

// mailboxFor is the mailbox a step of rows reserves: room for any reply, even one that biases
// every token of every row.
func mailboxFor(proc *process, rows, vocab int) uint64 {
	if proc.bell == nil {
		return 0
	}
	return shm.AlignUp(uint64(64<<10 + rows*(10*vocab+256)))
}

func (p *processor) step(proc *process, seqs []*core.Sequence, cands []*core.Candidates) error {
	rows := p.prepareRows(len(seqs))
	mailbox := mailboxFor(proc, len(seqs), p.vocab)
	if proc.region != nil {
		proc.wakeUp()
		if err := p.layout(proc, seqs, cands, rows, headerSize+mailbox); err != nil {
			return err
		}
	} else {
		p.inline(seqs, cands, rows)
	}
	req := &pluginpb.StepRequest{Call: &pluginpb.StepRequest_Process{Process: &pluginpb.ProcessCall{Part: p.part, Rows: rows}}}
	reply, err := proc.roundTrip(req, mailbox)
	if err != nil {
		return err
	}
	if len(reply.Rows) != len(seqs) {
		return proc.malformed("%d rows for %d sequences", len(reply.Rows), len(seqs))
	}
	for i, rr := range reply.Rows {
		if err := p.apply(proc, rows[i], rr, i, cands[i]); err != nil {
			return err
		}
	}
	return nil
}

func (p *processor) prepareRows(n int) []*pluginpb.Row {
	for len(p.rows) < n {
		p.rows = append(p.rows, &pluginpb.Row{})
		p.top = append(p.top, nil)
	}
	rows := p.rows[:n]
	for _, r := range rows {
		r.Reset()
	}
	return rows
}

// fillTop keeps row i's top candidates in the processor's scratch.
func (p *processor) fillTop(i int, c *core.Candidates) []core.Candidate {
	p.top[i] = topCandidates(p.top[i][:0], c, p.topN)
	return p.top[i]
}

// layout writes the rows' data into the shared region and sets their offsets.
func (p *processor) layout(proc *process, seqs []*core.Sequence, cands []*core.Candidates, rows []*pluginpb.Row, start uint64) error {
	// First the sizes, so that the region grows (and is remapped) at most once.
	off := start
	for i, q := range seqs {
		r, c := rows[i], cands[i]
		r.Index, r.PromptLen = int32(q.Index()), uint32(q.PromptLen())
		r.NumTokens, r.TextLen = uint32(len(q.Tokens())), uint32(len(q.Text()))
		r.TokensOff = off
		off = shm.AlignUp(off + 4*uint64(r.NumTokens))
		r.TextOff = off
		off = shm.AlignUp(off + uint64(r.TextLen))
		switch {
		case p.needs == pluginpb.Needs_NEEDS_HISTORY:
			continue
		case p.needs == pluginpb.Needs_NEEDS_TOP:
			top := p.fillTop(i, c)
			r.NumItems, r.ItemsCap, r.Sorted = uint32(len(top)), uint32(len(top)), true
		case c.IsDense():
			r.Dense, r.NumItems = true, uint32(c.Len())
			r.LogitsOff = off
			off = shm.AlignUp(off + 4*uint64(r.NumItems))
			r.ItemsCap = uint32(c.Len())
		default:
			r.NumItems, r.ItemsCap, r.Sorted = uint32(c.Len()), uint32(c.Len()), c.Sorted()
		}
		r.HasLogits = true
		r.ItemsOff = off
		off = shm.AlignUp(off + 8*uint64(r.ItemsCap))
	}
	if int(off) > proc.region.Size() {
		if err := proc.region.Grow(max(int(off), 2*proc.region.Size())); err != nil {
			return p.pl.errorf("%v", err)
		}
	}
	reg := proc.region
	for i, q := range seqs {
		r, c := rows[i], cands[i]
		toks, _ := reg.Int32s(r.TokensOff, int(r.NumTokens))
		copy(toks, q.Tokens())
		text, _ := reg.Bytes(r.TextOff, int(r.TextLen))
		copy(text, q.Text())
		if !r.HasLogits {
			continue
		}
		if r.Dense {
			dst, _ := reg.Float32s(r.LogitsOff, int(r.NumItems))
			copy(dst, c.Dense())
			continue
		}
		items, _ := reg.Items(r.ItemsOff, int(r.NumItems))
		if p.needs == pluginpb.Needs_NEEDS_TOP {
			copy(asItems(items), p.top[i])
		} else {
			copy(asItems(items), c.Items())
		}
	}
	return nil
}

// inline puts the rows' data into the messages.
func (p *processor) inline(seqs []*core.Sequence, cands []*core.Candidates, rows []*pluginpb.Row) {
	for i, q := range seqs {
		r, c := rows[i], cands[i]
		r.Index, r.PromptLen = int32(q.Index()), uint32(q.PromptLen())
		r.NumTokens, r.TextLen = uint32(len(q.Tokens())), uint32(len(q.Text()))
		r.Tokens, r.Text = q.Tokens(), q.Text()
		var items []core.Candidate
		switch {
		case p.needs == pluginpb.Needs_NEEDS_HISTORY:
			continue
		case p.needs == pluginpb.Needs_NEEDS_TOP:
			items = p.fillTop(i, c)
			r.Sorted = true
		case c.IsDense():
			r.Dense, r.NumItems, r.Logits = true, uint32(c.Len()), c.Dense()
		default:
			items, r.Sorted = c.Items(), c.Sorted()
		}
		r.HasLogits = true
		if !r.Dense {
			r.NumItems = uint32(len(items))
			r.ItemIds = make([]int32, len(items))
			r.ItemLogits = make([]float32, len(items))
			for j, it := range items {
				r.ItemIds[j], r.ItemLogits[j] = it.ID, it.Logit
			}
		}
	}
}

// asItems views core candidates as shared-memory items (same layout: int32 id, float32 logit).
func asItems(items []shm.Item) []core.Candidate {
	if len(items) == 0 {
		return nil
	}
	return unsafe.Slice((*core.Candidate)(unsafe.Pointer(&items[0])), len(items))
}

// apply brings a row's reply into the host's candidates, checking everything.
func (p *processor) apply(proc *process, r *pluginpb.Row, rr *pluginpb.RowReply, i int, c *core.Candidates) error {
	if p.needs == pluginpb.Needs_NEEDS_TOP {
		// The plugin saw only the top candidates: the rest are dropped, as a top-k would.
		top := p.top[i]
		buf := c.Buffer(len(top))
		copy(buf, top)
		c.SetItems(buf, true)
	}
	seq := r.Index
	switch rr.Mode {
	case pluginpb.ReplyMode_REPLY_UNCHANGED:
		return nil
	case pluginpb.ReplyMode_REPLY_DENSE:
		if !r.Dense {
			return proc.malformed("sequence %d: dense logits for a row sent sparse", seq)
		}
		var src []float32
		if proc.region != nil {
			src, _ = proc.region.Float32s(r.LogitsOff, int(r.NumItems))
		} else {
			src = rr.Logits
		}
		if len(src) != c.Len() {
			return proc.malformed("sequence %d: %d logits for a vocabulary of %d", seq, len(src), c.Len())
		}
		dst := c.Dense()
		if j := copyChecked(dst, src); j >= 0 {
			return proc.malformed("sequence %d: logit of token %d is %v", seq, j, dst[j])
		}
		return nil
	case pluginpb.ReplyMode_REPLY_ITEMS:
		if !r.HasLogits {
			return proc.malformed("sequence %d: candidates from a processor that declared it reads only the history", seq)
		}
		var buf []core.Candidate
		if proc.region != nil {
			if rr.NumItems > r.ItemsCap {
				return proc.malformed("sequence %d: %d candidates, room for %d", seq, rr.NumItems, r.ItemsCap)
			}
			items, _ := proc.region.Items(r.ItemsOff, int(rr.NumItems))
			buf = c.Buffer(len(items))
			copy(buf, asItems(items))
		} else {
			if len(rr.ItemIds) != len(rr.ItemLogits) {
				return proc.malformed("sequence %d: %d candidate ids but %d logits", seq, len(rr.ItemIds), len(rr.ItemLogits))
			}
			buf = c.Buffer(len(rr.ItemIds))
			for j, id := range rr.ItemIds {
				buf[j] = core.Candidate{ID: id, Logit: rr.ItemLogits[j]}
			}
		}
		sorted, err := p.checkItems(buf)
		if err != nil {
			return proc.malformed("sequence %d: %v", seq, err)
		}
		c.SetItems(buf, rr.Sorted && sorted)
		return nil
	case pluginpb.ReplyMode_REPLY_EDITS:
		if len(rr.EditIds) != len(rr.EditDeltas) {
			return proc.malformed("sequence %d: %d ids but %d biases", seq, len(rr.EditIds), len(rr.EditDeltas))
		}
		for j, id := range rr.EditIds {
			if id < 0 || int(id) >= p.vocab {
				return proc.malformed("sequence %d: token %d outside the vocabulary of %d", seq, id, p.vocab)
			}
			if invalid(rr.EditDeltas[j]) {
				return proc.malformed("sequence %d: bias of token %d is %v", seq, id, rr.EditDeltas[j])
			}
		}
		p.applyEdits(c, rr.EditIds, rr.EditDeltas)
		return nil
	}
	return proc.malformed("sequence %d: unknown reply mode %d", seq, rr.Mode)
}

// checkItems validates candidates from a plugin: ids inside the vocabulary and unique, valid
// logits. It reports whether they are in descending order.
func (p *processor) checkItems(items []core.Candidate) (sorted bool, err error) {
	if len(p.pos) < p.vocab {
		p.pos = make([]int32, p.vocab)
		for j := range p.pos {
			p.pos[j] = -1
		}
	}
	defer func() {
		for _, it := range items {
			if it.ID >= 0 && int(it.ID) < p.vocab {
				p.pos[it.ID] = -1
			}
		}
	}()
	sorted = true
	for j, it := range items {
		if it.ID < 0 || int(it.ID) >= p.vocab {
			return false, fmt.Errorf("token %d outside the vocabulary of %d", it.ID, p.vocab)
		}
		if p.pos[it.ID] >= 0 {
			return false, fmt.Errorf("token %d appears twice", it.ID)
		}
		p.pos[it.ID] = int32(j)
		if invalid(it.Logit) {
			return false, fmt.Errorf("logit of token %d is %v", it.ID, it.Logit)
		}
		if j > 0 && it.Logit > items[j-1].Logit {
			sorted = false
		}
	}
	return sorted, nil
}

// applyEdits adds biases (−Inf bans) to the candidates.
func (p *processor) applyEdits(c *core.Candidates, ids []int32, deltas []float32) {
	if d := c.Dense(); d != nil {
		for j, id := range ids {
			d[id] += deltas[j]
		}
		return
	}
	items := c.Items()
	if len(p.pos) < p.vocab {
		p.pos = make([]int32, p.vocab)
		for j := range p.pos {
			p.pos[j] = -1
		}
	}
	for j, it := range items {
		p.pos[it.ID] = int32(j)
	}
	changed := false
	for j, id := range ids {
		if k := p.pos[id]; k >= 0 {
			items[k].Logit += deltas[j]
			changed = true
		}
	}
	for _, it := range items {
		p.pos[it.ID] = -1
	}
	if changed {
		c.MarkUnsorted()
	}
}

// topCandidates appends the n most likely candidates of c to dst, sorted by descending logit
// (ties by ascending id), in O(len · log n).
func topCandidates(dst []core.Candidate, c *core.Candidates, n int) []core.Candidate {
	less := func(a, b core.Candidate) bool { // a ranks below b
		return a.Logit < b.Logit || (a.Logit == b.Logit && a.ID > b.ID)
	}
	h := dst[:0]
	push := func(it core.Candidate) {
		if len(h) < n {
			h = append(h, it)
			for j := len(h) - 1; j > 0; {
				parent := (j - 1) / 2
				if !less(h[j], h[parent]) {
					break
				}
				h[j], h[parent] = h[parent], h[j]
				j = parent
			}
			return
		}
		if !less(h[0], it) {
			return
		}
		h[0] = it
		for j := 0; ; {
			l, r, m := 2*j+1, 2*j+2, j
			if l < len(h) && less(h[l], h[m]) {
				m = l
			}
			if r < len(h) && less(h[r], h[m]) {
				m = r
			}
			if m == j {
				break
			}
			h[j], h[m] = h[m], h[j]
			j = m
		}
	}
	if c.Sorted() {
		items := c.Items()
		return append(h, items[:min(n, len(items))]...)
	}
	if d := c.Dense(); d != nil {
		for id, v := range d {
			if v != v {
				continue
			}
			push(core.Candidate{ID: core.TokenID(id), Logit: v})
		}
	} else {
		for _, it := range c.Items() {
			push(it)
		}
	}
	// Heap to descending order.
	out := h
	for end := len(out) - 1; end > 0; end-- {
		out[0], out[end] = out[end], out[0]
		for j := 0; ; {
			l, r, m := 2*j+1, 2*j+2, j
			if l < end && less(out[l], out[m]) {
				m = l
			}
			if r < end && less(out[r], out[m]) {
				m = r
			}
			if m == j {
				break
			}
			out[j], out[m] = out[m], out[j]
			j = m
		}
	}
	return out
}
