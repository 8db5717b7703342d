package core_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/sessiontest"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/models"
	"github.com/loomlm/loom/processors"
)

// The property test drives random interleavings of every Session primitive on several
// sequences of one request — Start, Fork, ForkCopy, Forward, Process, ProcessBatch, Greedy,
// Sample, Append, Truncate, Discard, Finish — and checks every row, every processed candidate
// set, every chosen token and every recorded detail against recomputing that sequence from
// scratch: a fresh model state fed the sequence's tokens, a fresh clone of the pipeline's
// processors replayed over them, and the sequence's own random stream. The model is the
// embedded draft transformer, whose rows do not depend on batching or caching, so the
// comparison is exact (bit for bit).

var (
	propModelOnce sync.Once
	propModel     *llama.Model
	propTok       core.Tokenizer
	propModelErr  error
)

func loadPropModel(t *testing.T) (*llama.Model, core.Tokenizer) {
	t.Helper()
	propModelOnce.Do(func() {
		var m *llama.Model
		m, tok, err := models.Open("draft", llama.Options{KVBudget: 64 << 20})
		propModel, propTok, propModelErr = m, tok, err
	})
	if propModelErr != nil {
		t.Fatal(propModelErr)
	}
	return propModel, propTok
}

// propPipelines are processor chains with stateless and stateful parts: penalties (which
// recount after a Truncate), DRY (reads its window), mirostat (whose μ follows the
// distributions it saw and is restored from snapshots).
func propPipelines(t *testing.T, tok core.Tokenizer, vocab int) map[string][]core.LogitsProcessor {
	t.Helper()
	must := func(p core.LogitsProcessor, err error) core.LogitsProcessor {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	return map[string][]core.LogitsProcessor{
		"penalties-temperature-topk-topp": {
			must(processors.NewPenalties(1.3, 0.2, 0.1, processors.Window{Scope: processors.ScopeAll, LastN: 8})),
			must(processors.NewTemperature(0.9)),
			must(processors.NewTopK(20)),
			must(processors.NewTopP(0.9, 1)),
		},
		"dry-mirostat": {
			must(processors.NewDRY(processors.DRYConfig{Multiplier: 0.8, Base: 1.75, AllowedLength: 1, LastN: -1, SequenceBreakers: processors.DefaultSequenceBreakers}, tok)),
			must(processors.NewFrequencyPenalty(0.5, processors.Window{Scope: processors.ScopeGenerated, LastN: 6})),
			must(processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: 3, Eta: 0.3, VocabSize: vocab})),
		},
	}
}

// refSeq is what the test knows of a sequence, independently of the session.
type refSeq struct {
	q         *core.Sequence
	tokens    []core.TokenID
	promptLen int
	// processed[g] says whether the step that chose generated token g was processed before the
	// token was appended (a stateful processor saw that distribution).
	processed []bool
	hasRow    bool // forwarded since the last Append or Truncate
	procNow   bool // the current row has been processed
	draws     int  // Sample calls made on this sequence's stream
	finished  bool
}

const (
	propMaxNew = 14
	propOps    = 200
)

func TestSessionPrimitivesMatchRecomputation(t *testing.T) {
	model, tok := loadPropModel(t)
	vocab := model.Config().VocabSize
	var seeds []uint64
	for seed := range uint64(24) {
		seeds = append(seeds, seed+1)
	}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for name, chain := range propPipelines(t, tok, vocab) {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", name, seed), func(t *testing.T) {
				runProperty(t, model, tok, chain, seed)
			})
		}
	}
}

