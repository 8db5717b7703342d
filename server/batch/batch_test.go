package batch_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
	_ "github.com/loomlm/loom/model/loader" // [model] path = …
	"github.com/loomlm/loom/models"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/server/batch"
)

// samplePipeline builds a sampling pipeline on the embedded default model.
func samplePipeline(t *testing.T) *core.Pipeline { return pipelineOn(t, `builtin = "default"`) }

// pipelineOn builds a sampling pipeline on the model a [model] line declares.
func pipelineOn(t testing.TB, model string) *core.Pipeline {
	t.Helper()
	spec, err := pipeline.Parse("test.toml", []byte(`
[model]
`+model+`
[strategy]
type = "sample"
[[processors]]
type = "temperature"
t = 0.9
[[processors]]
type = "top_p"
p = 0.95
`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := pipeline.Build(spec, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b.Pipeline
}

// request is one test request: a prompt, a seed and a length.
type request struct {
	prompt string
	seed   uint64
	n      int
}

func (r request) core() core.Request {
	return core.Request{Prompt: r.prompt, Seed: core.SeedOf(r.seed), MaxNewTokens: 24, N: r.n, IgnoreEOS: true}
}

func texts(res *core.Result) string {
	var b strings.Builder
	for _, s := range res.Sequences {
		fmt.Fprintf(&b, "[%d %v]", len(s.Tokens), s.Tokens)
	}
	return b.String()
}

// TestBatchedEqualsAlone runs concurrent sessions through the batching wrapper and checks that
// every result equals the same request run alone on the bare model, that steps really merged
// several sessions, and that long prompts were prefilled in chunks.
func TestBatchedEqualsAlone(t *testing.T) {
	p := samplePipeline(t)
	long := strings.Repeat("And God said, Let there be light: and there was light. ", 6)
	reqs := []request{
		{"In the beginning", 1, 1}, {"Call me Ishmael.", 2, 1}, {long, 3, 1}, {"The", 4, 3},
		{"Mr. Speaker,", 5, 1}, {long + "And", 6, 2}, {"Light", 7, 1}, {"In the beginning", 8, 1},
	}
	want := make([]string, len(reqs))
	for i, r := range reqs {
		res, err := core.Generate(context.Background(), p, r.core())
		if err != nil {
			t.Fatal(err)
		}
		want[i] = texts(res)
	}

	// The runs alone left the prompts' blocks in the prefix cache, whose positions a batched
	// prompt would take with its first chunk: forget them, so that the long prompts are
	// computed in chunks again.
	p.Model.(*llama.Model).Cache().DropCached()
	var maxCalls, chunked atomic.Int64
	bm := batch.New(p.Model, batch.Options{ChunkTokens: 16, Window: 5 * time.Millisecond, OnStep: func(s batch.Step) {
		if int64(s.Calls) > maxCalls.Load() {
			maxCalls.Store(int64(s.Calls))
		}
		chunked.Add(int64(s.Partial))
	}})
	defer bm.Close()
	bp := *p
	bp.Model = bm
	var wg sync.WaitGroup
	got := make([]string, len(reqs))
	for i, r := range reqs {
		wg.Add(1)
		leave := bm.Join()
		go func() {
			defer wg.Done()
			defer leave()
			res, err := core.Generate(context.Background(), &bp, r.core())
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = texts(res)
		}()
	}
	wg.Wait()
	for i := range reqs {
		if got[i] != want[i] {
			t.Errorf("request %d batched:\n%s\nalone:\n%s", i, got[i], want[i])
		}
	}
	if maxCalls.Load() < 2 {
		t.Errorf("no step merged two sessions (largest step: %d calls)", maxCalls.Load())
	}
	if chunked.Load() == 0 {
		t.Error("no item advanced by a partial chunk: long prompts were not chunked")
	}
}

// TestErrorFailsOnlyItsCall checks that a call the model refuses (beyond the context length)
// fails alone, with its state unchanged, while the calls batched with it succeed.
func TestErrorFailsOnlyItsCall(t *testing.T) {
	m := openDefault(t, llama.Options{})
	bm := batch.New(m, batch.Options{Window: 50 * time.Millisecond})
	defer bm.Close()
	ctxLen := m.Config().ContextLength
	good, _ := bm.NewState()
	defer good.Close()
	bad, _ := bm.NewState()
	defer bad.Close()
	leaveA, leaveB := bm.Join(), bm.Join()
	defer leaveA()
	defer leaveB()
	var wg sync.WaitGroup
	var goodErr, badErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		goodErr = bm.Forward(context.Background(), []core.ForwardItem{{State: good, Tokens: []core.TokenID{1, 2, 3}}})
	}()
	go func() {
		defer wg.Done()
		badErr = bm.Forward(context.Background(), []core.ForwardItem{{State: bad, Tokens: make([]core.TokenID, ctxLen+1)}})
	}()
	wg.Wait()
	if goodErr != nil || good.Len() != 3 {
		t.Errorf("good call: err %v, len %d", goodErr, good.Len())
	}
	if badErr == nil || !strings.Contains(badErr.Error(), "context length") || bad.Len() != 0 {
		t.Errorf("bad call: err %v, len %d; want a context-length error and length 0", badErr, bad.Len())
	}
}

// TestCancelWhileWaiting checks that a call whose context ends before its step returns the
// context's error and leaves its state alone, and that Forward after Close fails.
func TestCancelWhileWaiting(t *testing.T) {
	m := openDefault(t, llama.Options{})
	bm := batch.New(m, batch.Options{Window: time.Hour})
	st, _ := bm.NewState()
	defer st.Close()
	leave := bm.Join()
	defer leave()
	_ = bm.Join() // a second session that never calls: the step waits for it
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := bm.Forward(ctx, []core.ForwardItem{{State: st, Tokens: []core.TokenID{1}}}); err != context.DeadlineExceeded {
		t.Errorf("err = %v, want %v", err, context.DeadlineExceeded)
	}
	if st.Len() != 0 {
		t.Errorf("state advanced to %d", st.Len())
	}
	bm.Close()
	if err := bm.Forward(context.Background(), []core.ForwardItem{{State: st, Tokens: []core.TokenID{1}}}); err == nil {
		t.Error("Forward after Close succeeded")
	}
}

// TestSharedPromptsWaitForTheFirst sends four prompts at once, three of them beginning with
// the same 48 tokens (a system prompt of three cache blocks): the first of those three is
// prefilled with the unrelated prompt, the other two wait for it and then take the shared
// blocks from the prefix cache; every prompt's logits are those of its prefill alone. Two
// prompts sent later with the same beginning go together: it is in the cache already.
func TestSharedPromptsWaitForTheFirst(t *testing.T) {
	m := openDefault(t, llama.Options{})
	alone := openDefault(t, llama.Options{NoPrefixCache: true})
	system := make([]core.TokenID, 48)
	for i := range system {
		system[i] = core.TokenID(300 + i*37%2000)
	}
	prompts := [][]core.TokenID{
		append(slices.Clone(system), 11, 12, 13),
		append(slices.Clone(system), 21, 22),
		append(slices.Clone(system), 31, 32, 33, 34),
		{41, 42, 43, 44, 45, 46, 47, 48, 49, 50},
	}
	var mu sync.Mutex
	var steps []batch.Step
	bm := batch.New(m, batch.Options{Window: time.Second, OnStep: func(s batch.Step) {
		mu.Lock()
		steps = append(steps, s)
		mu.Unlock()
	}})
	defer bm.Close()
	// send runs a Forward of each prompt at once, every session joined before any calls.
	send := func(prompts [][]core.TokenID) [][]core.ForwardItem {
		items := make([][]core.ForwardItem, len(prompts))
		leaves := make([]func(), len(prompts))
		for i, p := range prompts {
			st, _ := bm.NewState()
			t.Cleanup(func() { st.Close() })
			items[i] = []core.ForwardItem{{State: st, Tokens: p}}
			leaves[i] = bm.Join()
		}
		var wg sync.WaitGroup
		for i := range prompts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer leaves[i]()
				if err := bm.Forward(context.Background(), items[i]); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		return items
	}
	items := send(prompts)
	if len(steps) != 2 || steps[0].Calls != 2 || steps[1].Calls != 2 {
		t.Errorf("steps %+v: want the first shared prompt with the unrelated one, then the other two", steps)
	}
	if got, want := m.Cache().Stats().ReusedTokens, int64(2*len(system)); got < want {
		t.Errorf("%d positions taken from the prefix cache, want at least %d (the system prompt for two prompts)", got, want)
	}
	// Later prompts beginning the same way find the system prompt cached: none waits.
	steps = nil
	send([][]core.TokenID{append(slices.Clone(system), 61), append(slices.Clone(system), 62)})
	if len(steps) != 1 || steps[0].Calls != 2 {
		t.Errorf("steps %+v: want the two later prompts in one step", steps)
	}
	for i, p := range prompts {
		st, _ := alone.NewState()
		defer st.Close()
		ref := []core.ForwardItem{{State: st, Tokens: p}}
		if err := alone.Forward(context.Background(), ref); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(items[i][0].Logits[0], ref[0].Logits[0]) {
			t.Errorf("prompt %d: logits differ from its prefill alone", i)
		}
	}
}

// TestCachedPrefixRidesWithChunk prefills a 64-token prompt in chunks of 16 (four steps), then
// a prompt beginning with it: the 64 positions the prefix cache holds go with its first chunk,
// so it takes one step, and its logits are those of its prefill alone.
func TestCachedPrefixRidesWithChunk(t *testing.T) {
	m := openDefault(t, llama.Options{})
	var steps []batch.Step
	bm := batch.New(m, batch.Options{ChunkTokens: 16, OnStep: func(s batch.Step) { steps = append(steps, s) }})
	defer bm.Close()
	first := make([]core.TokenID, 64)
	for i := range first {
		first[i] = core.TokenID(300 + i*37%2000)
	}
	second := append(slices.Clone(first), 5, 6, 7, 8, 9, 10, 11, 12, 13, 14)
	forward := func(toks []core.TokenID) []float32 {
		st, _ := bm.NewState()
		t.Cleanup(func() { st.Close() })
		items := []core.ForwardItem{{State: st, Tokens: toks}}
		if err := bm.Forward(context.Background(), items); err != nil {
			t.Fatal(err)
		}
		return items[0].Logits[0]
	}
	forward(first)
	if len(steps) != 4 {
		t.Fatalf("the first prompt took %d steps, want 4 chunks of 16", len(steps))
	}
	steps = nil
	got := forward(second)
	if len(steps) != 1 || steps[0].Partial != 0 {
		t.Errorf("steps %+v: want the second prompt in one step, its 64 cached positions with its chunk", steps)
	}
	alone := openDefault(t, llama.Options{NoPrefixCache: true})
	st, _ := alone.NewState()
	defer st.Close()
	ref := []core.ForwardItem{{State: st, Tokens: second}}
	if err := alone.Forward(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, ref[0].Logits[0]) {
		t.Error("the second prompt's logits differ from its prefill alone")
	}
}

// TestCancelWhileHeldBack cancels a prompt while it waits for an earlier prompt with the same
// beginning: it returns the context's error with its state unchanged, and the earlier prompt
// completes. The second prompt is sent after the first one's first chunk (so that the first
// leads) and cancelled after the second chunk, which it was held back from.
func TestCancelWhileHeldBack(t *testing.T) {
	m := openDefault(t, llama.Options{})
	system := make([]core.TokenID, 64)
	for i := range system {
		system[i] = core.TokenID(300 + i*37%2000)
	}
	first, _ := m.NewState()
	defer first.Close()
	second, _ := m.NewState()
	defer second.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var errB error
	var bm *batch.Model
	steps := 0
	bm = batch.New(m, batch.Options{ChunkTokens: 16, Window: time.Second, OnStep: func(s batch.Step) {
		switch steps++; steps {
		case 1: // the first prompt's first chunk: the second prompt joins and is sent
			leave := bm.Join()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer leave()
				errB = bm.Forward(ctx, []core.ForwardItem{{State: second, Tokens: append(slices.Clone(system), 2)}})
			}()
		case 2: // the second chunk went without it: it is held back, and now cancelled
			if s.Calls != 1 {
				t.Errorf("step 2 carried %d calls, want the first prompt's alone", s.Calls)
			}
			cancel()
		}
	}})
	defer bm.Close()
	leave := bm.Join()
	errA := bm.Forward(context.Background(), []core.ForwardItem{{State: first, Tokens: append(slices.Clone(system), 1)}})
	leave()
	wg.Wait()
	if errA != nil || first.Len() != len(system)+1 {
		t.Errorf("first prompt: err %v, length %d", errA, first.Len())
	}
	if errB != context.Canceled || second.Len() != 0 {
		t.Errorf("held-back prompt: err %v, length %d; want %v and length 0", errB, second.Len(), context.Canceled)
	}
}

// openDefault opens the embedded default model with opts, closed when the test ends.
func openDefault(t testing.TB, opts llama.Options) *llama.Model {
	t.Helper()
	m, _, err := models.Open("default", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
