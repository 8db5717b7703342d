// Package bounded is the constraint caches' concurrent map of bounded size: a process meets
// any number of grammars, so each cache of automata, unions or slices that outlives a grammar
// starts over once it has taken its maximum of entries, rather than growing for good.
package bounded

import (
	"sync"
	"sync/atomic"
)

// Map is a concurrent map from K to V that holds at most its maximum of entries: the store
// that would pass it empties the map first. Make one with New; it is safe for concurrent use.
type Map[K comparable, V any] struct {
	max    int64
	m      sync.Map
	stored atomic.Int64 // stores since the map last started over
}

// New returns an empty Map of at most max entries.
func New[K comparable, V any](max int64) *Map[K, V] { return &Map[K, V]{max: max} }

// Load returns the value stored for k, if any.
func (c *Map[K, V]) Load(k K) (V, bool) {
	v, ok := c.m.Load(k)
	if !ok {
		var zero V
		return zero, false
	}
	val, _ := v.(V) // a nil interface stored (V an interface type) loads as V's zero
	return val, true
}

// LoadOrStore returns the value stored for k if there is one (loaded true), else stores v and
// returns it, emptying the map first when it is full.
func (c *Map[K, V]) LoadOrStore(k K, v V) (actual V, loaded bool) {
	if a, ok := c.Load(k); ok {
		return a, true
	}
	c.makeRoom()
	a, loaded := c.m.LoadOrStore(k, v)
	val, _ := a.(V)
	return val, loaded
}

// Store stores v for k, emptying the map first when it is full.
func (c *Map[K, V]) Store(k K, v V) {
	c.makeRoom()
	c.m.Store(k, v)
}

// makeRoom counts a store, and empties the map when the store would pass its maximum.
func (c *Map[K, V]) makeRoom() {
	if c.stored.Add(1) > c.max {
		c.m.Clear()
		c.stored.Store(1)
	}
}
