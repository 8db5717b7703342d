package llama

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/loomlm/loom/internal/fixtures"

	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/core"
)

func openStories(t testing.TB, file string, opts Options) *Model {
	t.Helper()
	m, err := Open(fixtures.Path(t, "models", file), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// reference is one reference run (testdata/reference): prompt, greedy ids and, for the
// llama.cpp F32-cache runs, the logits of every step.
type reference struct {
	prompt, gen []int32
	logits      [][]float32
}

func readIDs(line, prefix string) ([]int32, error) {
	fields := strings.Fields(strings.TrimPrefix(line, prefix))
	ids := make([]int32, len(fields))
	for i, f := range fields {
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		ids[i] = int32(v)
	}
	return ids, nil
}

// loadReference reads the reference run name, with its logits when withLogits.
func loadReference(t testing.TB, name string, vocab int, withLogits bool) reference {
	t.Helper()
	txt := fixtures.Read(t, "reference", "stories260K", name+".txt")
	var ref reference
	var err error
	for _, line := range strings.Split(string(txt), "\n") {
		switch {
		case strings.HasPrefix(line, "PROMPT "):
			ref.prompt, err = readIDs(line, "PROMPT ")
		case strings.HasPrefix(line, "GEN "):
			ref.gen, err = readIDs(line, "GEN ")
		}
		if err != nil {
			t.Fatalf("%s.txt: %v", name, err)
		}
	}
	if len(ref.prompt) == 0 || len(ref.gen) == 0 {
		t.Fatalf("%s.txt: no PROMPT or no GEN line", name)
	}
	if !withLogits {
		return ref
	}
	raw := fixtures.Read(t, "reference", "stories260K", name+".logits.f32")
	if len(raw)%(4*vocab) != 0 {
		t.Fatalf("%s.logits.f32: %d bytes, not rows of %d float32", name, len(raw), vocab)
	}
	for off := 0; off < len(raw); off += 4 * vocab {
		row := make([]float32, vocab)
		for i := range row {
			row[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[off+4*i:]))
		}
		ref.logits = append(ref.logits, row)
	}
	return ref
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// newTestState returns a new state of m, closed when the test ends.
func newTestState(t testing.TB, m *Model) core.State {
	t.Helper()
	st, err := m.NewState()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func forward1(t testing.TB, m *Model, st core.State, toks []int32) []float32 {
	t.Helper()
	batch := []core.ForwardItem{{State: st, Tokens: toks}}
	if err := m.Forward(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	return batch[0].Logits[0]
}

// greedy prefills prompt and generates steps tokens greedily with the cache, returning the
// ids and a copy of every step's logits.
func greedy(t testing.TB, m *Model, prompt []int32, steps int) ([]int32, [][]float32) {
	t.Helper()
	st, err := m.NewState()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var ids []int32
	var rows [][]float32
	logits := forward1(t, m, st, prompt)
	for s := 0; s < steps; s++ {
		rows = append(rows, append([]float32(nil), logits...))
		id := argmax(logits)
		ids = append(ids, id)
		if s+1 < steps {
			logits = forward1(t, m, st, []int32{id})
		}
	}
	return ids, rows
}

func maxAbsDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// TestReferenceGreedy checks the F32 model with an F32 cache against llama.cpp: the same
// greedy ids at every step and logits within 1e-3.
func TestReferenceGreedy(t *testing.T) {
	for _, load := range []struct {
		name string
		opts Options
	}{{"mmap", Options{}}, {"no-mmap", Options{NoMmap: true}}} {
		t.Run(load.name, func(t *testing.T) { testReferenceGreedy(t, load.opts) })
	}
}

// testReferenceGreedy runs TestReferenceGreedy on the model loaded with opts.
func testReferenceGreedy(t *testing.T, opts Options) {
	m := openStories(t, "stories260K-f32.gguf", opts)
	for _, name := range []string{"llamacpp-kvf32_bos_256", "llamacpp-kvf32_once-upon-a-time_256"} {
		t.Run(name, func(t *testing.T) {
			ref := loadReference(t, name, m.Params().VocabSize, true)
			if len(ref.logits) != len(ref.gen) {
				t.Fatalf("reference has %d logits rows for %d ids", len(ref.logits), len(ref.gen))
			}
			ids, rows := greedy(t, m, ref.prompt, len(ref.gen))
			same := 0
			for same < len(ids) && ids[same] == ref.gen[same] {
				same++
			}
			var worst float64
			for i := range rows {
				worst = max(worst, maxAbsDiff(rows[i], ref.logits[i]))
			}
			t.Logf("%d/%d ids equal; largest logit difference %.3g", same, len(ref.gen), worst)
			if same != len(ref.gen) {
				t.Errorf("ids differ from step %d: got %d, want %d", same, ids[same], ref.gen[same])
			}
			if worst > 1e-3 {
				t.Errorf("largest logit difference %.3g > 1e-3", worst)
			}
		})
	}
}

// TestReferenceRunC checks the F32 model with an F32 cache against llama2.c's run.c on the
// original checkpoint: the same greedy ids at every step, from the same prompt ids.
func TestReferenceRunC(t *testing.T) {
	m := openStories(t, "stories260K-f32.gguf", Options{})
	for _, name := range []string{"llama2c-runc_bos_256", "llama2c-runc_once-upon-a-time_256"} {
		t.Run(name, func(t *testing.T) {
			ref := loadReference(t, name, m.Params().VocabSize, false)
			ids, _ := greedy(t, m, ref.prompt, len(ref.gen))
			for i := range ids {
				if ids[i] != ref.gen[i] {
					t.Fatalf("ids differ from step %d: got %d, run.c chose %d", i, ids[i], ref.gen[i])
				}
			}
		})
	}
}

// TestF16Weights runs the model stored as F16, and with an F16 cache, and compares it loosely
// with the F32 reference: half precision moves these logits by a few hundredths.
func TestF16Weights(t *testing.T) {
	for _, tc := range []struct {
		file string
		kv   cache.DType
	}{
		{"stories260K-f16.gguf", cache.Float32},
		{"stories260K-f16.gguf", cache.Float16},
		{"stories260K-f32.gguf", cache.Float16},
	} {
		t.Run(fmt.Sprintf("%s/kv-%v", tc.file, tc.kv), func(t *testing.T) {
			m := openStories(t, tc.file, Options{KVType: tc.kv})
			ref := loadReference(t, "llamacpp-kvf32_once-upon-a-time_256", m.Params().VocabSize, true)
			ids, rows := greedy(t, m, ref.prompt, 32)
			same := 0
			for same < len(ids) && ids[same] == ref.gen[same] {
				same++
			}
			var worst float64
			for i := range same {
				worst = max(worst, maxAbsDiff(rows[i], ref.logits[i]))
			}
			t.Logf("first %d/%d ids equal; largest logit difference over them %.3g", same, len(ids), worst)
			if same < 8 || worst > 0.1 {
				t.Errorf("too far from the F32 reference: %d ids equal, logit difference %.3g", same, worst)
			}
		})
	}
}

// TestReferenceKVF16 compares an F16 cache with llama.cpp's default F16 cache: the same ids
// from BOS for all 256 steps, and after the prompt up to step 143, where llama.cpp's F16 and
// F32 caches part ways at a near-tie.
func TestReferenceKVF16(t *testing.T) {
	m := openStories(t, "stories260K-f32.gguf", Options{KVType: cache.Float16})
	for _, tc := range []struct {
		name string
		want int
	}{
		{"llamacpp-kvf16-default_bos_256", 256},
		{"llamacpp-kvf16-default_once-upon-a-time_256", 143},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := loadReference(t, tc.name, m.Params().VocabSize, false)
			ids, _ := greedy(t, m, ref.prompt, len(ref.gen))
			same := 0
			for same < len(ids) && ids[same] == ref.gen[same] {
				same++
			}
			t.Logf("%d/%d ids equal", same, len(ref.gen))
			if same < tc.want {
				t.Errorf("ids differ from step %d, want equality to step %d at least", same, tc.want)
			}
		})
	}
}

// tokens of the second reference prompt and a continuation, for the equality tests.
var testTokens = []int32{1, 373, 265, 426, 453, 335, 334, 264, 417, 458, 465, 465, 465, 465, 465, 465, 465, 473, 473, 473, 461, 458, 465, 465, 465, 466, 393, 377, 314, 434, 283, 332, 301, 446, 465}

// uncached returns the logits after tokens computed from scratch, one pass, without prefix
// reuse.
func uncached(t testing.TB, m *Model, tokens []int32) []float32 {
	t.Helper()
	st, _ := m.NewState()
	defer st.Close()
	return append([]float32(nil), forward1(t, m, st, tokens)...)
}

// openCase opens a stories260K file, or a synthetic model given as shape/type, closing it when
// the test ends.
func openCase(t *testing.T, file string, opts Options) *Model {
	t.Helper()
	shape, typ, ok := strings.Cut(file, "/")
	if !ok {
		return openStories(t, file, opts)
	}
	m, err := Open(writeSynthetic(t, shape, typ), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestCachedMatchesUncached feeds tokens one at a time through the cache and compares every
// step's logits with a fresh pass over the whole prefix, for several weight and cache types.
// (With the kernels' batch invariance the two agree bit for bit; the test allows 1e-4.)
func TestCachedMatchesUncached(t *testing.T) {
	for _, tc := range []struct {
		file string // a stories260K file, or a synthetic shape/type
		kv   cache.DType
	}{
		{"stories260K-f32.gguf", cache.Float32},
		{"stories260K-f16.gguf", cache.Float16},
		{"tinyqwen/q8_0", cache.Float32},
		{"tinyqwen/q4_k_m", cache.Float16},
		{"tinyqwen/q8_0", cache.Q8_0},
		{"tiny/f32", cache.Q8_0},
	} {
		t.Run(fmt.Sprintf("%s/kv-%v", tc.file, tc.kv), func(t *testing.T) {
			m := openCase(t, tc.file, Options{NoPrefixCache: true, KVType: tc.kv, BlockSize: 8})
			toks := make([]int32, len(testTokens))
			for i, tok := range testTokens {
				toks[i] = tok % int32(m.Params().VocabSize)
			}
			st, _ := m.NewState()
			defer st.Close()
			logits := forward1(t, m, st, toks[:1])
			var worst float64
			for n := 1; n <= len(toks); n++ {
				want := uncached(t, m, toks[:n])
				d := maxAbsDiff(logits, want)
				worst = max(worst, d)
				if d > 1e-4 {
					t.Fatalf("after %d tokens: cached and uncached logits differ by %.3g", n, d)
				}
				if n < len(toks) {
					logits = forward1(t, m, st, toks[n:n+1])
				}
			}
			t.Logf("largest difference over %d steps: %.3g", len(toks), worst)
		})
	}
}

// TestAllLogits checks that the rows of a multi-token forward equal the last rows of forwards
// that stop at each of those tokens.
func TestAllLogits(t *testing.T) {
	m := openStories(t, "stories260K-f32.gguf", Options{NoPrefixCache: true})
	st, _ := m.NewState()
	defer st.Close()
	forward1(t, m, st, testTokens[:10])
	batch := []core.ForwardItem{{State: st, Tokens: testTokens[10:15], AllLogits: true}}
	if err := m.Forward(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if len(batch[0].Logits) != 5 {
		t.Fatalf("%d rows, want 5", len(batch[0].Logits))
	}
	for i, row := range batch[0].Logits {
		want := uncached(t, m, testTokens[:11+i])
		if d := maxAbsDiff(row, want); d > 1e-4 {
			t.Errorf("row %d differs by %.3g", i, d)
		}
	}
}

// Exactness of cache operations: the state after a fork, a truncation or a prefix reuse must
// produce exactly (bit for bit) the logits of a state that computed the same tokens the same
// way without them.
func TestCacheOperationsExact(t *testing.T) {
	for _, tc := range []struct {
		file string // a stories260K file, or a synthetic shape/type
		kv   cache.DType
	}{
		{"stories260K-f32.gguf", cache.Float32},
		{"stories260K-f32.gguf", cache.Float16},
		{"tiny/f32", cache.Q8_0}, // Q8_0 needs heads of 32 values or more
	} {
		kv := tc.kv
		m := openCase(t, tc.file, Options{KVType: kv, BlockSize: 4})
		ref := openCase(t, tc.file, Options{KVType: kv, BlockSize: 4, NoPrefixCache: true})
		toks := make([]int32, len(testTokens))
		for i, tok := range testTokens {
			toks[i] = tok % int32(m.Params().VocabSize)
		}
		prompt, cont := toks[:13], toks[13:20]

		// recompute prefills prompt in one pass, then feeds each token of cont.
		recompute := func(prompt, cont []int32) []float32 {
			st, _ := ref.NewState()
			defer st.Close()
			l := forward1(t, ref, st, prompt)
			for _, tok := range cont {
				l = forward1(t, ref, st, []int32{tok})
			}
			return append([]float32(nil), l...)
		}
		check := func(name string, got, want []float32) {
			t.Helper()
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("kv %v, %s: logit %d = %v, recomputation gives %v", kv, name, i, got[i], want[i])
					return
				}
			}
		}

		// Fork: two branches from one prefill, each continued differently.
		base, _ := m.NewState()
		forward1(t, m, base, prompt)
		fork, err := base.Fork()
		if err != nil {
			t.Fatal(err)
		}
		var got []float32
		for _, tok := range cont {
			got = forward1(t, m, fork, []int32{tok})
		}
		check("fork", got, recompute(prompt, cont))
		alt := []int32{300, 301, 302}
		for _, tok := range alt {
			got = forward1(t, m, base, []int32{tok})
		}
		check("forked-from", got, recompute(prompt, alt))

		// Truncate: roll the fork back into the middle of a block and continue.
		if err := fork.Truncate(len(prompt) + 2); err != nil {
			t.Fatal(err)
		}
		for _, tok := range alt {
			got = forward1(t, m, fork, []int32{tok})
		}
		check("truncate", got, recompute(prompt, append(append([]int32(nil), cont[:2]...), alt...)))

		// Copy: a fork whose blocks are copied at once continues like recomputation too.
		copied, err := fork.(core.StateCopier).Copy()
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range cont {
			got = forward1(t, m, copied, []int32{tok})
		}
		check("copy", got, recompute(prompt, append(append(append([]int32(nil), cont[:2]...), alt...), cont...)))
		copied.Close()
		fork.Close()
		base.Close()

		// Prefix reuse: a new state whose prompt starts with the cached prompt.
		before := m.Cache().Stats().ReusedTokens
		st, _ := m.NewState()
		long := append(append([]int32(nil), prompt...), cont...)
		got = append([]float32(nil), forward1(t, m, st, long)...)
		if m.Cache().Stats().ReusedTokens == before {
			t.Errorf("kv %v: no tokens reused", kv)
		}
		if st.Len() != len(long) {
			t.Errorf("kv %v: state has %d positions, want %d", kv, st.Len(), len(long))
		}
		// The reused blocks were computed in the prompt's pass, the rest in this one.
		reused := int(m.Cache().Stats().ReusedTokens - before)
		st2, _ := ref.NewState()
		forward1(t, ref, st2, long[:reused])
		want := forward1(t, ref, st2, long[reused:])
		check("prefix reuse", got, want)
		st.Close()
		st2.Close()
	}
}

func TestForwardErrors(t *testing.T) {
	m := openStories(t, "stories260K-f32.gguf", Options{})
	other := openStories(t, "stories260K-f32.gguf", Options{})
	st, _ := m.NewState()
	defer st.Close()
	foreign, _ := other.NewState()
	closed, _ := m.NewState()
	closed.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		batch []core.ForwardItem
		want  string
	}{
		{"no tokens", []core.ForwardItem{{State: st}}, "no tokens"},
		{"bad token", []core.ForwardItem{{State: st, Tokens: []int32{1, 9999}}}, "outside the vocabulary"},
		{"foreign state", []core.ForwardItem{{State: foreign, Tokens: []int32{1}}}, "another model"},
		{"closed state", []core.ForwardItem{{State: closed, Tokens: []int32{1}}}, "closed"},
		{"twice", []core.ForwardItem{{State: st, Tokens: []int32{1}}, {State: st, Tokens: []int32{1}}}, "twice"},
		{"context", []core.ForwardItem{{State: st, Tokens: make([]int32, 513)}}, "context length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := m.Forward(ctx, tc.batch)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
			if st.Len() != 0 {
				t.Fatalf("failed forward left %d positions", st.Len())
			}
		})
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.Forward(cctx, []core.ForwardItem{{State: st, Tokens: []int32{1}}}); err == nil {
		t.Fatal("Forward with a cancelled context succeeded")
	}
}

func TestBudgetError(t *testing.T) {
	m := openStories(t, "stories260K-f32.gguf", Options{KVBudget: 1 << 16, BlockSize: 16})
	a, _ := m.NewState()
	defer a.Close()
	err := m.Forward(context.Background(), []core.ForwardItem{{State: a, Tokens: make([]int32, 200)}})
	if err == nil || !strings.Contains(err.Error(), "budget") {
		t.Fatalf("err = %v, want a budget error", err)
	}
	if a.Len() != 0 {
		t.Fatalf("failed forward left %d positions", a.Len())
	}
}

// TestBatchedForward checks that one Forward over several sequences at different positions
// gives each the logits it gets alone, and that concurrent Forward calls on one model agree
// (run with -race).
func TestBatchedForward(t *testing.T) {
	m := openStories(t, "stories260K-f32.gguf", Options{NoPrefixCache: true})
	prefixes := [][]int32{testTokens[:3], testTokens[:17], testTokens[5:9], testTokens[:1]}
	next := [][]int32{{300}, {301, 302, 303}, {304}, {305, 306}}
	var want [][]float32
	for i := range prefixes {
		want = append(want, uncached(t, m, append(append([]int32(nil), prefixes[i]...), next[i]...)))
	}
	var batch []core.ForwardItem
	for i := range prefixes {
		st, _ := m.NewState()
		defer st.Close()
		forward1(t, m, st, prefixes[i])
		batch = append(batch, core.ForwardItem{State: st, Tokens: next[i]})
	}
	if err := m.Forward(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	for i := range batch {
		if d := maxAbsDiff(batch[i].Logits[0], want[i]); d > 1e-4 {
			t.Errorf("item %d differs from its lone forward by %.3g", i, d)
		}
	}

	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids, _ := greedy(t, m, testTokens[:9], 40)
			ref, _ := greedy(t, m, testTokens[:9], 40)
			for i := range ids {
				if ids[i] != ref[i] {
					t.Errorf("goroutine %d: concurrent greedy runs differ at step %d", g, i)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestBatchedForwardEqualsAlone checks that a forward of many sequences, one token each (the
// decoding step of a server's batch), gives every sequence the same logits bit for bit as its
// lone forward, on one to four workers: attention then hands out tasks of one head or of all
// of a sequence's heads (attnSplit), which must change no result.
func TestBatchedForwardEqualsAlone(t *testing.T) {
	m := openStories(t, "stories260K-f32.gguf", Options{NoPrefixCache: true})
	const seqs = 16
	prefix := func(i int) []int32 { return testTokens[i%7 : i%7+3+2*i] }
	newState := func() core.State { return newTestState(t, m) }
	alone := make([][]float32, seqs)
	for i := range seqs {
		st := newState()
		forward1(t, m, st, prefix(i))
		alone[i] = forward1(t, m, st, []int32{int32(300 + i)})
	}
	workers := m.workers
	defer func() { m.workers = workers }()
	for _, w := range []int{1, 2, 3, 4} {
		m.workers = w
		for _, n := range []int{2, 5, seqs} {
			heads, _ := attnSplit(n, m.p.KVHeads, w)
			batch := make([]core.ForwardItem, n)
			for i := range batch {
				st := newState()
				forward1(t, m, st, prefix(i))
				batch[i] = core.ForwardItem{State: st, Tokens: []int32{int32(300 + i)}}
			}
			if err := m.Forward(context.Background(), batch); err != nil {
				t.Fatal(err)
			}
			for i := range batch {
				for v, x := range batch[i].Logits[0] {
					if math.Float32bits(x) != math.Float32bits(alone[i][v]) {
						t.Fatalf("%d workers, %d sequences (%d heads a task): sequence %d, logit %d: %v batched, %v alone", w, n, heads, i, v, x, alone[i][v])
					}
				}
			}
		}
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		path string
		want string
	}{
		{"missing file", "/nonexistent/model.gguf", "no such file"},
		{"not a model", fixtures.Path(t, "vocab", "ggml-vocab-llama-spm.gguf"), "token_embd.weight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, opts := range []Options{{}, {NoMmap: true}} {
				_, err := Open(tc.path, opts)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("NoMmap %v: err = %v, want one mentioning %q", opts.NoMmap, err, tc.want)
				}
			}
		})
	}
}

// TestProgress checks the reports of loading and of a prefill that takes several passes.
func TestProgress(t *testing.T) {
	var mu sync.Mutex
	var got []string
	opts := Options{BatchTokens: 16, Progress: func(stage string, done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, fmt.Sprintf("%s %d/%d", stage, done, total))
	}}
	m := openStories(t, "stories260K-f32.gguf", opts)
	if len(got) == 0 || got[len(got)-1] != fmt.Sprintf("load %d/%d", m.WeightBytes(), m.WeightBytes()) {
		t.Fatalf("load reports %v", got)
	}
	// Read into memory, the whole file is counted.
	got = nil
	noMmap := opts
	noMmap.NoMmap = true
	read := openStories(t, "stories260K-f32.gguf", noMmap)
	if size := read.File().Size; len(got) == 0 || got[len(got)-1] != fmt.Sprintf("load %d/%d", size, size) {
		t.Fatalf("load reports without mmap %v (the file has %d bytes)", got, size)
	}
	got = nil
	st, _ := m.NewState()
	defer st.Close()
	forward1(t, m, st, testTokens[:30])
	want := []string{"prefill 16/30", "prefill 30/30"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("prefill reports %v, want %v", got, want)
	}
	got = nil
	forward1(t, m, st, testTokens[30:31])
	if len(got) != 0 {
		t.Fatalf("a one-pass forward reported %v", got)
	}
}

// TestSpareLogits checks the logits buffers a model passes from closed states to new ones: a
// one-row state's buffer is kept and goes to the next state, whose rows then hold that
// forward's logits, while a buffer of more than maxSpareLogitRows rows (every row of a prompt)
// is left to the collector.
func TestSpareLogits(t *testing.T) {
	m := openStories(t, "stories260K-f32.gguf", Options{NoPrefixCache: true})
	spares := func() int {
		m.spareLogits.Lock()
		defer m.spareLogits.Unlock()
		return len(m.spareLogits.bufs)
	}
	newState := func() core.State {
		st, err := m.NewState()
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	long := append(append([]int32(nil), testTokens...), testTokens...)[:maxSpareLogitRows+1]
	all := newState()
	batch := []core.ForwardItem{{State: all, Tokens: long, AllLogits: true}}
	if err := m.Forward(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	all.Close()
	if n := spares(); n != 0 {
		t.Fatalf("a %d-row buffer was kept (%d spares)", len(long), n)
	}
	one := newState()
	row := forward1(t, m, one, testTokens[:3])
	kept := &row[0]
	one.Close()
	if n := spares(); n != 1 {
		t.Fatalf("a one-row buffer left %d spares, want 1", n)
	}
	next := newState()
	defer next.Close()
	got := forward1(t, m, next, testTokens[:5])
	if &got[0] != kept {
		t.Error("the next state did not take the closed state's buffer")
	}
	fresh := newState()
	defer fresh.Close()
	want := forward1(t, m, fresh, testTokens[:5])
	for v := range want {
		if math.Float32bits(got[v]) != math.Float32bits(want[v]) {
			t.Fatalf("logit %d in a reused buffer %v, in a fresh one %v", v, got[v], want[v])
		}
	}
}

// TestWorkspaceScratchFollowsWorkers checks that a pooled workspace made when the model had
// fewer workers gets attention scratch for each worker it has now: attention hands worker
// numbers up to the model's workers to its tasks (a workspace of one worker's scratch once
// crashed TestBatchedForwardEqualsAlone under the race detector, whose pools drop entries).
func TestWorkspaceScratchFollowsWorkers(t *testing.T) {
	m := openStories(t, "stories260K-f32.gguf", Options{})
	workers := m.workers
	defer func() { m.workers = workers }()
	m.workers = 1
	m.workspaces.Put(&workspace{scratch: make([]attnScratch, 1)})
	m.workers = 4
	for range 3 {
		ws := m.getWorkspace()
		if len(ws.scratch) < 4 {
			t.Fatalf("a workspace with scratch for %d workers, the model has 4", len(ws.scratch))
		}
		m.workspaces.Put(ws)
	}
}

// TestPairedAttentionEqualsAlone decodes a step of four forks of one prompt (beams: each with
// tokens of its own after the fork, one or two, so that they share the prompt's full cache
// blocks and not the last one, and stand at two positions) in one forward, for each cache
// type and on one to three workers: attention groups the forks (groupSegments) and reads each
// shared block once for the four of them (attendGroup), and every fork's logits must have the
// bits of its forward alone.
func TestPairedAttentionEqualsAlone(t *testing.T) {
	const forks = 4
	prompt := make([]int32, 40) // two full blocks of 16 and a partial one
	for i := range prompt {
		prompt[i] = int32(300 + i*37%2000)
	}
	for _, kv := range []cache.DType{cache.Float32, cache.Float16, cache.Q8_0} {
		m, err := Open(filepath.Join("..", "..", "models", "default.gguf"), Options{KVType: kv, NoPrefixCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		newState := func() core.State { return newTestState(t, m) }
		// own(i) is fork i's tokens after the prompt: one for even forks, two for odd ones.
		own := func(i int) []int32 { return []int32{int32(500 + i), int32(600 + i)}[:1+i%2] }
		alone := make([][]float32, forks)
		for i := range forks {
			st := newState()
			forward1(t, m, st, prompt)
			forward1(t, m, st, own(i))
			alone[i] = slices.Clone(forward1(t, m, st, []int32{int32(700 + i)}))
		}
		workers := m.workers
		for _, w := range []int{1, 2, 3} {
			m.workers = w
			base := newState()
			forward1(t, m, base, prompt)
			batch := make([]core.ForwardItem, forks)
			for i := range batch {
				st, err := base.Fork()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				forward1(t, m, st, own(i))
				batch[i] = core.ForwardItem{State: st, Tokens: []int32{int32(700 + i)}}
			}
			// The forks make one group: their spans (as attention will see them, less the new
			// row's position) share the two full blocks.
			ws := &workspace{}
			var rows []rowInfo
			for i, it := range batch {
				seq := it.State.(*state).seq
				ws.segs = append(ws.segs, segment{item: i, a: i, b: i + 1})
				n := len(prompt) + len(own(i))
				ws.spans = append(ws.spans, seq.Spans(0, n, nil))
				rows = append(rows, rowInfo{item: i, pos: n - 1})
			}
			group := m.groupSegments(ws)
			if len(ws.groups) != 1 || ws.groups[0].n != forks || sharedSpans(ws.spans[0], ws.spans[3]) != 2 {
				t.Fatalf("kv %v: groups %v (of segments %v): want the four forks in one, sharing two blocks", kv, ws.groups, group)
			}
			if err := m.Forward(context.Background(), batch); err != nil {
				t.Fatal(err)
			}
			for i := range batch {
				for v, x := range batch[i].Logits[0] {
					if math.Float32bits(x) != math.Float32bits(alone[i][v]) {
						t.Fatalf("kv %v, %d workers: fork %d, logit %d: %v batched with its siblings, %v alone", kv, w, i, v, x, alone[i][v])
					}
				}
			}
		}
		m.workers = workers
	}
}

// TestGroupedAttentionMixedSharing decodes a step of four sequences that share different
// parts of their caches: A continued a prompt by ten tokens, B and C forked from A then, D
// forked from the prompt; each then took a token of its own. In one forward the four make one
// group whose first two blocks all four hold, whose third A, B and C hold (A's copy) and D
// its own, and whose fourth each holds alone: the four-row, two-row and one-row kernels all
// run, at two positions, and each sequence's logits must have the bits of its forward alone.
// It runs on the embedded model (two query heads a key/value head) and on random models with
// four (tinymqahd32) and one (tinymha): a block a sequence holds alone is read for all of a key/value
// head's query heads at once, four, two or one at a time.
func TestGroupedAttentionMixedSharing(t *testing.T) {
	models := []struct{ name, path string }{
		{"default", filepath.Join("..", "..", "models", "default.gguf")},
		{"tinymqahd32", writeSynthetic(t, "tinymqahd32", "f32")},
		{"tinymha", writeSynthetic(t, "tinymha", "f32")},
	}
	for _, md := range models {
		for _, kv := range []cache.DType{cache.Float32, cache.Float16, cache.Q8_0} {
			t.Run(md.name+"/"+kv.String(), func(t *testing.T) { testGroupedAttentionMixedSharing(t, md.path, kv) })
		}
	}
}

func testGroupedAttentionMixedSharing(t *testing.T, path string, kv cache.DType) {
	// Token ids below 320, every model's vocabulary.
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(3 + i*37%300)
	}
	tenA := make([]int32, 10)
	for i := range tenA {
		tenA[i] = int32(200 + i)
	}
	// Each sequence's forwards after the prompt, the last one the batched step.
	histories := [][][]int32{
		{tenA, {251}, {271}}, // A
		{tenA, {252}, {272}}, // B
		{tenA, {253}, {273}}, // C
		{{254}, {274}},       // D
	}
	{
		m, err := Open(path, Options{KVType: kv, NoPrefixCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		alone := make([][]float32, len(histories))
		for i, h := range histories {
			st := newTestState(t, m)
			forward1(t, m, st, prompt)
			for _, toks := range h {
				alone[i] = forward1(t, m, st, toks)
			}
			alone[i] = slices.Clone(alone[i])
		}
		base := newTestState(t, m)
		forward1(t, m, base, prompt)
		fork := func(from core.State) core.State {
			st, err := from.Fork()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
		a := fork(base)
		forward1(t, m, a, tenA)
		b, c, d := fork(a), fork(a), fork(base)
		states := []core.State{a, b, c, d}
		for i, st := range states {
			h := histories[i]
			forward1(t, m, st, h[len(h)-2])
		}
		batch := make([]core.ForwardItem, len(states))
		for i, st := range states {
			h := histories[i]
			batch[i] = core.ForwardItem{State: st, Tokens: h[len(h)-1]}
		}
		if err := m.Forward(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		for i := range batch {
			for v, x := range batch[i].Logits[0] {
				if math.Float32bits(x) != math.Float32bits(alone[i][v]) {
					t.Fatalf("kv %v: sequence %c, logit %d: %v batched, %v alone", kv, 'A'+i, v, x, alone[i][v])
				}
			}
		}
		// The sharing is as described: A, B and C hold three blocks in common, D two of them.
		spans := func(st core.State) []cache.Span {
			seq := st.(*state).seq
			return seq.Spans(0, seq.Len(), nil)
		}
		if ab, ac, ad := sharedSpans(spans(a), spans(b)), sharedSpans(spans(a), spans(c)), sharedSpans(spans(a), spans(d)); ab != 3 || ac != 3 || ad != 2 {
			t.Errorf("kv %v: A shares %d blocks with B, %d with C, %d with D; want 3, 3, 2", kv, ab, ac, ad)
		}
	}
}

// TestReserveKV checks that ReserveKV reserves the blocks of its sequences' full context
// within the budget, and that decoding then allocates nothing more.
func TestReserveKV(t *testing.T) {
	m, err := Open(filepath.Join("..", "..", "models", "default.gguf"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pool := m.Cache()
	bs := pool.Config().BlockSize
	perSeq := (m.Params().ContextLength + bs - 1) / bs
	if got, want := m.ReserveKV(2), int64(2*perSeq)*pool.BlockBytes(); got != want {
		t.Fatalf("ReserveKV(2) = %d bytes, want %d (%d blocks of %d bytes)", got, want, 2*perSeq, pool.BlockBytes())
	}
	st := pool.Stats()
	if st.Allocated != 2*perSeq || st.Free != 2*perSeq {
		t.Fatalf("after ReserveKV(2): %+v", st)
	}
	s, err := m.NewState()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(100 + 7*i)
	}
	if err := m.Forward(context.Background(), []core.ForwardItem{{State: s, Tokens: prompt}}); err != nil {
		t.Fatal(err)
	}
	if st := pool.Stats(); st.Allocated != 2*perSeq || st.InUse != 3 {
		t.Fatalf("a 40-token prompt after ReserveKV(2): %+v, want the reserved blocks only, three in use", st)
	}
	// More sequences than the budget holds: the rest of the budget.
	if got, want := m.ReserveKV(1<<20), int64(st.MaxBlocks-2*perSeq)*pool.BlockBytes(); got != want {
		t.Fatalf("ReserveKV past the budget = %d bytes, want the %d left", got, want)
	}
	if st := pool.Stats(); st.Allocated != st.MaxBlocks {
		t.Fatalf("after reserving the whole budget: %+v", st)
	}
}
