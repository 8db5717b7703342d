// Package sessiontest recomputes a sequence of a core.Session from scratch, for tests that
// check the Session's primitives (and the plugin SDK built on them) in any call order.
package sessiontest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
)

// Scratch recomputes sequences from scratch: a fresh model state fed the tokens, fresh clones
// of the pipeline's processors replayed over them. Results are cached.
type Scratch struct {
	t     testing.TB
	model core.Model
	tok   core.Tokenizer
	chain []core.LogitsProcessor
	seed  uint64
	cache map[string]Result
}

// NewScratch recomputes sequences of requests with the given seed on model, with fresh clones
// of chain.
func NewScratch(t testing.TB, model core.Model, tok core.Tokenizer, chain []core.LogitsProcessor, seed uint64) *Scratch {
	return &Scratch{t: t, model: model, tok: tok, chain: chain, seed: seed, cache: map[string]Result{}}
}

// Result is what recomputation gives for one sequence.
type Result struct {
	Row   []float32       // the raw row after all tokens
	Cands core.Candidates // the row processed by a replayed chain
	Rows  [][]float32     // Rows[g]: the raw row from which generated token g was chosen
}

func key(tokens []core.TokenID, processed []bool, index int) string {
	var b strings.Builder
	fmt.Fprint(&b, index, tokens, processed)
	return b.String()
}

// Of recomputes the sequence with tokens (promptLen of them the prompt) whose generated steps
// were processed as processed says, for the sequence index (what XTC-like parts would see).
func (sc *Scratch) Of(tokens []core.TokenID, promptLen int, processed []bool, index int) Result {
	k := key(tokens, processed, index)
	if r, ok := sc.cache[k]; ok {
		return r
	}
	t := sc.t
	t.Helper()
	st, err := sc.model.NewState()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	forward := func(toks []core.TokenID) []float32 {
		items := []core.ForwardItem{{State: st, Tokens: toks}}
		if err := sc.model.Forward(context.Background(), items); err != nil {
			t.Fatal(err)
		}
		return slices.Clone(items[0].Logits[0])
	}
	chain := make([]core.LogitsProcessor, len(sc.chain))
	for i, p := range sc.chain {
		if sp, ok := p.(core.StatefulProcessor); ok {
			chain[i] = sp.Clone()
		} else {
			chain[i] = p
		}
	}
	view := func(n int) *core.Sequence {
		q, err := core.NewSequence(tokens[:n], promptLen, core.SequenceOptions{Tokenizer: sc.tok, Seed: sc.seed, Index: index})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	process := func(row []float32, n int) *core.Candidates {
		c := core.NewCandidates(slices.Clone(row))
		q := view(n)
		for _, p := range chain {
			if err := p.Process(q, c); err != nil {
				t.Fatalf("scratch: %s: %v", p.Name(), err)
			}
		}
		return c
	}
	var res Result
	row := forward(tokens[:promptLen])
	for g := 0; g < len(tokens)-promptLen; g++ {
		n := promptLen + g
		res.Rows = append(res.Rows, row)
		if processed[g] {
			process(row, n)
		}
		q := view(n + 1)
		for _, p := range chain {
			if sp, ok := p.(core.StatefulProcessor); ok {
				sp.Accept(q, tokens[n])
			}
		}
		row = forward(tokens[n : n+1])
	}
	res.Row = row
	res.Cands.CopyFrom(process(row, len(tokens)))
	sc.cache[k] = res
	return res
}

// SameCandidates reports how two candidate sets differ ("" when they hold the same ids with
// the same logits, bit for bit).
func SameCandidates(got, want *core.Candidates) string {
	var g, w core.Candidates
	g.CopyFrom(got)
	w.CopyFrom(want)
	gi, wi := slices.Clone(g.Items()), slices.Clone(w.Items())
	byID := func(a, b core.Candidate) int { return int(a.ID) - int(b.ID) }
	slices.SortFunc(gi, byID)
	slices.SortFunc(wi, byID)
	gi = slices.DeleteFunc(gi, func(c core.Candidate) bool { return math.IsInf(float64(c.Logit), -1) })
	wi = slices.DeleteFunc(wi, func(c core.Candidate) bool { return math.IsInf(float64(c.Logit), -1) })
	if len(gi) != len(wi) {
		return fmt.Sprintf("%d candidates, want %d", len(gi), len(wi))
	}
	for i := range gi {
		if gi[i].ID != wi[i].ID || math.Float32bits(gi[i].Logit) != math.Float32bits(wi[i].Logit) {
			return fmt.Sprintf("candidate %d: got %d:%v, want %d:%v", i, gi[i].ID, gi[i].Logit, wi[i].ID, wi[i].Logit)
		}
	}
	return ""
}

// SameRow reports how two rows differ ("" when equal bit for bit).
func SameRow(got, want []float32) string {
	if len(got) != len(want) {
		return fmt.Sprintf("row of %d logits, want %d", len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return fmt.Sprintf("logit %d = %v, want %v", i, got[i], want[i])
		}
	}
	return ""
}
