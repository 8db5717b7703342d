package plugins_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/sessiontest"
	_ "github.com/loomlm/loom/models" // the embedded transformers, as [model] builtin
	"github.com/loomlm/loom/sdk"
)

// A strategy plugin calls every method of the SDK's strategy API in a random valid order
// (plugins/internal/propstrategy); it logs what it asked and what the host answered, and the
// log is replayed here against recomputing each sequence from scratch on the same embedded
// transformer: every row's candidates, every chosen token, every sequence's tokens and summed
// log-probability, and the returned details.

// propEntry mirrors the plugin's log entries.
type propEntry struct {
	Op      string
	Seqs    []int
	New     []int
	N       int
	Choices []sdk.Choice
	Top     [][]sdk.Choice
	State   []struct {
		Index     int
		Generated []core.TokenID
		Sum       float64
		Finished  bool
	}
}

type propRef struct {
	index     int
	tokens    []core.TokenID
	processed []bool
	logprobs  []float32
	hasRow    bool
	procNow   bool
	draws     int
	finished  bool
}

var (
	propBinOnce sync.Once
	propBin     string
	propBinErr  error
)

func propStrategyBinary(t *testing.T) string {
	t.Helper()
	propBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "loom-propstrategy-")
		if err != nil {
			propBinErr = err
			return
		}
		propBin = filepath.Join(dir, "propstrategy")
		if out, err := exec.Command("go", "build", "-o", propBin, "./internal/propstrategy").CombinedOutput(); err != nil {
			propBinErr = fmt.Errorf("building propstrategy: %v\n%s", err, out)
		}
	})
	if propBinErr != nil {
		t.Fatal(propBinErr)
	}
	return propBin
}

func TestStrategyPluginSessionMatchesRecomputation(t *testing.T) {
	bin := propStrategyBinary(t)
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(bin)) })
	seeds := []int{1, 2, 3, 4, 5, 6}
	if testing.Short() {
		seeds = seeds[:2]
	}
	ops := map[string]int{}
	t.Cleanup(func() {
		for _, op := range []string{"start", "fork", "forward", "process", "greedy", "sample", "append", "step_greedy", "step_sample", "truncate", "discard", "finish", "refresh", "end"} {
			if ops[op] == 0 {
				t.Errorf("the plugin never called %s", op)
			}
		}
	})
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			e := newEnv(t)
			logPath := filepath.Join(e.dir, "ops.jsonl")
			src := fmt.Sprintf(`[model]
builtin = "draft"

[generation]
max_new_tokens = 20
seed = %d

[[plugins]]
name = "ps"
path = %q
sha256 = %q
timeout = "60s"

[plugins.config]
seed = %d
ops = 150
log = %q

[strategy]
type = "ps.prop"

[[processors]]
type = "penalties"
repeat = 1.3
frequency = 0.2
last_n = 8

[[processors]]
type = "temperature"
t = 0.9

[[processors]]
type = "top_k"
k = 30
`, seed, bin, sum(t, bin), seed, logPath)
			p := filepath.Join(e.dir, "pipeline.toml")
			if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			b := e.mustBuild(p)
			res, err := generate(b, "And God said", func(r *core.Request) {
				r.Return = core.ReturnOptions{Logprobs: true, TopLogprobs: 2}
			})
			if err != nil {
				t.Fatal(err)
			}
			replayPropLog(t, b.Pipeline, uint64(seed), res.PromptTokens, logPath, res, ops)
		})
	}
}

