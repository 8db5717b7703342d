package core

import (
	"context"
	"iter"
)

// Generate runs one request through the pipeline and returns its Result. Tokens are streamed to
// req.OnEvent as they are chosen. When the request fails or ctx is cancelled midway, Generate
// returns the partial Result (sequences finished with reason "error" or "cancelled") together
// with the error, so no output is lost.
func Generate(ctx context.Context, p *Pipeline, req Request) (*Result, error) {
	s, err := NewSession(ctx, p, req)
	if err != nil {
		return nil, err
	}
	err = p.Strategy.Decode(ctx, s)
	if err == nil {
		err = ctx.Err()
	}
	return s.result(err), err
}

// Stream runs a request and yields its events as they happen; the last pair carries the
// Result's error, if any (with a zero Event). Breaking out of the loop cancels the request.
// req.OnEvent is replaced.
func Stream(ctx context.Context, p *Pipeline, req Request) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		events := make(chan Event)
		done := make(chan error, 1)
		req.OnEvent = func(ev Event) error {
			select {
			case events <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		go func() {
			_, err := Generate(ctx, p, req)
			done <- err
		}()
		for {
			select {
			case ev := <-events:
				if !yield(ev, nil) {
					cancel()
					<-done
					return
				}
			case err := <-done:
				if err != nil {
					yield(Event{}, err)
				}
				return
			}
		}
	}
}
