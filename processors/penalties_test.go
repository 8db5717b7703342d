package processors_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
	"github.com/loomlm/loom/strategies"
	"github.com/loomlm/loom/testmodel"
)

func closeRows(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	for i := range got {
		w := want[i]
		if math.IsInf(w, 0) || math.IsNaN(w) {
			if float64(got[i]) != w && !(math.IsNaN(w) && got[i] != got[i]) {
				t.Fatalf("%s: logit %d = %v, want %v", what, i, got[i], w)
			}
			continue
		}
		if math.Abs(float64(got[i])-w) > 1e-5*math.Max(1, math.Abs(w)) {
			t.Fatalf("%s: logit %d = %v, want %v", what, i, got[i], w)
		}
	}
}

func TestPenaltiesMatchDefinition(t *testing.T) {
	const vocab = 30
	r := rand.New(rand.NewPCG(21, 22))
	row := randomRow(r, vocab, 2)
	prompt := []core.TokenID{5, 6, 7, 5, 9, 10, 11}
	generated := []core.TokenID{12, 5, 13, 12, 12, 3, 20, 6}
	seq := newSeq(t, vocab, prompt, generated...)
	type build func(w processors.Window) (*processors.Penalties, error)
	kinds := []struct {
		name                   string
		build                  build
		repeat, freq, presence float64
	}{
		{"repetition", func(w processors.Window) (*processors.Penalties, error) {
			return processors.NewRepetitionPenalty(1.3, w)
		}, 1.3, 0, 0},
		{"repetition<1", func(w processors.Window) (*processors.Penalties, error) {
			return processors.NewRepetitionPenalty(0.7, w)
		}, 0.7, 0, 0},
		{"frequency", func(w processors.Window) (*processors.Penalties, error) {
			return processors.NewFrequencyPenalty(0.4, w)
		}, 1, 0.4, 0},
		{"presence", func(w processors.Window) (*processors.Penalties, error) { return processors.NewPresencePenalty(0.6, w) }, 1, 0, 0.6},
		{"negative presence", func(w processors.Window) (*processors.Penalties, error) { return processors.NewPresencePenalty(-1, w) }, 1, 0, -1},
		{"combined", func(w processors.Window) (*processors.Penalties, error) {
			return processors.NewPenalties(1.1, 0.1, 0.1, w)
		}, 1.1, 0.1, 0.1},
	}
	for _, k := range kinds {
		for _, scope := range []processors.Scope{processors.ScopeAll, processors.ScopeGenerated} {
			for _, lastN := range []int{processors.WholeHistory, 0, 1, 4, 10, 100} {
				w := processors.Window{Scope: scope, LastN: lastN}
				want := refPenalties(toF64(row), seq.Tokens(), seq.PromptLen(), k.repeat, k.freq, k.presence, scope == processors.ScopeGenerated, lastN)
				for _, f := range forms {
					p, err := k.build(w)
					if err != nil {
						t.Fatal(err)
					}
					c := candidates(row, f)
					if err := p.Process(seq, c); err != nil {
						t.Fatal(err)
					}
					checkSorted(t, c)
					closeRows(t, fmt.Sprintf("%s scope=%s last_n=%d %s", k.name, scope, lastN, f), logitsByID(c, vocab), want)
				}
			}
		}
	}
}

