package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The worker pool: GOMAXPROCS-1 goroutines started once. The calling goroutine always works on
// its own job too, so a job finishes even when every worker is busy with another caller's job.
//
// A forward pass of a small model is a chain of products of a few tens of microseconds with
// serial work between them (norms, attention, activations), and waking a parked goroutine
// takes longer than that: with workers that park after every job, a product's second half
// was done by the caller more often than not (two 10 µs chunks took 23 µs, not 10). So a
// worker that finishes a job spins for spinFor, watching for the next job, before it parks —
// and for as long as a caller holds the pool (HoldWorkers: a model's forward pass does) — and
// a caller waits for its helpers' last chunks spinning for up to waitSpin before it parks.
// A spinning worker yields to the scheduler as it spins, so it takes no core another of the
// process's goroutines asked for, its thread yields its core to other processes once it has
// watched for yieldThreadAfter, and spinning stops spinFor after the last job once nothing
// holds the pool. (A yielding worker is always runnable, so while it spins the scheduler does
// not poll the network: a server's new requests wait for it to park, or for the runtime's
// forced poll every 10 ms. Spinning long only while a forward pass holds the pool keeps that
// wait within a step, as it was with short spins; spinning 1 ms after every job doubled the
// time to first token of a 16-stream server on the embedded model, 9 to 20 ms.) On a machine
// busy with other processes a helper may lose its core mid-chunk: the caller then parks
// rather than spin against it. Spinning assumes GOMAXPROCS cores for the process, as an
// inference engine's thread count does: on a machine where other processes keep cores busy,
// set GOMAXPROCS to the cores that are free.

const (
	// spinFor is how long a worker watches for a new job after its last one before it parks,
	// when nothing holds the pool: longer than the serial work between the products of a
	// forward pass, and than the work between a batching server's steps (its streams take
	// their tokens and ask again: 100–200 µs for 16 streams of the embedded model), so that
	// the worker is not parked when the next step begins; short enough that an idle process
	// soon stops spinning. At 50 µs the worker parked in every such gap and the next step's
	// first products ran on the caller alone until it woke: `go test ./server/batch -run '^$'
	// -bench 'Decode/streams=(1|16)/^batched$'`, three rounds alternating, 16 streams 9 252–9 482
	// → 10 451–10 662 tok/s and one stream 3 351–3 445 → 3 481–3 608; `loom bench serve`, its
	// clients on the same two cores, level (16 streams 5 240–5 418 tok/s at 200 µs against
	// 5 128–5 517 at 50, the times to first token level), as were greedy and speculative
	// decoding.
	spinFor = 200 * time.Microsecond
	// holdSpinFor bounds a held worker's watch for the next job: a holder between its jobs
	// does serial work of microseconds, not this long.
	holdSpinFor = 10 * time.Millisecond
	// waitSpin is how long a caller spins for its helpers' last chunks before it parks. A
	// caller that parks hands its core to other goroutines or lets it go idle, and taking it
	// back costs more than a helper's last chunk usually takes: at 20 µs a 16-stream
	// server's caller parked about five times a step.
	waitSpin = 200 * time.Microsecond
	// yieldThreadAfter is how long a worker watches for a job before its yields give up its
	// thread's core too (sched_yield), not only its place in the Go scheduler: runtime.Gosched
	// lets the process's own goroutines run, but to the operating system a spinning worker is a
	// busy thread, and another process on its core waits for its time slice — a server's
	// clients on the same machine, say, reading the tokens just written to them. Inside a
	// forward pass jobs follow each other within microseconds and a worker never watches this
	// long; between a server's steps (while its streams take their tokens and ask again) it
	// does. With `loom serve` and its clients sharing two cores (`loom bench serve
	// --concurrency 1,4,16`, three rounds alternating) 16 streams went from 4 696–4 911 to
	// 4 985–5 331 tok/s and the time to first token's median at one and four streams from
	// 5.9–8.4 and 8.2–9.5 to 4.6–6.5 and 5.3–6.3 ms; a forward pass alone
	// (BenchmarkForwardRows) and beam search (BenchmarkBeam) were level.
	yieldThreadAfter = 20 * time.Microsecond
)

