package batch

import (
	"context"
	"slices"

	"github.com/loomlm/loom/core"
)

// prefixCache is what a wrapped model's states may report: how many of tokens, following the
// state's own, the model's prefix cache holds and would not compute.
type prefixCache interface {
	CachedPrefix(tokens []core.TokenID) int
}

// part is one item of one call within a step.
type part struct {
	c    *call
	item int
	n    int // tokens sent in this step
}

// step runs one merged forward over the next chunk of every call's unfinished items, then
// completes the calls that are done. A merged forward that fails is retried call by call, so
// that an error fails only the call that caused it.
func (b *Model) step(calls []*call) {
	var live []*call
	for _, c := range calls {
		// A call cancelled while it waited (between the chunks of its prefill, or before its
		// first, say held back for an earlier prompt) ends here: its caller may not have
		// withdrawn it before this step took it.
		if err := c.ctx.Err(); err != nil {
			b.fail(c, err)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	batch, parts := b.layout(live, nil, nil)
	err := b.inner.Forward(context.Background(), batch)
	if err != nil && len(live) > 1 {
		for _, c := range live {
			batch, parts := b.layout([]*call{c}, batch[:0], parts[:0])
			if err := b.inner.Forward(context.Background(), batch); err != nil {
				b.fail(c, err)
				continue
			}
			b.advance(batch, parts)
		}
		return
	}
	if err != nil {
		b.fail(live[0], err)
		return
	}
	b.advance(batch, parts)
}

// layout appends the next chunk of every unfinished item of calls to batch.
func (b *Model) layout(calls []*call, batch []core.ForwardItem, parts []part) ([]core.ForwardItem, []part) {
	for _, c := range calls {
		for i := range c.items {
			it := &c.items[i]
			rest := len(it.Tokens) - c.sent[i]
			if rest == 0 {
				continue
			}
			n := rest
			if !it.AllLogits && n > b.opts.ChunkTokens {
				n = b.opts.ChunkTokens
				// Positions the prefix cache holds are taken, not computed: they go with the
				// chunk (all but the last token are matched, as the model matches them).
				if pc, ok := it.State.(prefixCache); ok {
					n = min(rest, pc.CachedPrefix(it.Tokens[c.sent[i]:len(it.Tokens)-1])+b.opts.ChunkTokens)
				}
			}
			batch = append(batch, core.ForwardItem{State: it.State, Tokens: it.Tokens[c.sent[i] : c.sent[i]+n], AllLogits: it.AllLogits})
			parts = append(parts, part{c: c, item: i, n: n})
		}
	}
	return batch, parts
}

// advance records a successful forward: items whose last token went through get their rows,
// and calls with every item done complete.
func (b *Model) advance(batch []core.ForwardItem, parts []part) {
	st := Step{}
	var calls []*call
	for k, p := range parts {
		c := p.c
		c.sent[p.item] += p.n
		st.Tokens += p.n
		if c.sent[p.item] == len(c.items[p.item].Tokens) {
			c.items[p.item].Logits = batch[k].Logits
		} else {
			st.Partial++
		}
		if len(calls) == 0 || calls[len(calls)-1] != c {
			calls = append(calls, c)
		}
	}
	if b.opts.OnStep != nil {
		st.Calls = len(calls)
		b.opts.OnStep(st)
	}
	done := calls[:0]
	for _, c := range calls {
		if c.finished() {
			done = append(done, c)
		}
	}
	b.complete(done, nil)
}

// fail rolls c's states back to where they were before the call and completes it with err.
func (b *Model) fail(c *call, err error) {
	for i, it := range c.items {
		if it.State.Len() != c.start[i] {
			_ = it.State.Truncate(c.start[i])
		}
	}
	b.complete([]*call{c}, err)
}

// complete removes the calls from the waiting ones, under one lock, and then wakes their
// callers.
func (b *Model) complete(calls []*call, err error) {
	if len(calls) == 0 {
		return
	}
	b.mu.Lock()
	b.pending = slices.DeleteFunc(b.pending, func(p *call) bool { return slices.Contains(calls, p) })
	if err == nil {
		b.warmUp(calls)
	}
	b.mu.Unlock()
	for _, c := range calls {
		c.err = err
		close(c.result)
	}
}

func (c *call) finished() bool {
	for i, it := range c.items {
		if c.sent[i] < len(it.Tokens) {
			return false
		}
	}
	return true
}

func (c *call) advanced() bool {
	for _, n := range c.sent {
		if n > 0 {
			return true
		}
	}
	return false
}
