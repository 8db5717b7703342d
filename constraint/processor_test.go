package constraint_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/loomlm/loom/constraint"
	"github.com/loomlm/loom/constraint/earley"
	"github.com/loomlm/loom/constraint/grammar"
	loomschema "github.com/loomlm/loom/constraint/jsonschema"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/strategies"
)

// newSeq returns an empty sequence of tok for processors to accept tokens into.
func newSeq(t testing.TB, tok core.Tokenizer) *core.Sequence {
	t.Helper()
	q, err := core.NewSequence(nil, 0, core.SequenceOptions{Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestProcessDenseAndSparse checks that a dense row is banned exactly outside the mask and
// that sparse sets, small (checked token by token) and large (through the mask), keep exactly
// the allowed candidates in their order.
func TestProcessDenseAndSparse(t *testing.T) {
	_, tok := openDefault(t)
	p, err := constraint.NewGrammar(personGrammar)
	if err != nil {
		t.Fatal(err)
	}
	seq := newSeq(t, tok)
	if _, ok := p.Matcher().AdvanceBytes([]byte(`{ "name": "A`)); !ok {
		t.Fatal("prefix rejected")
	}
	mask := p.Mask(tok)
	v := tok.VocabSize()

	row := make([]float32, v+5) // a padded row: the 5 entries past the vocabulary are banned
	for i := range row {
		row[i] = float32(i % 7)
	}
	c := core.NewCandidates(row)
	if err := p.Process(seq, c); err != nil {
		t.Fatal(err)
	}
	for i, x := range c.Dense() {
		banned := math.IsInf(float64(x), -1)
		if banned == mask.Has(core.TokenID(i)) {
			t.Fatalf("token %d (%q): banned %v, in mask %v", i, tok.Piece(core.TokenID(i)), banned, mask.Has(core.TokenID(i)))
		}
	}

	for _, n := range []int{10, v} {
		items := make([]core.Candidate, 0, n)
		for i := range n {
			id := core.TokenID((i * 37) % v)
			items = append(items, core.Candidate{ID: id, Logit: float32(n - i)})
		}
		// Make sure the small set has allowed tokens in it.
		for id := 0; id < v && n == 10; id++ {
			if mask.Has(core.TokenID(id)) {
				items[3].ID = core.TokenID(id)
				break
			}
		}
		c := core.NewCandidates(nil)
		buf := c.Buffer(len(items))
		copy(buf, items)
		c.SetItems(buf, true)
		if err := p.Process(seq, c); err != nil {
			t.Fatalf("%d candidates: %v", n, err)
		}
		var want []core.Candidate
		for _, it := range items {
			if mask.Has(it.ID) {
				want = append(want, it)
			}
		}
		got := c.Items()
		if len(got) != len(want) || !c.Sorted() {
			t.Fatalf("%d candidates: kept %d (sorted %v), want %d sorted", n, len(got), c.Sorted(), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%d candidates: item %d = %v, want %v", n, i, got[i], want[i])
			}
		}
	}
}

func TestAcceptForbiddenTokenFails(t *testing.T) {
	_, tok := openDefault(t)
	seq := newSeq(t, tok)
	eos := tok.Special().EndOfGeneration[0]
	ids, err := tok.Encode("xyz", core.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		grammar string
		tokens  []core.TokenID
		want    string
	}{
		{"wrong bytes", `root ::= "{}"`, ids[:1], "cannot continue the output: byte 0"},
		{"end too early", `root ::= "xyz!"`, append(append([]core.TokenID(nil), ids...), eos), "ends the sequence, but the output so far is not complete"},
		{"token after the end", `root ::= "xyz"`, append(append([]core.TokenID(nil), ids...), eos, ids[0]), "follows the end of the constrained output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := constraint.NewGrammar(tt.grammar)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range tt.tokens {
				p.Accept(seq, id)
			}
			err = p.Process(seq, core.NewCandidates(make([]float32, tok.VocabSize())))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "token ") {
				t.Fatalf("got %v, want an error naming the token and containing %q", err, tt.want)
			}
		})
	}
}

