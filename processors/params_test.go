package processors_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/processors"
	"github.com/loomlm/loom/testmodel"
)

const f32 = "3.4028235e+38"

// Every float parameter of every built-in processor is checked when the pipeline is built.
// Those stored as float32 or reaching the logits are bounded by the float32 range: a finite
// float64 beyond it would otherwise validate and fail at the first token as invalid logits.
// Each case is one parameter on line 10 of p.toml (line 11 when a second key comes first).
func TestFloatParametersOutOfRangeNameLineAndField(t *testing.T) {
	cases := []struct{ typ, body, want string }{
		{"temperature", "t = 1e308", "processors[0].t = 1e+308: must be in [1e-30, " + f32 + "] (float32 range; 0 means greedy)"},
		{"temperature", "t = 1e-40", "processors[0].t = 1e-40: must be in [1e-30, " + f32 + "]"},
		{"temperature", "t = \"inf\"", "processors[0].t = +Inf: must be in [1e-30, " + f32 + "]"},
		{"dynamic_temperature", "t = 1e308", "processors[0].t = 1e+308: must be in [1e-30, " + f32 + "]"},
		{"dynamic_temperature", "delta = 1e308", "processors[0].delta = 1e+308: must be in [0, " + f32 + "] (float32 range; 0: plain temperature)"},
		{"dynamic_temperature", "t = 3e38\ndelta = 1e38", "processors[0].delta = 1e+38: t + delta = 4e+38 exceeds the float32 range"},
		{"dynamic_temperature", "exponent = -1.0", "processors[0].exponent = -1: must be a finite number ≥ 0"},
		{"top_p", "p = 1e308", "processors[0].p = 1e+308: must be in [0, 1]"},
		{"min_p", "p = -1e308", "processors[0].p = -1e+308: must be in [0, 1] (0 disables)"},
		{"typical_p", "p = 1e308", "processors[0].p = 1e+308: must be in (0, 1] (1 disables)"},
		{"top_n_sigma", "n = 1e308", "processors[0].n = 1e+308: must be in [0, " + f32 + "] (float32 range; 0 disables)"},
		{"epsilon_cutoff", "epsilon = 1e308", "processors[0].epsilon = 1e+308: must be in (0, 1)"},
		{"eta_cutoff", "epsilon = -1e308", "processors[0].epsilon = -1e+308: must be in (0, 1)"},
		{"xtc", "threshold = 1e308", "processors[0].threshold = 1e+308: must be in (0, 1] (above 0.5 disables)"},
		{"xtc", "probability = 1e308", "processors[0].probability = 1e+308: must be in [0, 1] (0 disables)"},
		{"mirostat", "tau = 1e308", "processors[0].tau = 1e+308: must be in [0, " + f32 + "] (float32 range; bits)"},
		{"mirostat", "eta = 1e308", "processors[0].eta = 1e+308: must be in [0, " + f32 + "] (float32 range)"},
		{"dry", "multiplier = 1e308", "processors[0].multiplier = 1e+308: must be in [0, " + f32 + "] (float32 range; 0 disables)"},
		{"dry", "base = \"inf\"", "processors[0].base = +Inf: must be a finite number ≥ 1"},
		{"penalties", "repeat = 1e308", "processors[0].repeat = 1e+308: must be in [1.1754944e-38, " + f32 + "] (float32 range; 1 disables)"},
		{"penalties", "repeat = 1e-300", "processors[0].repeat = 1e-300: must be in [1.1754944e-38, " + f32 + "]"},
		{"penalties", "frequency = -1e308", "processors[0].frequency = -1e+308: must be in [-" + f32 + ", " + f32 + "] (float32 range; 0 disables)"},
		{"penalties", "presence = -1e308", "processors[0].presence = -1e+308: must be in [-" + f32 + ", " + f32 + "] (float32 range; 0 disables)"},
		{"repetition_penalty", "penalty = 1e308", "processors[0].penalty = 1e+308: must be in [1.1754944e-38, " + f32 + "]"},
		{"frequency_penalty", "penalty = 1e308", "processors[0].penalty = 1e+308: must be in [-" + f32 + ", " + f32 + "]"},
		{"presence_penalty", "penalty = -1e308", "processors[0].penalty = -1e+308: must be in [-" + f32 + ", " + f32 + "]"},
		{"logit_bias", "bias = { \"5\" = 1e308 }", "processors[0].bias.5 = 1e+308: must be in [-" + f32 + ", " + f32 + "] (float32 range; or \"-inf\" to ban)"},
		{"logit_bias", "bias = { \"5\" = \"inf\" }", "processors[0].bias.5 = +Inf: must be in [-" + f32 + ", " + f32 + "]"},
	}
	for _, c := range cases {
		src := "[[processors]]\ntype = \"" + c.typ + "\"\n" + c.body + "\n"
		line := "p.toml:10: "
		if strings.Contains(c.body, "\n") {
			line = "p.toml:11: "
		}
		_, err := buildTOML(t, src)
		if err == nil || !strings.HasPrefix(err.Error(), line+c.want) {
			t.Errorf("%s %s:\n got %v\nwant %s…", c.typ, strings.ReplaceAll(c.body, "\n", "; "), err, line+c.want)
		}
	}
}

