package server

import (
	"context"
	"net/http"
	"sync/atomic"
)

// admission bounds the requests generating at once and the requests waiting for a slot.
type admission struct {
	slots    chan struct{}
	waiting  atomic.Int64
	maxQueue int64
	// waitingKV counts the requests that hold a slot and wait for KV-cache room (kvGate):
	// waiting, not running.
	waitingKV atomic.Int64
}

func newAdmission(maxRunning, maxQueue int) *admission {
	return &admission{slots: make(chan struct{}, maxRunning), maxQueue: int64(maxQueue)}
}

// errQueueFull is the 429 of a request that finds every slot taken and the queue full.
var errQueueFull = &APIError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: codeOf("queue_full"),
	Message: "the server is at capacity: every generation slot is busy and the queue is full; retry later", RetryAfter: 1}

// acquire takes a slot, waiting in the queue if there is room; release gives it back.
func (a *admission) acquire(ctx context.Context) (release func(), err error) {
	release = func() { <-a.slots }
	select {
	case a.slots <- struct{}{}:
		return release, nil
	default:
	}
	if a.waiting.Add(1) > a.maxQueue {
		a.waiting.Add(-1)
		return nil, errQueueFull
	}
	defer a.waiting.Add(-1)
	select {
	case a.slots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// addWaiting counts requests waiting after their slot (for KV-cache room, kvGate) among the
// waiting ones.
func (a *admission) addWaiting(delta int) {
	a.waiting.Add(int64(delta))
	a.waitingKV.Add(int64(delta))
}

// running counts the requests generating: those holding a slot, but for the ones waiting in it
// for KV-cache room.
// (The two are read apart: a gauge may be one off for a moment, never below zero.)
func (a *admission) running() int { return max(0, len(a.slots)-int(a.waitingKV.Load())) }
func (a *admission) queued() int  { return int(a.waiting.Load()) }
