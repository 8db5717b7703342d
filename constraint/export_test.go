package constraint

import "github.com/loomlm/loom/constraint/tokentrie"

// WalkSteps returns the trie nodes a mask of p's current state walks with its child slices
// and without them (root slices only).
func WalkSteps(p *Processor, trie *tokentrie.Trie) (child, rootOnly int) {
	q := p.Clone().(*Processor)
	opt := q.walkOptions(trie)
	child = trie.FillWith(q.m, tokentrie.NewMask(trie.VocabSize()), opt)
	rootOnly = trie.Fill(q.m, tokentrie.NewMask(trie.VocabSize()), opt.Slices...)
	return child, rootOnly
}

// MaskCacheHits is the number of masks p and its clones took from their cache.
func MaskCacheHits(p *Processor) int {
	p.masks.mu.Lock()
	defer p.masks.mu.Unlock()
	return p.masks.hits
}

// Unshared returns a clone of p with a mask cache of its own, empty.
func Unshared(p *Processor) *Processor {
	q := p.Clone().(*Processor)
	q.masks = &maskCache{}
	return q
}