// The largest values that validate run: penalties whose product with a count leaves the
// float32 range saturate (upwards) or ban (downwards) instead of producing +Inf or NaN.
func TestExtremeParametersRunWithoutInvalidLogits(t *testing.T) {
	const vocab = 8
	seq := newSeq(t, vocab, []core.TokenID{1, 2, 2, 3}, 3, 3, 4)
	cases := []struct {
		name string
		p    core.LogitsProcessor
	}{
		{"frequency -max", must(processors.NewFrequencyPenalty(-math.MaxFloat32, processors.Window{LastN: processors.WholeHistory}))},
		{"presence -max", must(processors.NewPresencePenalty(-math.MaxFloat32, processors.Window{LastN: processors.WholeHistory}))},
		{"frequency +max", must(processors.NewFrequencyPenalty(math.MaxFloat32, processors.Window{LastN: processors.WholeHistory}))},
		{"all three extreme", must(processors.NewPenalties(0x1p-126, -math.MaxFloat32, -math.MaxFloat32, processors.Window{LastN: processors.WholeHistory}))},
		{"repeat max", must(processors.NewRepetitionPenalty(math.MaxFloat32, processors.Window{LastN: processors.WholeHistory}))},
		{"temperature max", must(processors.NewTemperature(math.MaxFloat32))},
		{"dynamic temperature max", must(processors.NewDynamicTemperature(1e38, 2e38, 1))},
		{"logit bias max", must(processors.NewLogitBias(map[core.TokenID]float64{2: math.MaxFloat32, 5: -math.MaxFloat32}, vocab))},
	}
	row := []float32{1, 2, 3, -4, 5, 0, -1, 2}
	for _, c := range cases {
		for _, f := range forms {
			cands := candidates(row, f)
			if err := c.p.Process(seq, cands); err != nil {
				t.Fatalf("%s %s: %v", c.name, f, err)
			}
			if _, _, err := cands.Probs(); err != nil {
				t.Errorf("%s %s: %v (logits %v)", c.name, f, err, logitsByID(cands, vocab))
			}
		}
	}
	// An encouraging penalty saturates at the largest float32 and a discouraging one bans.
	up := must(processors.NewFrequencyPenalty(-math.MaxFloat32, processors.Window{LastN: processors.WholeHistory}))
	c := candidates(row, dense)
	if err := up.Process(seq, c); err != nil {
		t.Fatal(err)
	}
	if got := c.Dense()[3]; got != math.MaxFloat32 { // token 3 seen three times
		t.Errorf("saturated logit %v, want %v", got, float32(math.MaxFloat32))
	}
	down := must(processors.NewFrequencyPenalty(math.MaxFloat32, processors.Window{LastN: processors.WholeHistory}))
	c = candidates(row, dense)
	if err := down.Process(seq, c); err != nil {
		t.Fatal(err)
	}
	if got := c.Dense()[3]; got != ninf {
		t.Errorf("pushed-down logit %v, want -Inf", got)
	}
}

