package strategies_test

import (
	"slices"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/models"
	"github.com/loomlm/loom/processors"
	"github.com/loomlm/loom/strategies"
)

// Beams forked mid-search carry the raw details of the step they were forked at: every step of
// every returned beam has the model's log-probability of its token (checked against a fresh
// forward of the beam's tokens), its top logprobs and its trace; generated_tokens counts the
// tokens appended, not the ones each fork inherited.
func TestBeamDetailsAfterForks(t *testing.T) {
	m, tok, err := models.Open("draft", llama.Options{KVBudget: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	const maxNew = 16
	b := mustBeam(t, strategies.BeamConfig{NumBeams: 4, NumReturn: 3, LengthPenalty: 1, NoRepeatNGram: 3})
	pen, err := processors.NewRepetitionPenalty(1.2, processors.Window{LastN: 16})
	if err != nil {
		t.Fatal(err)
	}
	res := generate(t, m, tok, b, core.Request{Prompt: "In the beginning", MaxNewTokens: maxNew,
		Return: core.ReturnOptions{Logprobs: true, TopLogprobs: 2, Trace: 2}}, pen)
	if len(res.Sequences) != 3 {
		t.Fatalf("%d sequences, want 3", len(res.Sequences))
	}
	// At most num_beams tokens are appended per step (one per live beam).
	if res.GeneratedTokens > 4*maxNew || res.GeneratedTokens < maxNew {
		t.Fatalf("generated_tokens = %d for 4 beams of at most %d tokens", res.GeneratedTokens, maxNew)
	}
	for i, s := range res.Sequences {
		toks := append(slices.Clone(res.PromptTokens), s.Tokens...)
		st, err := m.NewState()
		if err != nil {
			t.Fatal(err)
		}
		items := []core.ForwardItem{{State: st, Tokens: toks, AllLogits: true}}
		if err := m.Forward(t.Context(), items); err != nil {
			t.Fatal(err)
		}
		for g, id := range s.Tokens {
			row := items[0].Logits[len(res.PromptTokens)-1+g]
			_, logZ, err := core.NewCandidates(slices.Clone(row)).Probs()
			if err != nil {
				t.Fatal(err)
			}
			if want := row[id] - logZ; s.Logprobs[g] != want {
				t.Errorf("sequence %d step %d: raw logprob %v, want %v", i, g, s.Logprobs[g], want)
			}
			if len(s.TopLogprobs[g]) != 2 {
				t.Errorf("sequence %d step %d: %d top logprobs", i, g, len(s.TopLogprobs[g]))
			}
			if n := len(s.Trace[g].Stages); n != 2 { // model, repetition_penalty
				t.Errorf("sequence %d step %d: %d trace stages, want 2", i, g, n)
			}
		}
		st.Close()
	}
}

// A temperature of 0 in a beam pipeline does not collapse the beams to greedy decoding or
// leave a beam with no candidate once no_repeat_ngram_size bans its argmax: beam search
// without sampling does not apply it, so the result equals the search without it.
func TestBeamIgnoresGreedyTemperature(t *testing.T) {
	m, tok, err := models.Open("draft", llama.Options{KVBudget: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	zero, err := processors.NewTemperature(0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strategies.BeamConfig{NumBeams: 4, NumReturn: 2, LengthPenalty: 1, NoRepeatNGram: 3}
	req := core.Request{Prompt: "And it came to pass", MaxNewTokens: 40}
	with := generate(t, m, tok, mustBeam(t, cfg), req, zero)
	without := generate(t, m, tok, mustBeam(t, cfg), req)
	if len(with.Sequences) != 2 {
		t.Fatalf("%d sequences, want 2", len(with.Sequences))
	}
	for i := range with.Sequences {
		if !slices.Equal(with.Sequences[i].Tokens, without.Sequences[i].Tokens) {
			t.Fatalf("sequence %d: %v with t = 0, %v without", i, with.Sequences[i].Tokens, without.Sequences[i].Tokens)
		}
	}
	if slices.Equal(with.Sequences[0].Tokens, with.Sequences[1].Tokens) {
		t.Fatal("the two returned beams are the same")
	}
}
