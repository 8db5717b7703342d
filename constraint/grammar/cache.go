package grammar

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// Cache keeps the last compiled grammars by a digest of what each was compiled from, so that
// the same source compiled again returns the same *CFG: a server builds a constraint for every
// request, and an application sends the same schema (or grammar, or tools) with each.
// Compiling one again costs from a tenth of a millisecond to tens of milliseconds, and a new
// grammar's first parser derives its analysis of the grammar again (Derived). A compiled
// grammar is read-only: every processor made from it may share it. A Cache is safe for
// concurrent use.
type Cache struct {
	size    int
	mu      sync.Mutex
	entries map[[32]byte]*CFG
	order   [][32]byte // oldest first
}

// NewCache returns a cache of the last size grammars.
func NewCache(size int) *Cache {
	return &Cache{size: max(size, 1), entries: map[[32]byte]*CFG{}}
}

// Get returns the grammar compiled from parts (the source and every option that changes what
// it compiles to): the one kept, or build's, which it then keeps. Errors are not kept.
func (c *Cache) Get(build func() (*CFG, error), parts ...[]byte) (*CFG, error) {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	var key [32]byte
	h.Sum(key[:0])
	c.mu.Lock()
	cfg, ok := c.entries[key]
	c.mu.Unlock()
	if ok {
		return cfg, nil
	}
	cfg, err := build()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if kept, ok := c.entries[key]; ok {
		return kept, nil
	}
	if len(c.order) == c.size {
		delete(c.entries, c.order[0])
		c.order = c.order[1:]
	}
	c.entries[key] = cfg
	c.order = append(c.order, key)
	return cfg, nil
}