func replayPropLog(t *testing.T, pipe *core.Pipeline, seed uint64, prompt []core.TokenID, logPath string, res *core.Result, ops map[string]int) {
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := sessiontest.NewScratch(t, pipe.Model, pipe.Tokenizer, pipe.Processors, seed)
	eog := pipe.Tokenizer.Special().EndOfGeneration
	const maxNew = 20
	refs := map[int]*propRef{}
	of := func(r *propRef) sessiontest.Result {
		return sc.Of(r.tokens, len(prompt), r.processed, r.index)
	}
	line, lastOp := 0, ""
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("log line %d (%s): "+format, append([]any{line, lastOp}, args...)...)
	}
	// choose checks a greedy or sampled choice of r against recomputation.
	choose := func(r *propRef, sample bool, got sdk.Choice) {
		t.Helper()
		want := of(r)
		c := &want.Cands
		var wantCh core.Choice
		if sample {
			stream := core.NewRand(seed, r.index)
			var u float64
			for range r.draws + 1 {
				u = stream.Float64()
			}
			r.draws++
			wantCh, err = core.SampleFrom(c, u)
		} else {
			id, err2 := c.Argmax()
			err = err2
			wantCh.ID = id
			_, logZ, _ := c.Probs()
			v, _ := c.Logit(id)
			wantCh.Logprob = v - logZ
		}
		if err != nil {
			fail("recomputation: %v", err)
		}
		if got.ID != wantCh.ID || got.Logprob != wantCh.Logprob {
			fail("sequence %d chose %+v, recomputation %+v", r.index, got, wantCh)
		}
		r.procNow = true
	}
	appendTo := func(r *propRef, ch sdk.Choice) {
		r.processed = append(r.processed, r.hasRow && r.procNow)
		r.tokens = append(r.tokens, ch.ID)
		r.logprobs = append(r.logprobs, ch.Logprob)
		r.hasRow, r.procNow = false, false
		r.finished = slices.Contains(eog, ch.ID) || len(r.tokens)-len(prompt) >= maxNew
	}
	scan := bufio.NewScanner(f)
	scan.Buffer(nil, 1<<24)
	for scan.Scan() {
		line++
		var e propEntry
		if err := json.Unmarshal(scan.Bytes(), &e); err != nil {
			fail("%v", err)
		}
		ops[e.Op]++
		lastOp = fmt.Sprint(e.Op, e.Seqs, e.N)
		switch e.Op {
		case "start":
			for _, i := range e.New {
				refs[i] = &propRef{index: i, tokens: slices.Clone(prompt), hasRow: true}
			}
		case "fork":
			p := refs[e.Seqs[0]]
			refs[e.New[0]] = &propRef{index: e.New[0], tokens: slices.Clone(p.tokens), processed: slices.Clone(p.processed),
				logprobs: slices.Clone(p.logprobs), hasRow: p.hasRow, procNow: p.procNow, finished: p.finished}
		case "forward":
			for _, i := range e.Seqs {
				if r := refs[i]; !r.finished && !r.hasRow {
					r.hasRow, r.procNow = true, false
				}
			}
		case "process":
			for k, i := range e.Seqs {
				r := refs[i]
				want := of(r)
				var c core.Candidates
				c.CopyFrom(&want.Cands)
				_, logZ, err := c.Probs()
				if err != nil {
					fail("%v", err)
				}
				top := e.Top[k]
				for j, ch := range top {
					v, ok := c.Logit(ch.ID)
					if !ok || v-logZ != ch.Logprob {
						fail("sequence %d: candidate %d = %+v, recomputation %v", i, j, ch, v-logZ)
					}
					if j > 0 && top[j-1].Logprob < ch.Logprob {
						fail("sequence %d: candidates out of order %+v", i, top)
					}
				}
				last := top[len(top)-1]
				for _, it := range c.Items() {
					if !slices.ContainsFunc(top, func(ch sdk.Choice) bool { return ch.ID == it.ID }) && it.Logit-logZ > last.Logprob {
						fail("sequence %d: token %d (%v) beats the returned top %+v", i, it.ID, it.Logit-logZ, top)
					}
				}
				r.procNow = true
			}
		case "greedy", "sample":
			for k, i := range e.Seqs {
				choose(refs[i], e.Op == "sample", e.Choices[k])
			}
		case "append":
			appendTo(refs[e.Seqs[0]], e.Choices[0])
		case "step_greedy", "step_sample":
			for _, i := range e.Seqs {
				r := refs[i]
				if r.finished {
					continue
				}
				r.hasRow = true
				want := of(r)
				// The step's choice is the token the sequence now has; check it is the one
				// recomputation chooses.
				st := stateOf(e, i)
				if st == nil || len(st.Generated) != len(r.tokens)-len(prompt)+1 {
					fail("sequence %d: no token appended by %s", i, e.Op)
				}
				id := st.Generated[len(st.Generated)-1]
				var got sdk.Choice
				got.ID = id
				_, logZ, _ := want.Cands.Probs()
				v, _ := want.Cands.Logit(id)
				got.Logprob = v - logZ
				if e.Op == "step_sample" {
					var cc core.Candidates
					cc.CopyFrom(&want.Cands)
					probs, _, _ := cc.Probs()
					for j := range probs {
						if cc.ID(j) == id {
							got.Logprob = logOf32(probs[j])
						}
					}
				}
				choose(r, e.Op == "step_sample", got)
				appendTo(r, got)
			}
		case "truncate":
			r := refs[e.Seqs[0]]
			if n := len(prompt) + e.N; n < len(r.tokens) {
				r.tokens, r.processed, r.logprobs = r.tokens[:n], r.processed[:e.N], r.logprobs[:e.N]
				r.hasRow, r.procNow, r.finished = false, false, false
			}
		case "discard":
			delete(refs, e.Seqs[0])
		case "finish":
			refs[e.Seqs[0]].finished = true
		case "end": // the plugin finished every sequence, then set scores and outputs
			for _, r := range refs {
				r.finished = true
			}
		case "refresh":
		default:
			fail("unknown op %q", e.Op)
		}
		// The plugin's view of every sequence after the call.
		if len(e.State) != len(refs) {
			fail("%d sequences in the plugin, %d in the replay", len(e.State), len(refs))
		}
		for _, st := range e.State {
			r := refs[st.Index]
			if r == nil {
				fail("the plugin has sequence %d, the replay not", st.Index)
			}
			if !slices.Equal(st.Generated, r.tokens[len(prompt):]) {
				fail("sequence %d: plugin sees %v, replay %v", st.Index, st.Generated, r.tokens[len(prompt):])
			}
			var sum float64
			for _, lp := range r.logprobs {
				sum += float64(lp)
			}
			if st.Sum != sum {
				fail("sequence %d: SumLogprob %v, replay %v", st.Index, st.Sum, sum)
			}
			if st.Finished != r.finished {
				fail("sequence %d: finished %v, replay %v", st.Index, st.Finished, r.finished)
			}
		}
	}
	if err := scan.Err(); err != nil {
		t.Fatal(err)
	}
	// The result: the sequences the plugin kept, in index order, with their recomputed raw
	// log-probabilities and the scores the plugin set.
	var idx []int
	for i := range refs {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	if len(res.Sequences) != len(idx) {
		t.Fatalf("%d sequences returned, want %d", len(res.Sequences), len(idx))
	}
	for k, i := range idx {
		r, got := refs[i], res.Sequences[k]
		gen := r.tokens[len(prompt):]
		if !slices.Equal(got.Tokens, gen) {
			t.Fatalf("sequence %d: tokens %v, want %v", i, got.Tokens, gen)
		}
		want := of(r)
		for g, id := range gen {
			c := core.NewCandidates(slices.Clone(want.Rows[g]))
			_, logZ, _ := c.Probs()
			if lp := want.Rows[g][id] - logZ; got.Logprobs[g] != lp {
				t.Errorf("sequence %d step %d: raw logprob %v, recomputed %v", i, g, got.Logprobs[g], lp)
			}
			if got.Scores[g] != r.logprobs[g] {
				t.Errorf("sequence %d step %d: score %v, appended with %v", i, g, got.Scores[g], r.logprobs[g])
			}
		}
		if got.Score != -float64(i) {
			t.Errorf("sequence %d: score %v, set %v", i, got.Score, -float64(i))
		}
	}
}

func stateOf(e propEntry, index int) *struct {
	Index     int
	Generated []core.TokenID
	Sum       float64
	Finished  bool
} {
	for k := range e.State {
		if e.State[k].Index == index {
			return &e.State[k]
		}
	}
	return nil
}

func logOf32(p float32) float32 {
	return float32(math.Log(float64(p)))
}