func TestEndOfGenerationOnlyWhenAccepting(t *testing.T) {
	_, tok := openDefault(t)
	p, err := constraint.NewGrammar(`root ::= "ab" "c"?`)
	if err != nil {
		t.Fatal(err)
	}
	eos := tok.Special().EndOfGeneration[0]
	for _, step := range []struct {
		text    string
		allowed bool
	}{{"", false}, {"a", false}, {"b", true}, {"c", true}} {
		if _, ok := p.Matcher().AdvanceBytes([]byte(step.text)); !ok {
			t.Fatalf("%q rejected", step.text)
		}
		if got := p.Mask(tok).Has(eos); got != step.allowed {
			t.Fatalf("after %q: EOS allowed %v, want %v", step.text, got, step.allowed)
		}
	}
}

func TestNewGrammarErrors(t *testing.T) {
	for src, want := range map[string]string{
		"root ::= \"a\" b":    `grammar: 1:14: rule "b" is not defined`,
		"root ::= [a-":        "grammar: 1:13: character class opened at 1:10 is not closed",
		"root ::= \"x\" root": "accepts nothing",
		"start ::= \"a\"":     `no rule named "root"`,
	} {
		if _, err := constraint.NewGrammar(src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error containing %q", src, err, want)
		}
	}
}

type person struct {
	Name string   `json:"name"`
	Age  *int     `json:"age"`
	Tags []string `json:"tags"`
}

// TestSamplingProducesGrammarText samples from the embedded model under a JSON object grammar
// with several seeds, three sequences per request, and checks every output: it ends with EOS,
// the grammar accepts it, and encoding/json decodes it into the expected shape.
func TestSamplingProducesGrammarText(t *testing.T) {
	model, tok := openDefault(t)
	cfg := grammar.MustCompile(personGrammar)
	for seed := range uint64(4) {
		p, err := constraint.NewGrammar(personGrammar)
		if err != nil {
			t.Fatal(err)
		}
		pipe := &core.Pipeline{Model: model, Tokenizer: tok, Processors: []core.LogitsProcessor{p}, Strategy: strategies.Ancestral{}}
		req := core.Request{Prompt: "And the LORD said", MaxNewTokens: 120, Seed: core.SeedOf(seed), N: 3}
		res, err := core.Generate(context.Background(), pipe, req)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, s := range res.Sequences {
			if s.FinishReason != core.FinishEOS {
				t.Fatalf("seed %d sequence %d: finished by %q after %q, want eos", seed, s.Index, s.FinishReason, s.Text)
			}
			m := earley.New(cfg)
			if _, ok := m.AdvanceBytes([]byte(s.Text)); !ok || !m.IsAccepting() {
				t.Fatalf("seed %d sequence %d: grammar rejects %q", seed, s.Index, s.Text)
			}
			var v person
			if err := json.Unmarshal([]byte(s.Text), &v); err != nil || v.Name == "" || v.Age == nil {
				t.Fatalf("seed %d sequence %d: %q does not decode as a person: %v", seed, s.Index, s.Text, err)
			}
		}
	}
}

// TestMaskCacheInsideString decodes a long JSON string token by token: inside it the parser's
// state after every token has the same key (within the longest token, for a string of
// bounded length while more characters may come than a token holds), so most masks come from
// the cache shared by the processor's clones. Each must equal the mask of a processor built
// fresh and advanced over the same bytes (whose own cache is empty): also where a bounded
// string comes within a token's length of its limit and the keys change.
func TestMaskCacheInsideString(t *testing.T) {
	_, tok := openDefault(t)
	doc := `{"text":"In the beginning God created the heaven and the earth. And the earth was without form, and void"}`
	for _, limit := range []string{"", `, "maxLength": 400`, `, "maxLength": 95`} { // the text has 95
		t.Run("string"+limit, func(t *testing.T) {
			schema := `{"type": "object", "properties": {"text": {"type": "string"` + limit + `}}, "required": ["text"]}`
			checkCachedMasks(t, tok, schema, doc)
		})
	}
}

