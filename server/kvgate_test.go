package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// admitted reports whether ch is closed within a short time.
func admittedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// TestKVGate checks the gate's order and bounds: requests are admitted in arrival order while
// they fit (a small one does not pass a large one waiting), one larger than the whole cache
// waits until it has the cache to itself, and one whose client leaves gives up its place.
func TestKVGate(t *testing.T) {
	g := newKVGate(10, 16)
	var waiting atomic.Int64
	count := func(d int) { waiting.Add(int64(d)) }
	acquire := func(n int, ctx context.Context) (<-chan struct{}, *func()) {
		done := make(chan struct{})
		var rel func()
		go func() {
			r, err := g.acquire(ctx, n, count)
			if err == nil {
				rel = r
				close(done)
			}
		}()
		return done, &rel
	}
	ctx := context.Background()
	a, relA := acquire(6, ctx)
	if !admittedWithin(a, time.Second) {
		t.Fatal("6 of 10 blocks on an empty gate: not admitted")
	}
	b, relB := acquire(6, ctx)
	if admittedWithin(b, 50*time.Millisecond) {
		t.Fatal("6 more blocks beside 6 of 10: admitted")
	}
	c, relC := acquire(1, ctx)
	if admittedWithin(c, 50*time.Millisecond) {
		t.Fatal("1 block behind a waiting request: admitted ahead of it")
	}
	(*relA)()
	if !admittedWithin(b, time.Second) || !admittedWithin(c, time.Second) {
		t.Fatal("after the first left, the two waiting (6 + 1 of 10) were not both admitted")
	}
	big, relBig := acquire(25, ctx) // more than the cache: waits for all of it
	if admittedWithin(big, 50*time.Millisecond) {
		t.Fatal("a request larger than the cache admitted beside others")
	}
	leaving, cancel := context.WithCancel(ctx)
	d, _ := acquire(1, leaving)
	if admittedWithin(d, 50*time.Millisecond) {
		t.Fatal("1 block behind a waiting request: admitted ahead of it")
	}
	cancel()
	time.Sleep(50 * time.Millisecond)
	(*relB)()
	(*relC)()
	if !admittedWithin(big, time.Second) {
		t.Fatal("a request larger than the cache not admitted once it was empty")
	}
	g.mu.Lock()
	held, queued := g.held, len(g.waiters)
	g.mu.Unlock()
	if held != 10 || queued != 0 {
		t.Fatalf("held %d blocks with %d waiting, want the whole cache (10) held by the large request and nobody waiting", held, queued)
	}
	(*relBig)()
	g.mu.Lock()
	held = g.held
	g.mu.Unlock()
	if held != 0 {
		t.Fatalf("held %d blocks after every request left", held)
	}
	if n := waiting.Load(); n != 0 {
		t.Fatalf("waiting count %d after every wait ended", n)
	}
	// A wait whose context ends returns its error and holds nothing.
	g2 := newKVGate(4, 16)
	rel, _ := g2.acquire(ctx, 4, nil)
	short, stop := context.WithTimeout(ctx, 20*time.Millisecond)
	defer stop()
	if _, err := g2.acquire(short, 1, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait past its deadline: err = %v, want context.DeadlineExceeded", err)
	}
	rel()
	if g2.held != 0 || len(g2.waiters) != 0 {
		t.Fatalf("after the timed-out wait: held %d, %d waiting", g2.held, len(g2.waiters))
	}
}

// TestKVGateBlocks checks the bound a request is counted at.
func TestKVGateBlocks(t *testing.T) {
	g := newKVGate(100, 16)
	for _, c := range []struct{ prompt, maxNew, seqs, want int }{
		{1, 1, 1, 1 + 1 + 1},
		{16, 16, 1, 1 + 1 + 1},
		{17, 100, 1, 2 + 7 + 1},
		{40, 100, 4, 3 + 4*(7+1)},
		{40, 0, 0, 3 + 1},
	} {
		if got := g.blocks(c.prompt, c.maxNew, c.seqs); got != c.want {
			t.Errorf("blocks(prompt %d, max new %d, %d sequences) = %d, want %d", c.prompt, c.maxNew, c.seqs, got, c.want)
		}
	}
}

// TestAdmissionCountsKVWaitersAsWaiting checks the gauges: a request holding a slot while it
// waits for cache room is waiting, not running.
func TestAdmissionCountsKVWaitersAsWaiting(t *testing.T) {
	a := newAdmission(2, 4)
	ctx := context.Background()
	r1, err := a.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := a.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g := newKVGate(1, 16)
	held, _ := g.acquire(ctx, 1, a.addWaiting)
	waited := make(chan struct{})
	go func() {
		rel, err := g.acquire(ctx, 1, a.addWaiting) // the second slot's request waits for room
		if err == nil {
			rel()
		}
		close(waited)
	}()
	deadline := time.Now().Add(time.Second)
	for a.queued() != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if a.running() != 1 || a.queued() != 1 {
		t.Fatalf("two slots, one waiting for cache room: running %d, waiting %d; want 1 and 1", a.running(), a.queued())
	}
	held()
	<-waited
	if a.running() != 2 || a.queued() != 0 {
		t.Fatalf("after the wait: running %d, waiting %d; want 2 and 0", a.running(), a.queued())
	}
	r1()
	r2()
}