// The counts follow the sequence through Accept (incremental) and agree with a fresh count at
// every step; clones are independent; a sequence that is not a continuation is recounted.
func TestPenaltiesFollowTheSequence(t *testing.T) {
	const vocab = 40
	m, tok := testmodel.New(testmodel.Config{Words: []string{}, VocabSize: vocab, ContextLength: 4096})
	pipe := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{}}
	s, err := core.NewSession(context.Background(), pipe, core.Request{
		PromptTokens: []core.TokenID{3, 4, 5, 3}, MaxNewTokens: 1000, IgnoreEOS: true, Seed: core.SeedOf(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.Prefill()
	if err != nil {
		t.Fatal(err)
	}
	row := randomRow(rand.New(rand.NewPCG(1, 1)), vocab, 2)
	r := rand.New(rand.NewPCG(23, 24))
	for _, w := range []processors.Window{{processors.ScopeAll, processors.WholeHistory}, {processors.ScopeAll, 5}, {processors.ScopeGenerated, 3}, {processors.ScopeGenerated, processors.WholeHistory}} {
		p, _ := processors.NewPenalties(1.2, 0.3, 0.2, w)
		var clone core.StatefulProcessor
		var cloneTokens []core.TokenID
		for step := range 60 {
			c := candidates(row, dense)
			if err := p.Process(q, c); err != nil {
				t.Fatal(err)
			}
			want := refPenalties(toF64(row), q.Tokens(), q.PromptLen(), 1.2, 0.3, 0.2, w.Scope == processors.ScopeGenerated, w.LastN)
			closeRows(t, fmt.Sprintf("window %+v step %d", w, step), c.Dense(), want)
			if step == 20 {
				clone = p.Clone()
				cloneTokens = slices.Clone(q.Tokens())
			}
			id := core.TokenID(3 + r.IntN(8)) // few distinct tokens: many repeats and evictions
			if err := s.Append(q, core.Choice{ID: id}); err != nil {
				t.Fatal(err)
			}
			p.Accept(q, id)
		}
		// The clone still holds the counts of step 20; a sequence with those tokens sees them.
		fork := newSeq(t, vocab, cloneTokens[:q.PromptLen()], cloneTokens[q.PromptLen():]...)
		c := candidates(row, dense)
		if err := clone.Process(fork, c); err != nil {
			t.Fatal(err)
		}
		want := refPenalties(toF64(row), cloneTokens, q.PromptLen(), 1.2, 0.3, 0.2, w.Scope == processors.ScopeGenerated, w.LastN)
		closeRows(t, fmt.Sprintf("clone, window %+v", w), c.Dense(), want)
		// The original, moved to a shorter sequence, recounts.
		c = candidates(row, dense)
		if err := p.Process(fork, c); err != nil {
			t.Fatal(err)
		}
		closeRows(t, fmt.Sprintf("recount, window %+v", w), c.Dense(), want)
	}
}

// Within a generation the session clones the penalty per sequence and tells each its tokens:
// a processor after it sees exactly the penalised model row of its own sequence.
func TestPenaltiesInAGeneration(t *testing.T) {
	m, tok := testmodel.New(testmodel.Config{Words: []string{}, VocabSize: 20, ContextLength: 512, Scale: 1})
	pen, _ := processors.NewPenalties(1.5, 0.5, 0.5, processors.Window{Scope: processors.ScopeAll, LastN: 6})
	checked := 0
	check := core.ProcessorFunc(func(seq *core.Sequence, c *core.Candidates) error {
		raw := m.Row(make([]float32, 20), seq.Tokens())
		want := refPenalties(toF64(raw), seq.Tokens(), seq.PromptLen(), 1.5, 0.5, 0.5, false, 6)
		closeRows(t, fmt.Sprintf("sequence %d step %d", seq.Index(), seq.NumGenerated()), c.Dense(), want)
		checked++
		return nil
	})
	pipe := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Ancestral{}, Processors: []core.LogitsProcessor{pen, check}}
	res, err := core.Generate(context.Background(), pipe, core.Request{
		PromptTokens: []core.TokenID{3, 4, 3, 5}, MaxNewTokens: 40, N: 3, IgnoreEOS: true, Seed: core.SeedOf(5),
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked != 120 || len(res.Sequences) != 3 {
		t.Fatalf("checked %d steps over %d sequences", checked, len(res.Sequences))
	}
}

func TestPenaltiesOnSortedSetMarkUnsorted(t *testing.T) {
	seq := newSeq(t, 10, []core.TokenID{9})
	p, _ := processors.NewFrequencyPenalty(10, processors.Window{LastN: processors.WholeHistory})
	c := candidates([]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, sparseSorted)
	if err := p.Process(seq, c); err != nil {
		t.Fatal(err)
	}
	if c.Sorted() {
		t.Fatal("penalising the top token must mark the set unsorted")
	}
	if v, _ := c.Logit(9); v != -1 {
		t.Fatalf("token 9: %v, want -1", v)
	}
	// No sequence: nothing to penalise.
	c = candidates([]float32{1, 2}, dense)
	if err := p.Process(nil, c); err != nil || c.Dense()[0] != 1 || c.Dense()[1] != 2 {
		t.Fatalf("nil sequence: %v %v", c.Dense(), err)
	}
}

func TestNoRepeatNGram(t *testing.T) {
	cases := []struct {
		n         int
		prompt    []core.TokenID
		generated []core.TokenID
		banned    []int
	}{
		{1, []core.TokenID{3, 5, 3}, nil, []int{3, 5}},
		{2, []core.TokenID{3, 5, 3}, nil, []int{5}},
		{2, []core.TokenID{3, 5, 3, 6, 3}, nil, []int{5, 6}},
		{3, []core.TokenID{3, 5, 7}, []core.TokenID{3, 5}, []int{7}},
		{3, []core.TokenID{3, 5, 7, 4, 5}, nil, nil},
		{4, []core.TokenID{3, 5}, nil, nil}, // shorter than n
		{2, []core.TokenID{4, 4, 4}, nil, []int{4}},
	}
	row := make([]float32, 10)
	for i := range row {
		row[i] = float32(i)
	}
	for _, tc := range cases {
		p, err := processors.NewNoRepeatNGram(tc.n)
		if err != nil {
			t.Fatal(err)
		}
		seq := newSeq(t, 10, tc.prompt, tc.generated...)
		for _, f := range forms {
			c := candidates(row, f)
			if err := p.Process(seq, c); err != nil {
				t.Fatal(err)
			}
			checkSorted(t, c)
			var got []int
			for id, v := range logitsByID(c, 10) {
				if v == ninf {
					got = append(got, id)
				}
			}
			if !slices.Equal(got, tc.banned) {
				t.Errorf("n=%d tokens %v %v (%s): banned %v, want %v", tc.n, tc.prompt, tc.generated, f, got, tc.banned)
			}
			if f == sparseSorted && !c.Sorted() {
				t.Errorf("banning must keep a sorted set sorted")
			}
		}
	}
	// A long history on a sparse set bans through the sorted lookup.
	var long []core.TokenID
	for i := range 300 {
		long = append(long, core.TokenID(3+i%50))
	}
	p, _ := processors.NewNoRepeatNGram(1)
	c := candidates(make([]float32, 60), sparseUnsorted)
	if err := p.Process(newSeq(t, 60, long), c); err != nil {
		t.Fatal(err)
	}
	if got := kept(c, 60); !slices.Equal(got, []int{0, 1, 2, 53, 54, 55, 56, 57, 58, 59}) {
		t.Fatalf("kept %v", got)
	}
}

func TestLogitBias(t *testing.T) {
	p, err := processors.NewLogitBias(map[core.TokenID]float64{1: 2.5, 3: math.Inf(-1), 4: -1}, 6)
	if err != nil {
		t.Fatal(err)
	}
	row := []float32{0, 1, 2, 3, 4, 5}
	want := []float64{0, 3.5, 2, math.Inf(-1), 3, 5}
	for _, f := range forms {
		c := candidates(row, f)
		if err := p.Process(nil, c); err != nil {
			t.Fatal(err)
		}
		checkSorted(t, c)
		closeRows(t, "logit_bias "+f.String(), logitsByID(c, 6), want)
		if f != dense && c.Len() != 5 {
			t.Errorf("%s: the banned token must leave a sparse set (len %d)", f, c.Len())
		}
	}
	// Biases for ids a sparse set does not hold change nothing.
	c := core.NewCandidates(nil)
	c.SetItems(append(c.Buffer(1)[:0], core.Candidate{ID: 5, Logit: 1}), true)
	if err := p.Process(nil, c); err != nil || c.Len() != 1 || !c.Sorted() {
		t.Fatalf("unrelated sparse set changed: %v", c.Items())
	}
}

func TestMinNewTokens(t *testing.T) {
	p, err := processors.NewMinNewTokens(2, []core.TokenID{testmodel.EOS, 7}, 0)
	if err != nil {
		t.Fatal(err)
	}
	row := []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	for gen, wantBanned := range []bool{true, true, false} {
		seq := newSeq(t, 10, []core.TokenID{4}, slices.Repeat([]core.TokenID{5}, gen)...)
		for _, f := range forms {
			c := candidates(row, f)
			if err := p.Process(seq, c); err != nil {
				t.Fatal(err)
			}
			got := logitsByID(c, 10)
			if banned := got[testmodel.EOS] == ninf && got[7] == ninf; banned != wantBanned {
				t.Errorf("%d generated (%s): EOS banned %v, want %v", gen, f, banned, wantBanned)
			}
			if got[3] != 3 {
				t.Errorf("other tokens must be untouched")
			}
		}
	}
	// Without a sequence nothing has been generated yet.
	c := candidates(row, dense)
	if err := p.Process(nil, c); err != nil || c.Dense()[7] != ninf {
		t.Fatalf("nil sequence: %v", c.Dense())
	}
}

func TestBadWords(t *testing.T) {
	_, tok := testmodel.Default()
	seqs, err := processors.BadWordSequences(tok, []string{"cat", "big dog"})
	if err != nil {
		t.Fatal(err)
	}
	cat, big, dog := tokID(tok, "cat"), tokID(tok, "big"), tokID(tok, "dog")
	// The word-level test tokenizer ignores the leading space, so duplicates are dropped.
	if want := [][]core.TokenID{{cat}, {big, dog}}; !slices.EqualFunc(seqs, want, slices.Equal) {
		t.Fatalf("sequences %v, want %v", seqs, want)
	}
	if _, err := processors.BadWordSequences(tok, []string{"ok", ""}); err == nil {
		t.Fatal("an empty word must be an error")
	} else {
		wantParamError(t, err, "words[1]")
	}
	the := tokID(tok, "the")
	p, err := processors.NewBadWords(append(seqs, []core.TokenID{the, big, cat}, []core.TokenID{cat}), tok.VocabSize(), nil)
	if err != nil {
		t.Fatal(err)
	}
	vocab := tok.VocabSize()
	row := make([]float32, vocab)
	cases := []struct {
		tokens []core.TokenID
		banned []core.TokenID
	}{
		{[]core.TokenID{testmodel.BOS}, []core.TokenID{cat}},
		{[]core.TokenID{testmodel.BOS, big}, []core.TokenID{cat, dog}},
		{[]core.TokenID{testmodel.BOS, the, big}, []core.TokenID{cat, dog}},
		{[]core.TokenID{big, the}, []core.TokenID{cat}},
	}
	for _, tc := range cases {
		seq := newSeq(t, vocab, tc.tokens)
		for _, f := range forms {
			c := candidates(row, f)
			if err := p.Process(seq, c); err != nil {
				t.Fatal(err)
			}
			var got []core.TokenID
			for id, v := range logitsByID(c, vocab) {
				if v == ninf {
					got = append(got, core.TokenID(id))
				}
			}
			slices.Sort(tc.banned)
			if !slices.Equal(got, tc.banned) {
				t.Errorf("after %v (%s): banned %v, want %v", tc.tokens, f, got, tc.banned)
			}
		}
	}
}

func tokID(tok core.Tokenizer, w string) core.TokenID {
	ids, _ := tok.Encode(w, core.EncodeOptions{})
	return ids[0]
}

func ExamplePenalties() {
	m, tok := testmodel.Default()
	pipe := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{}}
	s, _ := core.NewSession(context.Background(), pipe, core.Request{PromptTokens: []core.TokenID{5, 6, 5}, MaxNewTokens: 1})
	seq, _ := s.Prefill()

	// Token 5 occurs twice, token 6 once.
	p, _ := processors.NewPenalties(2, 0.5, 1, processors.Window{Scope: processors.ScopeAll, LastN: processors.WholeHistory})
	c := core.NewCandidates([]float32{0, 0, 0, 0, 0, 4, -4, 1})
	_ = p.Process(seq, c)
	fmt.Println(c.Dense()[5:])
	// 4/2 − 0.5·2 − 1 = 0;  −4·2 − 0.5·1 − 1 = −9.5;  token 7 is untouched.
	// Output: [0 -9.5 1]
}

func ExampleNoRepeatNGram() {
	m, tok := testmodel.Default()
	pipe := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{}}
	s, _ := core.NewSession(context.Background(), pipe, core.Request{PromptTokens: []core.TokenID{3, 4, 5, 3}, MaxNewTokens: 1})
	seq, _ := s.Prefill()

	// The sequence ends with 3, and "3 4" already occurred: 4 is banned.
	p, _ := processors.NewNoRepeatNGram(2)
	c := core.NewCandidates([]float32{0, 0, 0, 1, 1, 1})
	_ = p.Process(seq, c)
	fmt.Println(c.Dense())
	// Output: [0 0 0 1 -Inf 1]
}

func ExampleLogitBias() {
	p, _ := processors.NewLogitBias(map[core.TokenID]float64{1: 2, 2: math.Inf(-1)}, 4)
	c := core.NewCandidates([]float32{0, 0, 0, 0})
	_ = p.Process(nil, c)
	fmt.Println(c.Dense())
	// Output: [0 2 -Inf 0]
}

func ExampleMinNewTokens() {
	m, tok := testmodel.Default()
	pipe := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{}}
	s, _ := core.NewSession(context.Background(), pipe, core.Request{PromptTokens: []core.TokenID{3}, MaxNewTokens: 1})
	seq, _ := s.Prefill()

	// Nothing generated yet: the end-of-generation token </s> (id 2) is banned.
	p, _ := processors.NewMinNewTokens(5, tok.Special().EndOfGeneration, tok.VocabSize())
	c := core.NewCandidates([]float32{0, 0, 3, 1})
	_ = p.Process(seq, c)
	fmt.Println(c.Dense())
	// Output: [0 0 -Inf 1]
}