// last_n: -1 counts the whole scope, 0 disables the penalty, N the last N; anything below -1
// is an error naming the field. The single penalties default to -1, "penalties" to 64.
func TestPenaltyWindowValues(t *testing.T) {
	for _, c := range []struct{ procs, want string }{
		{"[[processors]]\ntype = \"penalties\"\nlast_n = -2\n", "p.toml:10: processors[0].last_n = -2: must be ≥ -1 (-1: the whole scope, 0 disables)"},
		{"[[processors]]\ntype = \"repetition_penalty\"\npenalty = 1.2\nlast_n = -5\n", "p.toml:11: processors[0].last_n = -5: must be ≥ -1 (-1: the whole scope, 0 disables)"},
		{"[[processors]]\ntype = \"dry\"\npenalty_last_n = -2\n", "p.toml:10: processors[0].penalty_last_n = -2: must be ≥ -1 (-1: the whole sequence, 0 disables)"},
	} {
		_, err := buildTOML(t, c.procs)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s…", c.procs, err, c.want)
		}
	}
	// Defaults and explicit values, run on one sequence: a token seen only in the prompt, long
	// ago, is penalised by the whole-history window and not by last_n = 2; last_n = 0 changes
	// nothing.
	seq := newSeq(t, 10, []core.TokenID{7, 1, 2}, 3, 4)
	row := []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	for _, c := range []struct {
		procs     string
		penalised []int
	}{
		{"[[processors]]\ntype = \"presence_penalty\"\npenalty = 0.5\n", []int{1, 2, 3, 4, 7}},
		{"[[processors]]\ntype = \"presence_penalty\"\npenalty = 0.5\nlast_n = -1\n", []int{1, 2, 3, 4, 7}},
		{"[[processors]]\ntype = \"presence_penalty\"\npenalty = 0.5\nlast_n = 2\n", []int{3, 4}},
		{"[[processors]]\ntype = \"presence_penalty\"\npenalty = 0.5\nlast_n = 0\n", nil},
		{"[[processors]]\ntype = \"penalties\"\npresence = 0.5\nlast_n = 0\n", nil},
		{"[[processors]]\ntype = \"penalties\"\npresence = 0.5\n", []int{1, 2, 3, 4, 7}},
		{"[[processors]]\ntype = \"frequency_penalty\"\npenalty = 0.5\nscope = \"generated\"\n", []int{3, 4}},
	} {
		b, err := buildTOML(t, c.procs)
		if err != nil {
			t.Fatal(err)
		}
		cands := candidates(row, dense)
		if err := b.Pipeline.Processors[0].Process(seq, cands); err != nil {
			t.Fatal(err)
		}
		b.Close()
		var got []int
		for id, v := range cands.Dense() {
			if v != 1 {
				got = append(got, id)
			}
		}
		if !slices.Equal(got, c.penalised) {
			t.Errorf("%q: penalised %v, want %v", c.procs, got, c.penalised)
		}
	}
}

// bad_words never bans an end-of-generation token on its own unless exempt_eos = false; a
// longer sequence ending in one still bans it after its prefix.
func TestBadWordsExemptEOS(t *testing.T) {
	b, err := buildTOML(t, "")
	if err != nil {
		t.Fatal(err)
	}
	tok := b.Pipeline.Tokenizer
	vocab := tok.VocabSize()
	b.Close()
	eos := testmodel.EOS
	if !slices.Contains(tok.Special().EndOfGeneration, eos) {
		t.Fatalf("the test model's EOS %d is not among its end-of-generation tokens", eos)
	}
	seq := newSeq(t, vocab, []core.TokenID{9, 10})
	for _, c := range []struct {
		procs  string
		banned []int
	}{
		{"[[processors]]\ntype = \"bad_words\"\nids = [[" + itoa(eos) + "], [7]]\n", []int{7}},
		{"[[processors]]\ntype = \"bad_words\"\nids = [[" + itoa(eos) + "], [7]]\nexempt_eos = true\n", []int{7}},
		{"[[processors]]\ntype = \"bad_words\"\nids = [[" + itoa(eos) + "], [7]]\nexempt_eos = false\n", []int{int(eos), 7}},
		{"[[processors]]\ntype = \"bad_words\"\nids = [[10, " + itoa(eos) + "]]\n", []int{int(eos)}},
		{"[[processors]]\ntype = \"bad_words\"\nids = [[" + itoa(eos) + "]]\n", nil},
	} {
		b, err := buildTOML(t, c.procs)
		if err != nil {
			t.Fatalf("%q: %v", c.procs, err)
		}
		for _, f := range forms {
			row := make([]float32, vocab)
			cands := candidates(row, f)
			if err := b.Pipeline.Processors[0].Process(seq, cands); err != nil {
				t.Fatal(err)
			}
			var banned []int
			for id, v := range logitsByID(cands, vocab) {
				if v == ninf {
					banned = append(banned, id)
				}
			}
			if !slices.Equal(banned, c.banned) {
				t.Errorf("%q %s: banned %v, want %v", c.procs, f, banned, c.banned)
			}
		}
		b.Close()
	}
	_, err = buildTOML(t, "[[processors]]\ntype = \"bad_words\"\nids = [[1]]\nexempt_eos = 1\n")
	if want := "p.toml:11: processors[0].exempt_eos = 1: must be a bool"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v\nwant %s…", err, want)
	}
}