// HoldWorkers keeps the pool's workers watching for jobs between them, however long the
// caller's serial work between its jobs takes, until the matching ReleaseWorkers (holds
// nest). A forward pass holds the pool for its duration: in a server decoding 16 streams,
// the caller's serial work between products — the moments the server's other goroutines
// hold its core included — outlasted a worker's watch (50 µs then) about ten times a step, and the
// parked worker, woken for the next product, came after that product was done: one job in ten
// ran on the caller alone (docs/BENCHMARKS.md, "Cores left idle inside a step").
func HoldWorkers() {
	if pool.holds.Add(1) != 1 {
		return
	}
	// Wake the parked workers now rather than at the first job: a parked goroutine takes
	// longer to run again than a small product takes, and the holder's first product comes
	// within microseconds. Only parked workers not already woken by a queued job are sent
	// one, so that no wake waits in the queue for a worker busy elsewhere and crowds out the
	// wakes of real jobs.
	for range pool.parked.Load() - int64(len(pool.wake)) {
		select {
		case pool.wake <- &noJob:
		default:
		}
	}
}

// noJob wakes a parked worker with nothing to do: it has no items, so the worker goes back to
// watching for jobs.
var noJob job

// ReleaseWorkers ends a HoldWorkers. Without one it panics and leaves the pool as it was.
func ReleaseWorkers() {
	for {
		h := pool.holds.Load()
		if h <= 0 {
			panic("kernels: ReleaseWorkers without HoldWorkers")
		}
		if pool.holds.CompareAndSwap(h, h-1) {
			return
		}
	}
}

type job struct {
	fn func(lo, hi, worker int)
	n  int
	// chunk is the items of every claim, or with guided the fewest, of which every claim but
	// the last is a multiple.
	chunk   int
	guided  bool          // claims shrink with the items left (see parallelFor)
	workers int           // participants at most: worker ids are in [0, workers)
	next    atomic.Int64  // first item not claimed
	left    atomic.Int64  // items not finished
	ids     atomic.Int64  // worker ids handed out to helpers (the caller is 0)
	done    chan struct{} // closed when left reaches 0
}

// claim takes the next items [lo, hi) to run, or reports that none is left.
func (j *job) claim() (lo, hi int, ok bool) {
	if !j.guided {
		lo = int(j.next.Add(int64(j.chunk))) - j.chunk
		return lo, min(lo+j.chunk, j.n), lo < j.n
	}
	for {
		lo = int(j.next.Load())
		if lo >= j.n {
			return 0, 0, false
		}
		size := (j.n - lo) / (2 * j.workers)
		size = max(j.chunk, (size+j.chunk-1)/j.chunk*j.chunk)
		hi = min(lo+size, j.n)
		if j.next.CompareAndSwap(int64(lo), int64(hi)) {
			return lo, hi, true
		}
	}
}

// work claims and runs items as worker id until none is left.
func (j *job) work(id int) {
	for {
		lo, hi, ok := j.claim()
		if !ok {
			return
		}
		j.fn(lo, hi, id)
		if j.left.Add(int64(lo-hi)) == 0 {
			close(j.done)
		}
	}
}

// help joins j as a helper, if it still has items to claim and a worker id to spare.
func (j *job) help() {
	if int(j.next.Load()) >= j.n {
		return
	}
	if id := int(j.ids.Add(1)); id < j.workers {
		j.work(id)
	}
}

var pool struct {
	mu      sync.Mutex
	started atomic.Int64
	// offer is the newest job, for spinning workers; parked workers get jobs from wake.
	offer    atomic.Pointer[job]
	spinning atomic.Int64
	holds    atomic.Int64 // HoldWorkers calls not yet released
	parked   atomic.Int64 // workers waiting on wake
	wake     chan *job
}

func init() {
	pool.wake = make(chan *job, 256)
}

// workers returns the number of goroutines that share a job: GOMAXPROCS, read again every
// 64th call. runtime.GOMAXPROCS takes the scheduler's lock, which the spinning workers' yields
// take too; a forward pass of a small model asks hundreds of times.
func workers() int {
	if procs.calls.Add(1)%64 != 1 {
		if n := procs.n.Load(); n > 0 { // 0 until the first read has stored it
			return int(n)
		}
	}
	n := runtime.GOMAXPROCS(0)
	procs.n.Store(int64(n))
	return n
}

var procs struct {
	calls, n atomic.Int64
}

// refreshWorkers reads GOMAXPROCS now (tests that change it).
func refreshWorkers() { procs.n.Store(int64(runtime.GOMAXPROCS(0))) }

