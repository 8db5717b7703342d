package llama_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
)

// TestUseAfterClose closes a model opened from a file (its weights mapped) while forward
// passes run and then uses it: the passes in flight finish, later ones and new states fail
// with ErrClosed instead of reading the unmapped file, and the states made before can still
// be forked, truncated and closed.
func TestUseAfterClose(t *testing.T) {
	m, err := llama.Open("../../models/default.gguf", llama.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.NewState()
	if err != nil {
		t.Fatal(err)
	}
	prompt := []core.TokenID{10, 20, 30, 40}
	if err := m.Forward(context.Background(), []core.ForwardItem{{State: st, Tokens: prompt}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			s, err := m.NewState()
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			for i := range 50 {
				if err := m.Forward(context.Background(), []core.ForwardItem{{State: s, Tokens: []core.TokenID{core.TokenID(100 + g + i)}}}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		})
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, llama.ErrClosed) {
			t.Errorf("a pass racing Close: %v, want nil or ErrClosed", err)
		}
	}
	if err := m.Forward(context.Background(), []core.ForwardItem{{State: st, Tokens: []core.TokenID{50}}}); !errors.Is(err, llama.ErrClosed) {
		t.Fatalf("Forward after Close: %v, want ErrClosed", err)
	}
	if _, err := m.NewState(); !errors.Is(err, llama.ErrClosed) {
		t.Fatalf("NewState after Close: %v, want ErrClosed", err)
	}
	f, err := st.Fork()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2); err != nil || f.Len() != 2 {
		t.Fatalf("Truncate of a fork after Close: %v, length %d", err, f.Len())
	}
	f.Close()
	st.Close()
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
