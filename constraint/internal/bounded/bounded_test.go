package bounded

import (
	"sync"
	"testing"
)

// TestMapStartsOver checks that a Map keeps what it is given up to its maximum of entries, that the store
// past the maximum leaves it holding that entry alone, and that LoadOrStore keeps the first value.
func TestMapStartsOver(t *testing.T) {
	m := New[int, string](3)
	for k := range 3 {
		m.Store(k, "v")
	}
	for k := range 3 {
		if _, ok := m.Load(k); !ok {
			t.Fatalf("entry %d of 3 lost before the map was full", k)
		}
	}
	m.Store(3, "w")
	for k := range 3 {
		if _, ok := m.Load(k); ok {
			t.Errorf("entry %d still held after the store past the maximum", k)
		}
	}
	if v, ok := m.Load(3); !ok || v != "w" {
		t.Fatalf("Load(3) = %q, %v after storing it", v, ok)
	}
	if v, loaded := m.LoadOrStore(3, "x"); !loaded || v != "w" {
		t.Errorf("LoadOrStore over an entry = %q, %v; want the entry kept", v, loaded)
	}
	if v, loaded := m.LoadOrStore(4, "y"); loaded || v != "y" {
		t.Errorf("LoadOrStore of a new key = %q, %v", v, loaded)
	}
	if _, ok := m.Load(5); ok {
		t.Error("Load of a key never stored found one")
	}
	// A nil stored in a map of an interface type (the union cache's "too large") is found.
	n := New[int, any](2)
	n.Store(1, nil)
	if v, ok := n.Load(1); !ok || v != nil {
		t.Errorf("Load of a stored nil = %v, %v", v, ok)
	}
	if v, loaded := n.LoadOrStore(1, "x"); !loaded || v != nil {
		t.Errorf("LoadOrStore over a stored nil = %v, %v", v, loaded)
	}
}

// TestMapConcurrent stores and loads from several goroutines (under the race detector in the
// project's tests): every LoadOrStore returns a value stored for its key, and the map never
// holds more entries than its maximum and the goroutines racing it.
func TestMapConcurrent(t *testing.T) {
	const max, workers = 64, 8
	m := New[int, int](max)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := (i*7 + w) % 200
				if v, _ := m.LoadOrStore(k, k*10); v != k*10 {
					t.Errorf("LoadOrStore(%d) = %d", k, v)
					return
				}
			}
		}()
	}
	wg.Wait()
	n := 0
	m.m.Range(func(any, any) bool { n++; return true })
	if n > max+workers {
		t.Errorf("%d entries held, at most %d", n, max)
	}
}
