package constraint_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/constraint"
	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/core"
)

// allowed returns the tokens p leaves (finite logits) over a vocabulary of n.
func allowed(t *testing.T, p core.LogitsProcessor, seq *core.Sequence, n int) []bool {
	t.Helper()
	row := make([]float32, n)
	c := core.NewCandidates(row)
	if err := p.Process(seq, c); err != nil {
		t.Fatal(err)
	}
	out := make([]bool, n)
	for i, v := range c.Dense() {
		out[i] = !math.IsInf(float64(v), -1)
	}
	return out
}

// TestLazyMatchesReplay drives lazy constraints through random orders of Accept and Clone
// (forks that go on on their own, as beam search's and speculation's snapshots do) over text
// that mixes free words, triggers split across tokens, triggers that do not begin a sentence
// and calls, and checks every state against a new constraint fed the same tokens from the
// start: the same tokens allowed, the same activation. It also checks what the state must be:
// off until a trigger that begins a sentence, then the grammar's.
func TestLazyMatchesReplay(t *testing.T) {
	_, tok := openDefault(t)
	n := tok.VocabSize()
	cfg := grammar.MustCompile(`root ::= "<call>" ws "{" [a-z]{1,8} "}" ws "</call>"
ws ::= " "?`)
	newLazy := func() *constraint.Lazy { return constraint.NewLazy(constraint.New("call", cfg), "<call>", false) }
	seqOf := func() *core.Sequence {
		s, err := core.NewSequence(nil, 0, core.SequenceOptions{Tokenizer: tok})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pieces := []string{"Well", " then", ", ", "<", "call", ">", "<c", "all>", "<call>", "<call>", "<call>", " {", "{", "ab", "cd", "}", " </call>", "</", "call>", "</call>", "<call>x", " <ca", "ll", "\n"}
	var moves [][]core.TokenID // each piece's tokens, written one after the other
	for _, p := range pieces {
		enc, err := tok.Encode(p, core.EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		moves = append(moves, enc)
	}
	type state struct {
		l    *constraint.Lazy
		seq  *core.Sequence
		toks []core.TokenID
	}
	rng := rand.New(rand.NewPCG(1, 2))
	activated := 0
	for trial := range 300 {
		states := []*state{{l: newLazy(), seq: seqOf()}}
		for range 16 {
			s := states[rng.IntN(len(states))]
			if rng.IntN(4) == 0 { // a fork that goes on on its own
				c := &state{l: s.l.Clone().(*constraint.Lazy), seq: seqOf(), toks: slices.Clone(s.toks)}
				states = append(states, c)
				s = c
			}
			for _, id := range moves[rng.IntN(len(moves))] {
				if !allowed(t, s.l, s.seq, n)[id] {
					break // the grammar holds the text now and refuses the rest of this piece
				}
				s.l.Accept(s.seq, id)
				s.toks = append(s.toks, id)
			}
		}
		for k, s := range states {
			fresh, seq := newLazy(), seqOf()
			var text strings.Builder
			for _, id := range s.toks {
				fresh.Accept(seq, id)
				text.Write(tok.TokenBytes(id))
			}
			if fresh.Active() != s.l.Active() {
				t.Fatalf("trial %d state %d %q: active %v, replayed %v", trial, k, text.String(), s.l.Active(), fresh.Active())
			}
			if !slices.Equal(allowed(t, s.l, s.seq, n), allowed(t, fresh, seq, n)) {
				t.Fatalf("trial %d state %d %q: the allowed tokens differ from a replay's", trial, k, text.String())
			}
			// Off until "<call>" begins a sentence, every token allowed; on after it.
			i := strings.Index(text.String(), "<call>")
			switch {
			case !s.l.Active() && slices.Contains(allowed(t, s.l, s.seq, n), false):
				t.Fatalf("trial %d state %d %q: inactive but bans tokens", trial, k, text.String())
			case s.l.Active() && i < 0:
				t.Fatalf("trial %d state %d %q: active without a trigger", trial, k, text.String())
			case s.l.Active():
				activated++
			}
		}
	}
	if activated < 100 {
		t.Errorf("only %d of the states reached a call", activated)
	}
}

// TestLazyActivation: the trigger split across tokens starts the grammar, whose bytes then
// hold; a trigger followed in its token by bytes the grammar refuses does not; AtStart
// triggers only at the beginning.
func TestLazyActivation(t *testing.T) {
	_, tok := openDefault(t)
	cfg := grammar.MustCompile(`root ::= "{" [a-z]+ "}"`)
	seq, err := core.NewSequence(nil, 0, core.SequenceOptions{Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	feed := func(l *constraint.Lazy, text string) {
		ids, err := tok.Encode(text, core.EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			l.Accept(seq, id)
		}
	}
	cases := []struct {
		trigger string
		atStart bool
		text    string
		active  bool
	}{
		{"{", false, "So {ab", true},
		{"{", false, "So", false},
		{"{", true, "  {ab", true},
		{"{", true, "So {ab", false},
		{"{", true, " ", false},
	}
	for _, c := range cases {
		l := constraint.NewLazy(constraint.New("x", cfg), c.trigger, c.atStart)
		feed(l, c.text)
		if l.Active() != c.active {
			t.Errorf("%q at start %v after %q: active %v", c.trigger, c.atStart, c.text, l.Active())
		}
	}
	// A token that writes the trigger and then a byte the grammar refuses (its first letter,
	// then a second the grammar's class leaves out) does not start it; a later trigger
	// followed by a letter of the class does.
	isLetter := func(c byte) bool { return c >= 'a' && c <= 'z' }
	for id := range core.TokenID(tok.VocabSize()) {
		b := tok.TokenBytes(id)
		if len(b) < 2 || !isLetter(b[0]) || !isLetter(b[1]) || strings.IndexByte(string(b[1:]), b[0]) >= 0 {
			continue
		}
		class := strings.ReplaceAll("abcdefghijklmnopqrstuvwxyz", string(b[1:2]), "")
		words := grammar.MustCompile(`root ::= "` + string(b[:1]) + `" [` + class + `]+`)
		l := constraint.NewLazy(constraint.New("w", words), string(b[:1]), false)
		l.Accept(seq, id)
		if l.Active() {
			t.Fatalf("token %q started the grammar of %q then [%s]", b, b[:1], class)
		}
		other := string(class[0])
		if other == string(b[:1]) {
			other = string(class[1])
		}
		feed(l, " "+string(b[:1])+other)
		if !l.Active() {
			t.Fatalf("%q then %q did not start the grammar", b, " "+string(b[:1])+other)
		}
		return
	}
	t.Fatal("no token of two letters")
}
