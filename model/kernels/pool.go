package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// The worker pool: goroutines started once and fed jobs through a channel. The calling
// goroutine always works on its own job too, so a job finishes even when every worker is busy
// with another caller's job.

type job struct {
	fn    func(lo, hi int)
	n     int
	chunk int
	next  atomic.Int64 // next chunk to claim
	left  atomic.Int64 // chunks not finished
	done  chan struct{}
}

// work claims and runs chunks until none is left.
func (j *job) work() {
	for {
		c := int(j.next.Add(1) - 1)
		lo := c * j.chunk
		if lo >= j.n {
			return
		}
		j.fn(lo, min(lo+j.chunk, j.n))
		if j.left.Add(-1) == 0 {
			close(j.done)
		}
	}
}

var pool struct {
	mu      sync.Mutex
	started atomic.Int64
	jobs    chan *job
}

func init() {
	pool.jobs = make(chan *job, 256)
}

// workers returns the number of goroutines that share a job: GOMAXPROCS.
func workers() int { return runtime.GOMAXPROCS(0) }

func startWorkers(k int) {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	for pool.started.Load() < int64(k) {
		go func() {
			for j := range pool.jobs {
				j.work()
			}
		}()
		pool.started.Add(1)
	}
}

// parallelFor runs fn over [0, n) in chunks of chunk, on the caller and up to GOMAXPROCS-1
// pool goroutines, and returns when all chunks are done.
func parallelFor(n, chunk int, fn func(lo, hi int)) {
	chunks := (n + chunk - 1) / chunk
	helpers := min(workers(), chunks) - 1
	if helpers <= 0 {
		fn(0, n)
		return
	}
	if pool.started.Load() < int64(helpers) {
		startWorkers(helpers)
	}
	j := &job{fn: fn, n: n, chunk: chunk, done: make(chan struct{})}
	j.left.Store(int64(chunks))
	for range helpers {
		select {
		case pool.jobs <- j:
		default: // every worker is busy and the queue full: the caller does the rest
		}
	}
	j.work()
	<-j.done
}
