package core_test

import (
	"context"
	"testing"
	"unsafe"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/strategies"
)

// TestForkDiscardReusesBuffers runs beam search's cycle on one line of descent — process the
// sequence (its softmax too), fork it, append the best token to the fork, discard the parent,
// forward the fork — and checks that the forks take the discarded sequences' buffers: over
// 100 cycles the model's logits rows and the softmax scratches live in a handful of places,
// where every fork used to take a fresh vocabulary-sized row and scratch (page faults and
// collector work at every step of a beam search; docs/BENCHMARKS.md).
func TestForkDiscardReusesBuffers(t *testing.T) {
	m, tok := loadPropModel(t)
	p := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{}}
	s, err := core.NewSession(context.Background(), p, core.Request{Prompt: "And it came to pass", MaxNewTokens: 400, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.Prefill()
	if err != nil {
		t.Fatal(err)
	}
	rows, scratches := map[*float32]bool{}, map[*float32]bool{}
	const cycles = 100
	for range cycles {
		rows[unsafe.SliceData(q.Logits())] = true
		c, err := s.Process(q)
		if err != nil {
			t.Fatal(err)
		}
		probs, _, err := c.Probs()
		if err != nil {
			t.Fatal(err)
		}
		scratches[unsafe.SliceData(probs)] = true
		ch, err := s.Sample(q, c)
		if err != nil {
			t.Fatal(err)
		}
		f, err := s.Fork(q)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Append(f, ch); err != nil {
			t.Fatal(err)
		}
		s.Discard(q)
		if err := s.Forward(f); err != nil {
			t.Fatal(err)
		}
		q = f
	}
	if len(rows) > 3 || len(scratches) > 3 {
		t.Fatalf("%d cycles of fork and discard used %d logits rows and %d softmax scratches; want a few of each, handed from discarded sequences to forks", cycles, len(rows), len(scratches))
	}
}