// min_new_tokens bans the tokenizer's end-of-generation tokens, or the eos_token_ids given,
// which are checked against the vocabulary when the pipeline is built.
func TestMinNewTokensEOSTokenIDs(t *testing.T) {
	for _, c := range []struct{ procs, want string }{
		{"[[processors]]\ntype = \"min_new_tokens\"\nn = 2\neos_token_ids = [3, 59]\n", "p.toml:11: processors[0].eos_token_ids[1] = 59: outside the vocabulary [0, 59)"},
		{"[[processors]]\ntype = \"min_new_tokens\"\nn = 2\neos_token_ids = [-1]\n", "p.toml:11: processors[0].eos_token_ids[0] = -1: outside the vocabulary [0, 59)"},
		{"[[processors]]\ntype = \"min_new_tokens\"\nn = 2\neos_token_ids = [4294967296]\n", "p.toml:11: processors[0].eos_token_ids[0] = 4294967296: is not a token id"},
		{"[[processors]]\ntype = \"min_new_tokens\"\nn = 2\neos_token_ids = [\"eos\"]\n", "p.toml:11: processors[0].eos_token_ids = [eos]: must be a list of ints"},
	} {
		_, err := buildTOML(t, c.procs)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s…", c.procs, err, c.want)
		}
	}
	for _, c := range []struct {
		procs  string
		banned []int
	}{
		{"[[processors]]\ntype = \"min_new_tokens\"\nn = 2\n", []int{int(testmodel.EOS)}},
		{"[[processors]]\ntype = \"min_new_tokens\"\nn = 2\neos_token_ids = []\n", []int{int(testmodel.EOS)}},
		{"[[processors]]\ntype = \"min_new_tokens\"\nn = 2\neos_token_ids = [5, 7]\n", []int{5, 7}},
	} {
		b, err := buildTOML(t, c.procs)
		if err != nil {
			t.Fatal(err)
		}
		vocab := b.Pipeline.Tokenizer.VocabSize()
		for generated, want := range [][]int{c.banned, c.banned, nil} {
			seq := newSeq(t, vocab, []core.TokenID{9}, slices.Repeat([]core.TokenID{11}, generated)...)
			cands := candidates(make([]float32, vocab), dense)
			if err := b.Pipeline.Processors[0].Process(seq, cands); err != nil {
				t.Fatal(err)
			}
			var banned []int
			for id, v := range cands.Dense() {
				if v == ninf {
					banned = append(banned, id)
				}
			}
			if !slices.Equal(banned, want) {
				t.Errorf("%q after %d tokens: banned %v, want %v", c.procs, generated, banned, want)
			}
		}
		b.Close()
	}
	// In a generation, the listed token cannot end the text early.
	b, err := buildTOML(t, "[[processors]]\ntype = \"min_new_tokens\"\nn = 6\neos_token_ids = ["+itoa(testmodel.EOS)+"]\n")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	res, err := core.Generate(context.Background(), b.Pipeline, b.Request("the"))
	if err != nil && !errors.Is(err, core.ErrNoCandidates) {
		t.Fatal(err)
	}
	if n := len(res.Sequences[0].Tokens); n < 6 && res.Sequences[0].FinishReason == core.FinishEOS {
		t.Errorf("ended by EOS after %d tokens, min_new_tokens 6", n)
	}
}

func itoa(id core.TokenID) string { return strconv.Itoa(int(id)) }

func ExampleWindow() {
	// last_n = -1 counts the whole sequence, 0 turns the penalty off.
	_, tok := testmodel.Default()
	seq := exampleSequence(tok, []core.TokenID{1, 2, 3})
	for _, lastN := range []int{processors.WholeHistory, 1, 0} {
		p, _ := processors.NewPresencePenalty(1, processors.Window{LastN: lastN})
		c := core.NewCandidates([]float32{0, 0, 0, 0})
		_ = p.Process(seq, c)
		fmt.Println(lastN, c.Dense())
	}
	// Output:
	// -1 [0 -1 -1 -1]
	// 1 [0 0 0 -1]
	// 0 [0 0 0 0]
}

// The new parameters are in the registry, so `loom processors` lists them with their docs.
func TestNewParametersAreRegistered(t *testing.T) {
	for _, c := range []struct {
		typ, param string
		def        any
	}{
		{"top_k", "min_keep", int64(1)},
		{"bad_words", "exempt_eos", true},
		{"min_new_tokens", "eos_token_ids", "[]"},
		{"repetition_penalty", "last_n", int64(-1)},
		{"frequency_penalty", "last_n", int64(-1)},
		{"presence_penalty", "last_n", int64(-1)},
		{"penalties", "last_n", int64(64)},
		{"dry", "penalty_last_n", int64(-1)},
	} {
		part, ok := pipeline.Builtins().Lookup(pipeline.Processor, c.typ)
		if !ok {
			t.Fatalf("%s is not registered", c.typ)
		}
		prm, ok := part.Param(c.param)
		if !ok || prm.Doc == "" {
			t.Errorf("%s.%s: registered %v, with doc %q", c.typ, c.param, ok, prm.Doc)
			continue
		}
		if got := fmt.Sprint(prm.Default); got != fmt.Sprint(c.def) {
			t.Errorf("%s.%s default %s, want %v", c.typ, c.param, got, c.def)
		}
	}
}