func ExampleBadWords() {
	m, tok := testmodel.Default()
	words, _ := processors.BadWordSequences(tok, []string{"big dog"})
	p, _ := processors.NewBadWords(words, tok.VocabSize(), tok.Special().EndOfGeneration)

	pipe := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{}}
	prompt, _ := tok.Encode("the big", core.EncodeOptions{})
	s, _ := core.NewSession(context.Background(), pipe, core.Request{PromptTokens: prompt, MaxNewTokens: 1})
	seq, _ := s.Prefill()

	// The text ends with "big": "dog" is banned.
	c := core.NewCandidates(make([]float32, tok.VocabSize()))
	_ = p.Process(seq, c)
	dog := words[0][1]
	fmt.Println(tok.Piece(dog), c.Dense()[dog])
	// Output: dog -Inf
}

func ExampleNewFrequencyPenalty() {
	m, tok := testmodel.Default()
	pipe := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{}}
	s, _ := core.NewSession(context.Background(), pipe, core.Request{PromptTokens: []core.TokenID{4, 4}, MaxNewTokens: 3})
	seq, _ := s.Prefill()
	_ = s.Append(seq, core.Choice{ID: 5})
	_ = s.Append(seq, core.Choice{ID: 5})

	// Counting generated tokens only (vLLM's and OpenAI's convention), the prompt's two 4s do
	// not count: only token 5, generated twice, is penalised.
	p, _ := processors.NewFrequencyPenalty(0.5, processors.Window{Scope: processors.ScopeGenerated, LastN: processors.WholeHistory})
	c := core.NewCandidates([]float32{0, 0, 0, 0, 1, 1})
	_ = p.Process(seq, c)
	fmt.Println(c.Dense()[4:])
	// Output: [1 0]
}