func runProperty(t *testing.T, model *llama.Model, tok core.Tokenizer, chain []core.LogitsProcessor, seed uint64) {
	pipe := &core.Pipeline{Model: model, Tokenizer: tok, Processors: chain}
	sc := sessiontest.NewScratch(t, model, tok, chain, seed)
	eog := tok.Special().EndOfGeneration
	rng := rand.New(rand.NewPCG(seed, 99))
	var refs []*refSeq
	appended := 0
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("after %s:\n"+format, append([]any{strings.Join(log, "\n")}, args...)...)
	}
	pick := func() *refSeq { return refs[rng.IntN(len(refs))] }

	// checkRow compares a sequence's current row with recomputation.
	checkRow := func(r *refSeq) {
		t.Helper()
		want := sc.Of(r.tokens, r.promptLen, r.processed, r.q.Index())
		if d := sessiontest.SameRow(r.q.Logits(), want.Row); d != "" {
			fail("sequence %d (%d tokens): %s", r.q.Index(), len(r.tokens), d)
		}
	}
	checkCands := func(r *refSeq, c *core.Candidates) {
		t.Helper()
		want := sc.Of(r.tokens, r.promptLen, r.processed, r.q.Index())
		if d := sessiontest.SameCandidates(c, &want.Cands); d != "" {
			fail("sequence %d (%d tokens) processed: %s", r.q.Index(), len(r.tokens), d)
		}
	}
	// choose selects a token for r as the session does, and checks it against recomputation.
	choose := func(s *core.Session, r *refSeq, c *core.Candidates) core.Choice {
		t.Helper()
		want := sc.Of(r.tokens, r.promptLen, r.processed, r.q.Index())
		if rng.IntN(2) == 0 {
			ch, err := s.Greedy(r.q, c)
			if err != nil {
				fail("greedy: %v", err)
			}
			id, _ := want.Cands.Argmax()
			log = append(log, fmt.Sprintf("Greedy(%d) = %d", r.q.Index(), ch.ID))
			if ch.ID != id {
				fail("greedy chose %d, recomputation %d", ch.ID, id)
			}
			return ch
		}
		ch, err := s.Sample(r.q, c)
		if err != nil {
			fail("sample: %v", err)
		}
		stream := core.NewRand(seed, r.q.Index())
		var u float64
		for range r.draws + 1 {
			u = stream.Float64()
		}
		r.draws++
		wantCh, err := core.SampleFrom(&want.Cands, u)
		if err != nil {
			fail("scratch sample: %v", err)
		}
		log = append(log, fmt.Sprintf("Sample(%d) = %d", r.q.Index(), ch.ID))
		if ch != wantCh {
			fail("sample chose %+v, recomputation %+v", ch, wantCh)
		}
		return ch
	}
	appendTo := func(s *core.Session, r *refSeq, ch core.Choice) {
		t.Helper()
		if err := s.Append(r.q, ch); err != nil {
			fail("append: %v", err)
		}
		appended++
		r.processed = append(r.processed, r.procNow)
		r.tokens = append(r.tokens, ch.ID)
		r.hasRow, r.procNow = false, false
		wantFinish := slices.Contains(eog, ch.ID) || len(r.tokens)-r.promptLen >= propMaxNew
		if r.q.Finished() != wantFinish {
			fail("sequence %d finished = %v (%s) after %d, want %v", r.q.Index(), r.q.Finished(), r.q.FinishReason(), ch.ID, wantFinish)
		}
		r.finished = wantFinish
	}

	strategy := core.StrategyFunc(func(ctx context.Context, s *core.Session) error {
		seqs, err := s.Start(2)
		if err != nil {
			return err
		}
		for _, q := range seqs {
			refs = append(refs, &refSeq{q: q, tokens: slices.Clone(q.Tokens()), promptLen: q.PromptLen(), hasRow: true})
		}
		log = append(log, "Start(2)")
		for op := 0; op < propOps && len(refs) > 0; op++ {
			r := pick()
			switch k := rng.IntN(20); {
			case k < 2: // Fork or ForkCopy
				if len(refs) >= 6 {
					continue
				}
				var f *core.Sequence
				if k == 0 {
					f, err = s.Fork(r.q)
					log = append(log, fmt.Sprintf("Fork(%d) = %d", r.q.Index(), f.Index()))
				} else {
					f, err = s.ForkCopy(r.q)
					log = append(log, fmt.Sprintf("ForkCopy(%d) = %d", r.q.Index(), f.Index()))
				}
				if err != nil {
					fail("fork: %v", err)
				}
				nr := &refSeq{q: f, tokens: slices.Clone(r.tokens), promptLen: r.promptLen, processed: slices.Clone(r.processed),
					hasRow: r.hasRow, procNow: r.procNow, finished: r.finished}
				refs = append(refs, nr)
				if nr.procNow && !nr.finished {
					c, err := s.Process(f)
					if err != nil {
						fail("process fork: %v", err)
					}
					checkCands(nr, c)
				}
			case k < 6: // Forward a random subset (repeats allowed)
				var batch []*core.Sequence
				var rs []*refSeq
				for range 1 + rng.IntN(3) {
					x := pick()
					batch = append(batch, x.q)
					rs = append(rs, x)
				}
				if err := s.Forward(batch...); err != nil {
					fail("forward: %v", err)
				}
				log = append(log, fmt.Sprintf("Forward(%v)", indices(batch)))
				for _, x := range rs {
					if !x.finished && !x.hasRow {
						x.hasRow, x.procNow = true, false
					}
				}
				for _, x := range rs {
					if x.hasRow && !x.procNow && !x.finished {
						checkRow(x)
					}
				}
			case k < 9: // Process or ProcessBatch
				var batch []*core.Sequence
				var rs []*refSeq
				for range 1 + rng.IntN(3) {
					x := pick()
					batch = append(batch, x.q)
					rs = append(rs, x)
				}
				valid := true
				for _, x := range rs {
					valid = valid && x.hasRow && !x.finished
				}
				var cands []*core.Candidates
				if len(batch) == 1 && rng.IntN(2) == 0 {
					var c *core.Candidates
					c, err = s.Process(batch[0])
					cands = []*core.Candidates{c}
				} else {
					cands, err = s.ProcessBatch(batch)
				}
				log = append(log, fmt.Sprintf("Process(%v) valid=%v", indices(batch), valid))
				if valid != (err == nil) {
					fail("process: valid = %v, error %v", valid, err)
				}
				if err == nil {
					for i, x := range rs {
						x.procNow = true
						checkCands(x, cands[i])
					}
				}
			case k < 14: // select (Greedy or Sample) after a Process, and Append
				if r.finished || !r.hasRow {
					if !r.finished && rng.IntN(3) == 0 { // a forced token with no row
						id := core.TokenID(rng.IntN(tok.VocabSize()))
						log = append(log, fmt.Sprintf("Append(%d, forced %d)", r.q.Index(), id))
						appendTo(s, r, core.Choice{ID: id})
					}
					continue
				}
				c, err := s.Process(r.q)
				if err != nil {
					fail("process: %v", err)
				}
				r.procNow = true
				checkCands(r, c)
				ch := choose(s, r, c)
				if rng.IntN(4) == 0 { // a second look at the same row changes nothing
					c2, err := s.Process(r.q)
					if err != nil || c2 != c {
						fail("second process: %v, same set %v", err, c2 == c)
					}
					checkCands(r, c2)
				}
				log = append(log, fmt.Sprintf("Append(%d, %d)", r.q.Index(), ch.ID))
				appendTo(s, r, ch)
			case k < 16: // Truncate
				n := r.promptLen + rng.IntN(len(r.tokens)-r.promptLen+1)
				if err := s.Truncate(r.q, n); err != nil {
					fail("truncate: %v", err)
				}
				log = append(log, fmt.Sprintf("Truncate(%d, %d)", r.q.Index(), n))
				if n < len(r.tokens) {
					r.tokens, r.processed = r.tokens[:n], r.processed[:n-r.promptLen]
					r.hasRow, r.procNow, r.finished = false, false, false
				}
				if !slices.Equal(r.q.Tokens(), r.tokens) || r.q.Finished() != r.finished {
					fail("after truncate: tokens %v finished %v, want %v %v", r.q.Tokens(), r.q.Finished(), r.tokens, r.finished)
				}
			case k < 17: // Discard
				if len(refs) <= 1 {
					continue
				}
				s.Discard(r.q)
				log = append(log, fmt.Sprintf("Discard(%d)", r.q.Index()))
				if _, err := s.Process(r.q); err == nil {
					fail("process of a discarded sequence succeeded")
				}
				if err := s.Forward(r.q); err == nil {
					fail("forward of a discarded sequence succeeded")
				}
				refs = slices.DeleteFunc(refs, func(x *refSeq) bool { return x == r })
			case k < 18: // Finish
				s.Finish(r.q, "custom", "finished by the test")
				log = append(log, fmt.Sprintf("Finish(%d)", r.q.Index()))
				r.finished = true
				if err := s.Append(r.q, core.Choice{ID: 1}); err == nil {
					fail("append to a finished sequence succeeded")
				}
			default: // every live sequence's row and tokens, unprocessed rows bit for bit
				for _, x := range refs {
					if !slices.Equal(x.q.Tokens(), x.tokens) {
						fail("sequence %d tokens %v, want %v", x.q.Index(), x.q.Tokens(), x.tokens)
					}
					if x.hasRow && !x.procNow && !x.finished {
						checkRow(x)
					}
				}
			}
		}
		for _, x := range refs {
			if !x.finished {
				s.Finish(x.q, "custom", "end of the test")
				x.finished = true
			}
		}
		return nil
	})
	pipe.Strategy = strategy
	// What the events stream of each sequence, their retractions applied.
	streamedText := map[int]string{}
	streamedDetails := map[int][]core.TokenLogprobs{}
	promptEvents := map[int][]core.TokenLogprobs{} // each sequence's first event's Prompt
	onEvent := func(ev core.Event) error {
		i := ev.Sequence
		if prompt, seen := promptEvents[i]; !seen {
			if ev.Prompt == nil {
				return fmt.Errorf("sequence %d: its first event lists no prompt", i)
			}
			promptEvents[i] = ev.Prompt
		} else if ev.Prompt != nil || prompt == nil {
			return fmt.Errorf("sequence %d: a later event lists the prompt again", i)
		}
		if ev.Retract > len(streamedText[i]) || ev.RetractTokens > len(streamedDetails[i]) {
			return fmt.Errorf("sequence %d: event retracts %d bytes and %d tokens of %d and %d streamed", i, ev.Retract, ev.RetractTokens, len(streamedText[i]), len(streamedDetails[i]))
		}
		streamedText[i] = streamedText[i][:len(streamedText[i])-ev.Retract] + ev.Text
		streamedDetails[i] = append(streamedDetails[i][:len(streamedDetails[i])-ev.RetractTokens], ev.Logprobs...)
		// A token's details come with or after its text, unless the sequence has finished.
		n := 0
		for _, e := range streamedDetails[i] {
			n += len(tok.TokenBytes(e.Token))
		}
		if !ev.Finished && n > len(streamedText[i]) {
			return fmt.Errorf("sequence %d: details of %d bytes of tokens streamed before their text (%d bytes)", i, n, len(streamedText[i]))
		}
		return nil
	}
	res, err := core.Generate(context.Background(), pipe, core.Request{
		Prompt: "And God said", MaxNewTokens: propMaxNew, Seed: core.SeedOf(seed),
		Return:  core.ReturnOptions{Logprobs: true, TopLogprobs: 3, Trace: 2, PromptLogprobs: true},
		OnEvent: onEvent,
	})
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("PROPLOG") != "" {
		t.Log(strings.Join(log, "\n"))
	}
	if res.GeneratedTokens != appended {
		t.Errorf("generated_tokens = %d, want the %d appended", res.GeneratedTokens, appended)
	}
	// Every sequence's first event listed the prompt's details as the result holds them.
	for i, prompt := range promptEvents {
		if want := res.PromptTokenLogprobs(); len(prompt) != len(want) || len(want) > 0 && !reflect.DeepEqual(prompt, want) {
			t.Errorf("sequence %d: its first event lists the prompt as %+v, Result.PromptTokenLogprobs as %+v", i, prompt, want)
		}
		if len(prompt) != len(res.PromptTokens) || len(res.PromptLogprobs) != len(res.PromptTokens) {
			t.Fatalf("sequence %d: its first event lists %d prompt tokens; the result %d tokens, %d log-probabilities", i, len(prompt), len(res.PromptTokens), len(res.PromptLogprobs))
		}
		for k, e := range prompt {
			if e.Token != res.PromptTokens[k] || e.Logprob != res.PromptLogprobs[k] || !slices.Equal(e.Top, res.PromptTopLogprobs[k]) {
				t.Errorf("sequence %d prompt token %d: event %+v, result %d %v %v", i, k, e, res.PromptTokens[k], res.PromptLogprobs[k], res.PromptTopLogprobs[k])
			}
		}
	}
	// Every returned sequence's recorded details equal the recomputed raw distributions.
	if len(res.Sequences) != len(refs) {
		t.Fatalf("%d sequences returned, want %d", len(res.Sequences), len(refs))
	}
	slices.SortFunc(refs, func(a, b *refSeq) int { return a.q.Index() - b.q.Index() })
	for i, r := range refs {
		got := res.Sequences[i]
		gen := r.tokens[r.promptLen:]
		if !slices.Equal(got.Tokens, gen) {
			t.Fatalf("sequence %d: tokens %v, want %v", i, got.Tokens, gen)
		}
		if len(got.Logprobs) != len(gen) || len(got.TopLogprobs) != len(gen) || len(got.Trace) != len(gen) {
			t.Fatalf("sequence %d: %d logprobs, %d top, %d trace steps for %d tokens", i, len(got.Logprobs), len(got.TopLogprobs), len(got.Trace), len(gen))
		}
		// The events streamed exactly the sequence's text and details.
		if text := streamedText[r.q.Index()]; text != got.Text {
			t.Errorf("sequence %d: events streamed %q, result text %q", i, text, got.Text)
		}
		details := streamedDetails[r.q.Index()]
		if len(details) != len(gen) {
			t.Fatalf("sequence %d: events streamed the details of %d tokens, want %d", i, len(details), len(gen))
		}
		if want := got.TokenLogprobs(); len(details) != len(want) || len(want) > 0 && !reflect.DeepEqual(details, want) {
			t.Errorf("sequence %d: events streamed %+v, SequenceResult.TokenLogprobs %+v", i, details, want)
		}
		for g, e := range details {
			if e.Token != gen[g] || e.Score != got.Scores[g] || e.Logprob != got.Logprobs[g] || !slices.Equal(e.Top, got.TopLogprobs[g]) {
				t.Errorf("sequence %d step %d: streamed %+v, result token %d score %v logprob %v top %v", i, g, e, gen[g], got.Scores[g], got.Logprobs[g], got.TopLogprobs[g])
			}
		}
		want := sc.Of(r.tokens, r.promptLen, r.processed, r.q.Index())
		for g, id := range gen {
			c := core.NewCandidates(slices.Clone(want.Rows[g]))
			_, logZ, err := c.Probs()
			if err != nil {
				t.Fatal(err)
			}
			if lp := want.Rows[g][id] - logZ; got.Logprobs[g] != lp {
				t.Errorf("sequence %d step %d: raw logprob %v, recomputed %v", i, g, got.Logprobs[g], lp)
			}
			if len(got.TopLogprobs[g]) != 3 {
				t.Errorf("sequence %d step %d: %d top logprobs, want 3", i, g, len(got.TopLogprobs[g]))
			} else if top, _ := c.Argmax(); got.TopLogprobs[g][0].ID != top {
				t.Errorf("sequence %d step %d: top token %d, recomputed %d", i, g, got.TopLogprobs[g][0].ID, top)
			}
			stages := 1
			if r.processed[g] {
				stages += len(chain)
			}
			if n := len(got.Trace[g].Stages); n != stages || got.Trace[g].Chosen != id {
				t.Errorf("sequence %d step %d: trace of %d stages choosing %d, want %d choosing %d", i, g, n, got.Trace[g].Chosen, stages, id)
			}
		}
	}
}

func indices(qs []*core.Sequence) []int {
	out := make([]int, len(qs))
	for i, q := range qs {
		out[i] = q.Index()
	}
	return out
}
