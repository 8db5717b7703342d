package stopping_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/stopping"
	"github.com/loomlm/loom/strategies"
	"github.com/loomlm/loom/testmodel"
)

// script forces the generated words, one per step, by banning every other token.
func script(t *testing.T, tok core.Tokenizer, text string) core.LogitsProcessor {
	ids, err := tok.Encode(text, core.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return core.ProcessorFunc(func(seq *core.Sequence, c *core.Candidates) error {
		next := ids[seq.NumGenerated()%len(ids)]
		row := c.Dense()
		for i := range row {
			if core.TokenID(i) != next {
				row[i] = float32(math.Inf(-1))
			}
		}
		return nil
	})
}

func run(t *testing.T, words string, max int, crit ...core.StoppingCriterion) (*core.Result, string) {
	t.Helper()
	m, tok := testmodel.Default()
	p := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{},
		Processors: []core.LogitsProcessor{script(t, tok, words)}, Stopping: crit}
	var streamed strings.Builder
	res, err := core.Generate(context.Background(), p, core.Request{Prompt: "the", MaxNewTokens: max,
		OnEvent: func(ev core.Event) error { streamed.WriteString(ev.Text); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return res, streamed.String()
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestCriteria(t *testing.T) {
	cases := []struct {
		name       string
		words      string
		crit       core.StoppingCriterion
		wantText   string
		wantTokens int
		wantReason core.FinishReason
	}{
		{"max new tokens", "the cat sat on the mat", must(stopping.NewMaxNewTokens(3)), " the cat sat", 3, core.FinishLength},
		{"stop token", "the cat sat on the mat", must(stopping.NewStopTokens([]int{5, 6}, 59)), " the cat sat", 3, core.FinishStopToken}, // "on" is 8? checked below
		{"stop string inside one token", "the cat sat on the mat", must(stopping.NewStopStrings([]string{"sat"}, false)), " the cat ", 3, core.FinishStopString},
		{"stop string across tokens", "the cat sat on the mat", must(stopping.NewStopStrings([]string{"cat sat o"}, false)), " the ", 4, core.FinishStopString},
		{"stop string kept", "the cat sat on the mat", must(stopping.NewStopStrings([]string{"cat sat o"}, true)), " the cat sat o", 4, core.FinishStopString},
		{"earliest of several stop strings", "the cat sat on the mat", must(stopping.NewStopStrings([]string{"on the", " sat on"}, false)), " the cat", 4, core.FinishStopString},
		{"no match runs to the limit", "the cat sat", must(stopping.NewStopStrings([]string{"dog"}, false)), " the cat sat the cat", 5, core.FinishLength},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "stop token" {
				_, tok := testmodel.Default()
				ids, _ := tok.Encode("on", core.EncodeOptions{})
				c.crit = must(stopping.NewStopTokens([]int{int(ids[0])}, 59))
				c.wantText, c.wantTokens = " the cat sat on", 4
			}
			res, streamed := run(t, c.words, 5, c.crit)
			s := res.Sequences[0]
			if s.Text != c.wantText || len(s.Tokens) != c.wantTokens || s.FinishReason != c.wantReason {
				t.Errorf("got %q, %d tokens, %q; want %q, %d tokens, %q", s.Text, len(s.Tokens), s.FinishReason, c.wantText, c.wantTokens, c.wantReason)
			}
			if streamed != s.Text {
				t.Errorf("streamed %q, result %q", streamed, s.Text)
			}
		})
	}
}

// TestStreamingNeverShowsStopString checks the hold-back: no event shows text past the cut.
func TestStreamingNeverShowsStopString(t *testing.T) {
	m, tok := testmodel.Default()
	stop := must(stopping.NewStopStrings([]string{"sat on the"}, false))
	p := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{},
		Processors: []core.LogitsProcessor{script(t, tok, "the cat sat on the mat")}, Stopping: []core.StoppingCriterion{stop}}
	var shown strings.Builder
	_, err := core.Generate(context.Background(), p, core.Request{Prompt: "the", MaxNewTokens: 10,
		OnEvent: func(ev core.Event) error {
			shown.WriteString(ev.Text)
			if strings.Contains(shown.String(), "sat") {
				t.Errorf("streamed %q: the start of the stop string was shown", shown.String())
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if shown.String() != " the cat " {
		t.Errorf("streamed %q, want %q", shown.String(), " the cat ")
	}
}

func TestEachSequenceStopsOnItsOwn(t *testing.T) {
	m, tok := testmodel.Default()
	// Sequence 0 writes "the cat sat ...", sequence 1 "cat sat ..."; a stop on "the" ends only
	// sequence 0 at its first token.
	scripts := [][]core.TokenID{}
	for _, s := range []string{"the cat sat on", "cat sat on it"} {
		ids, _ := tok.Encode(s, core.EncodeOptions{})
		scripts = append(scripts, ids)
	}
	force := core.ProcessorFunc(func(seq *core.Sequence, c *core.Candidates) error {
		next := scripts[seq.Index()][seq.NumGenerated()%4]
		for i := range c.Dense() {
			if core.TokenID(i) != next {
				c.Dense()[i] = float32(math.Inf(-1))
			}
		}
		return nil
	})
	p := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Ancestral{}, Processors: []core.LogitsProcessor{force},
		Stopping: []core.StoppingCriterion{must(stopping.NewStopStrings([]string{"the"}, false))}}
	res, err := core.Generate(context.Background(), p, core.Request{Prompt: "a", MaxNewTokens: 6, N: 2, Seed: core.SeedOf(1)})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Sequences[0]; len(got.Tokens) != 1 || got.FinishReason != core.FinishStopString || got.Text != " " {
		t.Errorf("sequence 0: %d tokens %q %q, want 1 token, stop_string, \" \"", len(got.Tokens), got.FinishReason, got.Text)
	}
	if got := res.Sequences[1]; len(got.Tokens) != 6 || got.FinishReason != core.FinishLength {
		t.Errorf("sequence 1: %d tokens %q, want 6, length", len(got.Tokens), got.FinishReason)
	}
}

func TestMaxTime(t *testing.T) {
	m, tok := testmodel.Default()
	slow := core.ProcessorFunc(func(*core.Sequence, *core.Candidates) error { time.Sleep(20 * time.Millisecond); return nil })
	p := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{}, Processors: []core.LogitsProcessor{slow},
		Stopping: []core.StoppingCriterion{must(stopping.NewMaxTime(0.05))}}
	res, err := core.Generate(context.Background(), p, core.Request{Prompt: "the", MaxNewTokens: 1000, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Sequences[0]
	if s.FinishReason != core.FinishTime || len(s.Tokens) >= 1000 {
		t.Errorf("finish %q after %d tokens, want time before 1000", s.FinishReason, len(s.Tokens))
	}
}

func TestValidation(t *testing.T) {
	cases := []struct {
		name string
		err  error
	}{
		{"max_new_tokens 0", second(stopping.NewMaxNewTokens(0))},
		{"stop tokens empty", second(stopping.NewStopTokens(nil, 10))},
		{"stop token outside vocab", second(stopping.NewStopTokens([]int{10}, 10))},
		{"eos negative", second(stopping.NewEOS([]int{-1}, 10))},
		{"stop strings empty", second(stopping.NewStopStrings(nil, false))},
		{"empty stop string", second(stopping.NewStopStrings([]string{""}, false))},
		{"max time zero", second(stopping.NewMaxTime(0))},
		{"max time NaN", second(stopping.NewMaxTime(math.NaN()))},
	}
	for _, c := range cases {
		if _, ok := c.err.(*core.ParamError); !ok {
			t.Errorf("%s: err = %v, want a *core.ParamError", c.name, c.err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func ExampleNewStopStrings() {
	m, tok := testmodel.Default()
	stop, _ := stopping.NewStopStrings([]string{"garden"}, false)
	p := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{}, Stopping: []core.StoppingCriterion{stop}}
	res, _ := core.Generate(context.Background(), p, core.Request{Prompt: "the cat", MaxNewTokens: 40, IgnoreEOS: true})
	s := res.Sequences[0]
	fmt.Printf("%q (%s)\n", s.Text, s.FinishReason)
	// Output: " under and slowly to saw " (stop_string)
}