func startWorkers(k int) {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	for pool.started.Load() < int64(k) {
		go worker()
		pool.started.Add(1)
	}
}

// worker runs jobs: those it sees offered while it spins, else those sent to it parked.
func worker() {
	var last *job
	for {
		j := spin(last)
		if j == nil {
			pool.parked.Add(1)
			j = <-pool.wake
			pool.parked.Add(-1)
		}
		j.help()
		last = j
	}
}

// spin watches pool.offer for a job other than last for spinFor (while the pool is held, up to
// holdSpinFor), and returns it, or nil.
func spin(last *job) *job {
	pool.spinning.Add(1)
	defer pool.spinning.Add(-1)
	start := time.Now()
	for i := 0; ; i++ {
		if j := pool.offer.Load(); j != nil && j != last {
			return j
		}
		if i%64 == 63 {
			elapsed := time.Since(start)
			if !spinMore(elapsed, pool.holds.Load() > 0) {
				return nil
			}
			runtime.Gosched()
			if elapsed > yieldThreadAfter {
				yieldThread()
			}
		}
	}
}

// spinMore reports whether a worker that has watched for a job for elapsed since its last one
// goes on watching, the pool held or not.
func spinMore(elapsed time.Duration, held bool) bool {
	return elapsed <= spinFor || held && elapsed <= holdSpinFor
}

// parallelFor runs fn over [0, n), on the caller and up to GOMAXPROCS-1 pool goroutines, and
// returns when all of it is done. Each participant claims a range in turn, guided: a claim
// takes 1/(2·participants) of the items left, rounded up to a multiple of grain and at least
// grain (the last claim takes what is left). The first claims are long runs, which a worker
// streams from memory faster than the same bytes in many short chunks, and the last are
// short, so that the participants finish together. Against eight equal chunks a product
// (rows/8 each, at least grain), a 110M model's F32 generation ran at 100–113 against 96–107
// tokens/s and F16 at 173–208 against 158–204 (loom's binaries alternating; Q8_0, Q4_0 and
// Q4_K within noise), prompt processing the same (docs/BENCHMARKS.md).
func parallelFor(n, grain int, fn func(lo, hi int)) {
	run(n, grain, true, workers(), func(lo, hi, _ int) { fn(lo, hi) })
}

// Parallel runs fn(task, worker) for every task in [0, n), on the calling goroutine (worker 0)
// and on up to min(GOMAXPROCS, workers)-1 goroutines of the pool that kernels' products use,
// each with its own worker number in [0, workers) (an index into per-worker scratch space,
// say), and returns when all are done. Tasks are claimed one at a time, so they may differ in
// size. A workers below 1 counts as 1: everything runs on the caller as worker 0.
func Parallel(n, workers int, fn func(task, worker int)) {
	run(n, 1, false, max(workers, 1), func(lo, hi, worker int) {
		for t := lo; t < hi; t++ {
			fn(t, worker)
		}
	})
}

// run is parallelFor and Parallel: fn(lo, hi, worker) over [0, n) in claims of chunk items
// (guided: of at least chunk), on at most maxWorkers participants.
func run(n, chunk int, guided bool, maxWorkers int, fn func(lo, hi, worker int)) {
	if n <= 0 {
		return
	}
	chunks := (n + chunk - 1) / chunk
	helpers := min(workers(), chunks, maxWorkers) - 1
	if helpers <= 0 {
		fn(0, n, 0)
		return
	}
	if pool.started.Load() < int64(helpers) {
		startWorkers(helpers)
	}
	j := &job{fn: fn, n: n, chunk: chunk, guided: guided, workers: helpers + 1, done: make(chan struct{})}
	j.left.Store(int64(n))
	pool.offer.Store(j)
	for range helpers - int(pool.spinning.Load()) {
		select {
		case pool.wake <- j:
		default: // every worker is busy and the queue full: the caller does the rest
		}
	}
	j.work(0)
	// The helpers are finishing their last chunks: wait for them spinning a little, then
	// parked.
	start := time.Now()
	for i := 0; j.left.Load() != 0; i++ {
		if i%64 == 63 {
			if time.Since(start) > waitSpin {
				<-j.done
				break
			}
			runtime.Gosched()
		}
	}
	pool.offer.CompareAndSwap(j, nil)
}
