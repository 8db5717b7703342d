package models

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/model/loader"
	"github.com/loomlm/loom/processors"
	"github.com/loomlm/loom/strategies"
)

// openWith opens the embedded model name with the loader options of a [model] table.
func openWith(t *testing.T, name string, options map[string]any) (*llama.Model, core.Tokenizer) {
	t.Helper()
	opts, err := loader.ParseOptions(options)
	if err != nil {
		t.Fatal(err)
	}
	m, tok, err := Open(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, tok
}

// concurrentPipelines builds, on one target and one draft model, the pipelines the
// concurrency test runs: greedy, seeded sampling with a stateful processor, beam search and
// speculative decoding.
func concurrentPipelines(t *testing.T, target, draft core.Model, tok core.Tokenizer) map[string]*core.Pipeline {
	t.Helper()
	must := func(p core.LogitsProcessor, err error) core.LogitsProcessor {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	beam, err := strategies.NewBeam(strategies.BeamConfig{NumBeams: 3, NumReturn: 2})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := strategies.NewSpeculative(strategies.SpeculativeConfig{Draft: draft, K: 3})
	if err != nil {
		t.Fatal(err)
	}
	sampling := []core.LogitsProcessor{
		must(processors.NewRepetitionPenalty(1.3, processors.Window{LastN: 32})),
		must(processors.NewTemperature(0.9)),
		must(processors.NewTopP(0.95, 1)),
	}
	return map[string]*core.Pipeline{
		"greedy":      {Model: target, Tokenizer: tok, Strategy: strategies.Greedy{}},
		"sampling":    {Model: target, Tokenizer: tok, Processors: sampling, Strategy: strategies.Ancestral{}},
		"beam":        {Model: target, Tokenizer: tok, Strategy: beam},
		"speculative": {Model: target, Tokenizer: tok, Processors: sampling[1:], Strategy: spec},
	}
}

// concurrentRequests are the requests of the concurrency test: prompts that share a long
// prefix (so that prefix reuse has blocks to share) and differ at the end.
func concurrentRequests() []core.Request {
	const prefix = "In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness was upon the face of the deep."
	var reqs []core.Request
	for i, end := range []string{" And God said", " And the Spirit of God", " Then the people", " The whale"} {
		reqs = append(reqs, core.Request{
			Prompt: prefix + end, MaxNewTokens: 20, Seed: core.SeedOf(uint64(i + 1)), N: 1 + i%2,
			Return: core.ReturnOptions{Logprobs: true},
		})
	}
	return reqs
}

// job is one request of one pipeline; its result is compared by text, tokens and scores.
type job struct {
	pipeline string
	req      core.Request
}

func summary(res *core.Result) string {
	var s string
	for _, seq := range res.Sequences {
		s += fmt.Sprintf("%v %q %v %s|", seq.Tokens, seq.Text, seq.Scores, seq.FinishReason)
	}
	return s
}

// TestConcurrentGenerate runs core.Generate concurrently on one loaded model with prefix reuse
// on — greedy, seeded sampling, beam search and speculative decoding at once, twice over so
// that later requests reuse the blocks earlier ones published — and checks every result
// against the same request run alone on a model that recomputes everything (prefix cache
// off). Run it with -race.
func TestConcurrentGenerate(t *testing.T) {
	// Small blocks give the shared prefix several blocks to reuse. The reference models keep
	// the block size: attention sums block by block, so it fixes the order of the sums.
	options := map[string]any{"prefix_cache": true, "block_size": int64(8)}
	target, tok := openWith(t, "default", options)
	draft, _ := openWith(t, "draft", options)
	recompute := map[string]any{"prefix_cache": false, "block_size": int64(8)}
	refTarget, _ := openWith(t, "default", recompute)
	refDraft, _ := openWith(t, "draft", recompute)

	shared := concurrentPipelines(t, target, draft, tok)
	alone := concurrentPipelines(t, refTarget, refDraft, tok)
	var jobs []job
	for name := range shared {
		for _, req := range concurrentRequests() {
			jobs = append(jobs, job{name, req})
		}
	}
	slices.SortFunc(jobs, func(a, b job) int {
		return strings.Compare(a.pipeline+a.req.Prompt, b.pipeline+b.req.Prompt)
	})

	want := make([]string, len(jobs))
	for i, j := range jobs {
		res, err := core.Generate(context.Background(), alone[j.pipeline], j.req)
		if err != nil {
			t.Fatalf("%s, %q: %v", j.pipeline, j.req.Prompt, err)
		}
		want[i] = summary(res)
	}

	for round := range 2 {
		got := make([]string, len(jobs))
		var wg sync.WaitGroup
		for i, j := range jobs {
			wg.Go(func() {
				res, err := core.Generate(context.Background(), shared[j.pipeline], j.req)
				if err != nil {
					t.Errorf("round %d, %s, %q: %v", round, j.pipeline, j.req.Prompt, err)
					return
				}
				got[i] = summary(res)
			})
		}
		wg.Wait()
		for i, j := range jobs {
			if got[i] != want[i] {
				t.Errorf("round %d, %s, %q:\n concurrent %s\n alone      %s", round, j.pipeline, j.req.Prompt, got[i], want[i])
			}
		}
	}
	if reused := target.Cache().Stats().ReusedTokens; reused == 0 {
		t.Error("no prompt positions were reused: the test did not exercise prefix reuse")
	} else {
		t.Logf("%d prompt positions reused from the prefix cache", reused)
	}
	if st := target.Cache().Stats(); st.InUse != 0 {
		t.Errorf("%d cache blocks still in use after every request finished", st.InUse)
	}
}