func checkCachedMasks(t *testing.T, tok core.Tokenizer, schema, doc string) {
	start, err := constraint.NewJSONSchema([]byte(schema), loomschema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := core.NewSequence(nil, 0, core.SequenceOptions{Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tok.Encode(doc, core.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := start.Clone().(*constraint.Processor)
	for step, id := range ids {
		got := p.Mask(tok)
		fresh, err := constraint.NewJSONSchema([]byte(schema), loomschema.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, prev := range ids[:step] {
			fresh.Accept(seq, prev)
		}
		want := fresh.Mask(tok)
		for v := range tok.VocabSize() {
			if got.Has(core.TokenID(v)) != want.Has(core.TokenID(v)) {
				t.Fatalf("step %d: token %d %q: cached %v, fresh %v", step, v, tok.Piece(core.TokenID(v)), got.Has(core.TokenID(v)), want.Has(core.TokenID(v)))
			}
		}
		if !got.Has(id) {
			t.Fatalf("step %d: the document's token %d %q is masked", step, id, tok.Piece(id))
		}
		p.Accept(seq, id)
		p = p.Clone().(*constraint.Processor) // as a session does after every token
	}
	if hits := constraint.MaskCacheHits(p); hits < len(ids)/3 {
		t.Fatalf("%d of %d masks came from the cache; inside the string they should", hits, len(ids))
	}
}

// TestMaskCacheSharedAmongClones drives four clones of one processor, which share a mask
// cache, through a document in a random order of Mask and Accept calls: every mask must equal
// that of a fresh processor at the same point, and a clone's last mask must keep its bits
// while the others make and take masks (a cached mask is shared among them, not copied, and
// its buffer is written again only once no one holds it). Then four goroutines take a clone
// each through the whole document at once.
func TestMaskCacheSharedAmongClones(t *testing.T) {
	_, tok := openDefault(t)
	schema := `{"type": "object", "properties": {"text": {"type": "string"}, "n": {"type": "integer"}}, "required": ["text", "n"]}`
	doc := `{"text":"And God said, Let there be light: and there was light.","n":42}`
	start, err := constraint.NewJSONSchema([]byte(schema), loomschema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tok.Encode(doc, core.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := core.NewSequence(nil, 0, core.SequenceOptions{Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	// want[i] is the mask after the document's first i tokens, from a processor of its own.
	want := make([][]bool, len(ids)+1)
	fresh := constraint.Unshared(start)
	for i := range want {
		m := fresh.Mask(tok)
		want[i] = make([]bool, tok.VocabSize())
		for v := range want[i] {
			want[i][v] = m.Has(core.TokenID(v))
		}
		if i < len(ids) {
			fresh.Accept(seq, ids[i])
		}
	}
	same := func(m constraint.Mask, w []bool) bool {
		for v, ok := range w {
			if m.Has(core.TokenID(v)) != ok {
				return false
			}
		}
		return true
	}

	r := rand.New(rand.NewPCG(1, 2))
	clones := make([]*constraint.Processor, 4)
	at := make([]int, len(clones))                // tokens each clone has accepted
	last := make([]*constraint.Mask, len(clones)) // each clone's mask while it is current
	for i := range clones {
		clones[i] = start.Clone().(*constraint.Processor)
	}
	for step := 0; step < 400; step++ {
		j := r.IntN(len(clones))
		if at[j] < len(ids) && r.IntN(3) == 0 {
			clones[j].Accept(seq, ids[at[j]])
			at[j]++
			last[j] = nil
		} else {
			m := clones[j].Mask(tok)
			if !same(m, want[at[j]]) {
				t.Fatalf("step %d: clone %d's mask after %d tokens differs from a fresh processor's", step, j, at[j])
			}
			last[j] = &m
		}
		for k, m := range last {
			if m != nil && !same(*m, want[at[k]]) {
				t.Fatalf("step %d: clone %d's mask (after %d tokens) changed while others worked", step, k, at[k])
			}
		}
		if at[j] == len(ids) && r.IntN(4) == 0 { // start over from a clone of the start
			clones[j], at[j], last[j] = start.Clone().(*constraint.Processor), 0, nil
		}
	}

	var wg sync.WaitGroup
	errs := make(chan error, len(clones))
	for g := range clones {
		p := start.Clone().(*constraint.Processor)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i <= len(ids); i++ {
				if !same(p.Mask(tok), want[i]) {
					errs <- fmt.Errorf("goroutine %d: mask after %d tokens differs from a fresh processor's", g, i)
					return
				}
				if i < len(ids) {
					p.Accept(seq, ids[i])
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
