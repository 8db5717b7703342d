package processors_test

import (
	"slices"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
)

// A penalty instance that sees a different sequence of the same length and last token (what
// a Truncate followed by new tokens looks like) recounts it instead of trusting its counts.
func TestPenaltiesRecountAnotherSequenceOfTheSameShape(t *testing.T) {
	p, err := processors.NewFrequencyPenalty(1, processors.Window{Scope: processors.ScopeAll, LastN: 8})
	if err != nil {
		t.Fatal(err)
	}
	run := func(tokens []core.TokenID) []float32 {
		q, err := core.NewSequence(tokens, 1, core.SequenceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		row := make([]float32, 8)
		if err := p.Process(q, core.NewCandidates(row)); err != nil {
			t.Fatal(err)
		}
		return row
	}
	run([]core.TokenID{1, 2, 2, 4})
	got := run([]core.TokenID{1, 5, 6, 4})
	want := []float32{0, -1, 0, 0, -1, -1, -1, 0}
	if !slices.Equal(got, want) {
		t.Fatalf("penalised row %v, want %v", got, want)
	}
}

func TestNewSequenceRejectsABadPromptLength(t *testing.T) {
	for _, n := range []int{-1, 4} {
		if _, err := core.NewSequence([]core.TokenID{1, 2, 3}, n, core.SequenceOptions{}); err == nil {
			t.Errorf("prompt length %d of 3 tokens accepted", n)
		}
	}
}
