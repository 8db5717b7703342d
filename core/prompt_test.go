package core_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/models"
	"github.com/loomlm/loom/strategies"
	"github.com/loomlm/loom/testmodel"
)

// TestPromptLogprobsMatchRecomputation checks Return.PromptLogprobs against the prompt fed to
// a fresh state one token at a time: every prompt token's raw log-probability and top tokens,
// bit for bit, whether the prefill keeps its rows in one forward or in chunks of a few
// positions, under strategies that start one sequence, several, or defer their events; and
// each sequence's first event, and only that one, lists them.
func TestPromptLogprobsMatchRecomputation(t *testing.T) {
	model, tok := testmodel.Default()
	vocab := model.Config().VocabSize
	const prompt = "And God said, Let there be light: and there was light. And God saw the light, that it was good"
	ids, err := tok.Encode(prompt, core.EncodeOptions{AddSpecial: true})
	if err != nil {
		t.Fatal(err)
	}
	// The recomputation: row p-1 of a token-by-token pass predicts token p.
	st, err := model.NewState()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	wantLP := make([]float32, len(ids))
	wantTop := make([]core.TokenID, len(ids))
	for p := 1; p < len(ids); p++ {
		items := []core.ForwardItem{{State: st, Tokens: ids[p-1 : p]}}
		if err := model.Forward(context.Background(), items); err != nil {
			t.Fatal(err)
		}
		row := slices.Clone(items[0].Logits[0])
		c := core.NewCandidates(slices.Clone(row))
		_, logZ, err := c.Probs()
		if err != nil {
			t.Fatal(err)
		}
		wantLP[p] = row[ids[p]] - logZ
		wantTop[p], _ = c.Argmax()
	}

	beam, err := strategies.NewBeam(strategies.BeamConfig{NumBeams: 3, NumReturn: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, chunk := range []int{0, 1, 7} {
		if chunk > 0 {
			defer core.SetPromptRowBytes(chunk * 4 * vocab)()
		}
		for _, tc := range []struct {
			name     string
			strategy core.Strategy
			n, max   int
		}{
			{"greedy", strategies.Greedy{}, 1, 4},
			{"sampling n=3", strategies.Ancestral{}, 3, 4},
			{"beam", beam, 1, 4},
			{"no new tokens", strategies.Greedy{}, 1, 0},
		} {
			t.Run(fmt.Sprintf("%s/chunk=%d", tc.name, chunk), func(t *testing.T) {
				p := &core.Pipeline{Model: model, Tokenizer: tok, Strategy: tc.strategy}
				firsts := map[int][]core.TokenLogprobs{}
				seen := map[int]bool{}
				res, err := core.Generate(context.Background(), p, core.Request{
					PromptTokens: ids, MaxNewTokens: tc.max, N: tc.n, Seed: core.SeedOf(3),
					Return: core.ReturnOptions{PromptLogprobs: true, TopLogprobs: 3},
					OnEvent: func(ev core.Event) error {
						if seen[ev.Sequence] && ev.Prompt != nil {
							return fmt.Errorf("sequence %d: a later event lists the prompt again", ev.Sequence)
						}
						if !seen[ev.Sequence] {
							firsts[ev.Sequence] = ev.Prompt
						}
						seen[ev.Sequence] = true
						return nil
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.PromptLogprobs) != len(ids) || len(res.PromptTopLogprobs) != len(ids) {
					t.Fatalf("%d prompt logprobs, %d top lists for %d prompt tokens", len(res.PromptLogprobs), len(res.PromptTopLogprobs), len(ids))
				}
				if res.PromptLogprobs[0] != 0 || res.PromptTopLogprobs[0] != nil {
					t.Errorf("the first prompt token, which nothing predicts: %v %v", res.PromptLogprobs[0], res.PromptTopLogprobs[0])
				}
				for i := 1; i < len(ids); i++ {
					got := res.PromptLogprobs[i]
					if math.Float32bits(got) != math.Float32bits(wantLP[i]) {
						t.Errorf("prompt token %d (%d): logprob %v, recomputed %v", i, ids[i], got, wantLP[i])
					}
					if top := res.PromptTopLogprobs[i]; len(top) != 3 || top[0].ID != wantTop[i] || top[0].Value < got {
						t.Errorf("prompt token %d: top %v, recomputed argmax %d", i, top, wantTop[i])
					}
				}
				if len(firsts) != len(res.Sequences) {
					t.Fatalf("%d sequences had events, %d returned", len(firsts), len(res.Sequences))
				}
				for i, ev := range firsts {
					if len(ev) != len(ids) {
						t.Fatalf("sequence %d: its first event lists %d prompt tokens, want %d", i, len(ev), len(ids))
					}
					for k, e := range ev {
						if e.Token != ids[k] || e.Logprob != res.PromptLogprobs[k] || !slices.Equal(e.Top, res.PromptTopLogprobs[k]) {
							t.Errorf("sequence %d prompt token %d: event %+v, result %d %v %v", i, k, e, ids[k], res.PromptLogprobs[k], res.PromptTopLogprobs[k])
						}
					}
				}
			})
		}
	}
	// Not asked for, not computed.
	res, err := core.Generate(context.Background(), &core.Pipeline{Model: model, Tokenizer: tok, Strategy: strategies.Greedy{}},
		core.Request{PromptTokens: ids, MaxNewTokens: 2, Return: core.ReturnOptions{Logprobs: true, TopLogprobs: 2}})
	if err != nil || res.PromptLogprobs != nil || res.PromptTopLogprobs != nil {
		t.Errorf("without PromptLogprobs: %v, %v, %v", err, res.PromptLogprobs, res.PromptTopLogprobs)
	}
}

// BenchmarkPromptLogprobs times scoring a 200-token prompt (no generation) on the embedded
// model, against its plain prefill: what keeping a row per position and its normaliser costs.
func BenchmarkPromptLogprobs(b *testing.B) {
	model, tok, err := models.Open("default", llama.Options{NoPrefixCache: true}) // every prefill computed
	if err != nil {
		b.Fatal(err)
	}
	defer model.Close()
	text := strings.Repeat("And God saw the light, that it was good: and God divided the light from the darkness. ", 12)
	ids, err := tok.Encode(text, core.EncodeOptions{AddSpecial: true})
	if err != nil || len(ids) < 200 {
		b.Fatal(err, len(ids))
	}
	ids = ids[:200]
	p := &core.Pipeline{Model: model, Tokenizer: tok, Strategy: strategies.Greedy{}}
	for _, scored := range []bool{false, true} {
		b.Run(fmt.Sprintf("prompt_logprobs=%v", scored), func(b *testing.B) {
			for b.Loop() {
				if _, err := core.Generate(context.Background(), p, core.Request{PromptTokens: ids, MaxNewTokens: 0,
					Return: core.ReturnOptions{PromptLogprobs: scored}}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// failingModel fails its forwards from the nth on.
type failingModel struct {
	core.Model
	calls, failFrom int
}

func (m *failingModel) Forward(ctx context.Context, items []core.ForwardItem) error {
	if m.calls++; m.calls >= m.failFrom {
		return fmt.Errorf("forward %d: out of cache", m.calls)
	}
	return m.Model.Forward(ctx, items)
}

// TestPromptLogprobsOfAFailedPrefill: a prefill for PromptLogprobs that fails after some of its
// chunks returns the error and no prompt details, not zeros for the positions never scored.
func TestPromptLogprobsOfAFailedPrefill(t *testing.T) {
	model, tok := testmodel.Default()
	defer core.SetPromptRowBytes(3 * 4 * model.Config().VocabSize)()
	fm := &failingModel{Model: model, failFrom: 3}
	p := &core.Pipeline{Model: fm, Tokenizer: tok, Strategy: strategies.Greedy{}}
	res, err := core.Generate(context.Background(), p, core.Request{Prompt: "And God said, Let there be light: and there was light", MaxNewTokens: 2,
		Return: core.ReturnOptions{PromptLogprobs: true, TopLogprobs: 2}})
	if err == nil || !strings.Contains(err.Error(), "out of cache") {
		t.Fatalf("error %v", err)
	}
	if res != nil && (res.PromptLogprobs != nil || res.PromptTopLogprobs != nil) {
		t.Errorf("a failed prefill returned prompt details %v", res.PromptLogprobs)
	}
}

// TestTokenLogprobsAsEventsCarryThem: SequenceResult.TokenLogprobs and
// Result.PromptTokenLogprobs list what the events list: nothing when the request asked for no
// details, every token when it did.
func TestTokenLogprobsAsEventsCarryThem(t *testing.T) {
	model, tok := testmodel.Default()
	p := &core.Pipeline{Model: model, Tokenizer: tok, Strategy: strategies.Greedy{}}
	for _, ret := range []core.ReturnOptions{{}, {Logprobs: true, PromptLogprobs: true}, {TopLogprobs: 2}} {
		var events, prompt int
		res, err := core.Generate(context.Background(), p, core.Request{Prompt: "And God said", MaxNewTokens: 4, Return: ret,
			OnEvent: func(ev core.Event) error { events += len(ev.Logprobs); prompt += len(ev.Prompt); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(res.Sequences[0].TokenLogprobs()); got != events {
			t.Errorf("%+v: TokenLogprobs has %d entries, the events %d", ret, got, events)
		}
		if got := len(res.PromptTokenLogprobs()); got != prompt {
			t.Errorf("%+v: PromptTokenLogprobs has %d entries, the events %d", ret, got, prompt)
		}
		if want := ret.Logprobs || ret.TopLogprobs > 0; (events > 0) != want {
			t.Errorf("%+v: %d details in the events", ret, events)
		}
	}
}
