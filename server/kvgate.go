package server

import (
	"context"
	"sync"

	"github.com/loomlm/loom/core"
)

// kvGate admits the requests of one model by the KV-cache blocks they may fill: a request waits,
// in arrival order, until the blocks its prompt and its longest output can take fit beside
// those of the requests admitted before it. Without it, requests that each fit the cache could
// together outgrow it halfway through, and the ones that found it full failed mid-stream (on a
// 110M model's 160 MB cache, 33 of 64 concurrent streaming requests of 192 tokens). The count
// is an upper bound (a cached prefix, shared by several requests, counts for each), so the
// cache never runs out under it; a request that could fill more than the whole cache waits
// until it has the cache to itself.
type kvGate struct {
	capacity, blockSize int

	mu      sync.Mutex
	held    int
	waiters []*kvWaiter // in arrival order
}

type kvWaiter struct {
	n     int
	ready chan struct{} // closed when admitted
}

func newKVGate(capacity, blockSize int) *kvGate {
	return &kvGate{capacity: capacity, blockSize: blockSize}
}

// blocks is what a request of promptTokens tokens may fill with seqs sequences of up to
// maxNew tokens each: the prompt's blocks once (sequences share them), and per sequence its
// output's blocks and one more (the block a fork copies, or the positions a draft adds).
func (g *kvGate) blocks(promptTokens, maxNew, seqs int) int {
	per := (maxNew+g.blockSize-1)/g.blockSize + 1
	return (promptTokens+g.blockSize-1)/g.blockSize + max(seqs, 1)*per
}

// acquire waits until n blocks (at most the capacity) are admitted, or ctx ends; release
// gives them back. waiting, when not nil, is told when the wait starts and ends.
func (g *kvGate) acquire(ctx context.Context, n int, waiting func(delta int)) (release func(), err error) {
	n = min(max(n, 0), g.capacity)
	release = func() { g.release(n) }
	g.mu.Lock()
	if len(g.waiters) == 0 && g.held+n <= g.capacity {
		g.held += n
		g.mu.Unlock()
		return release, nil
	}
	w := &kvWaiter{n: n, ready: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	g.mu.Unlock()
	if waiting != nil {
		waiting(1)
		defer waiting(-1)
	}
	select {
	case <-w.ready:
		return release, nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w.ready: // admitted while ctx ended: give the blocks back
		g.held -= n
		g.admit()
	default:
		for i, x := range g.waiters {
			if x == w {
				g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
				break
			}
		}
		g.admit() // the waiter behind it may fit now
	}
	return nil, ctx.Err()
}

func (g *kvGate) release(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held -= n
	g.admit()
}

// admit admits waiters from the head of the queue while they fit. The caller holds g.mu.
func (g *kvGate) admit() {
	for len(g.waiters) > 0 && g.held+g.waiters[0].n <= g.capacity {
		w := g.waiters[0]
		g.waiters = g.waiters[1:]
		g.held += w.n
		close(w.ready)
	}
}

// kvShape is what a request may put in a cache: its prompt's tokens, its longest output, and
// the most sequences its strategy keeps at once.
type kvShape struct{ prompt, maxNew, seqs int }

// shapeOf is req's kvShape on p: its prompt's tokens, its output limit within the context, and
// n samples or a beam search's beams and hypotheses (Width). It encodes the prompt
// (core.EncodePrompt) and keeps the tokens in req.PromptTokens, so that the session does not
// encode it again. It returns false when the prompt does not encode, or cannot fit, so that the
// generation reports that.
func shapeOf(p *core.Pipeline, req *core.Request) (kvShape, bool) {
	toks, err := core.EncodePrompt(p, req)
	if err != nil {
		return kvShape{}, false
	}
	req.PromptTokens = toks
	prompt, maxNew := len(toks), req.MaxNewTokens
	if ctxLen := p.Model.Config().ContextLength; ctxLen > 0 {
		if prompt >= ctxLen {
			return kvShape{}, false
		}
		maxNew = min(maxNew, ctxLen-prompt)
	}
	seqs := max(req.N, 1)
	if w, ok := p.Strategy.(interface{ Width() int }); ok {
		seqs = max(seqs, w.Width())
	}
	return kvShape{prompt, maxNew, seqs}, true
}

// admitKV waits until the KV caches of models (a pipeline's model, and its draft model) have
// room for req on p (kvGate), in that order, counting the wait as waiting in the metrics;
// release gives the room back. A model listed twice (a draft that is the target model itself)
// holds the sum in one wait: its sequences and the draft's share the cache, and two waits on
// one gate would each wait for the room the other holds. A model whose cache does not report
// its size, or a request whose prompt will fail, is not held.
func (s *Server) admitKV(ctx context.Context, models []*sharedModel, p *core.Pipeline, req *core.Request) (release func(), err error) {
	var held []func()
	release = func() {
		for _, r := range held {
			r()
		}
	}
	shape, ok := shapeOf(p, req)
	if !ok {
		return release, nil
	}
	var gates []*kvGate
	need := map[*kvGate]int{}
	for _, m := range models {
		if m == nil || m.kv == nil {
			continue
		}
		if _, seen := need[m.kv]; !seen {
			gates = append(gates, m.kv)
		}
		need[m.kv] += m.kv.blocks(shape.prompt, shape.maxNew, shape.seqs)
	}
	for _, g := range gates {
		r, err := g.acquire(ctx, need[g], s.adm.addWaiting)
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, r)
	}
	return release, nil
}
