package constraint_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/constraint"
	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/reasoning"
)

// TestAfterThinkingMatchesRecomputation drives AfterThinking constraints through random orders
// of Accept and Clone over replies that think (or not) and then call, and checks every
// state's allowed tokens, over the whole vocabulary, against their definition recomputed
// from the text: a token is allowed when the reply with it either has not begun its answer or
// has an answer (reasoning.Splitter's, its leading blanks dropped) that begins a sentence of
// the grammar; outside the block at most four blank bytes before the answer and no control
// token; an end of generation after a whole sentence, or before the answer where the grammar
// takes the empty text.
func TestAfterThinkingMatchesRecomputation(t *testing.T) {
	_, tok := openDefault(t)
	n := tok.VocabSize()
	// One grammar begins with the open tag's first byte, one with another, one takes the
	// empty text.
	grammars := []*grammar.CFG{
		grammar.MustCompile(`root ::= "<call>" [a-z]{1,8} "</call>"`),
		grammar.MustCompile(`root ::= "{" [a-z]{1,8} "}"`),
		grammar.MustCompile(`root ::= ("{" [a-z]{1,8} "}")?`), // the empty answer too
	}
	eog := map[core.TokenID]bool{}
	for _, id := range tok.Special().EndOfGeneration {
		eog[id] = true
	}
	// want recomputes the allowed tokens after text.
	want := func(cfg *grammar.CFG, text string, open bool) []bool {
		const blanks = " \t\r\n"
		out := make([]bool, n)
		before := reasoning.Think.NewSplitter(open)
		_, sofar := before.Write(text)
		sofar = strings.TrimLeft(sofar, blanks)
		m := constraint.New("call", cfg).Matcher() // a parser of its own, at its start
		// An end of generation once the answer is a whole sentence, or before it where
		// nothing but blanks is held outside the block and the grammar takes the empty text.
		end := !before.Thinking() && strings.TrimLeft(before.Held(), blanks) == "" && m.IsAccepting()
		if sofar != "" {
			k, ok := m.AdvanceBytes([]byte(sofar))
			end = ok && m.IsAccepting()
			if ok {
				m.Pop(k)
			}
		}
		for id := range core.TokenID(n) {
			b := tok.TokenBytes(id)
			switch {
			case eog[id]:
				out[id] = end
				continue
			case len(b) == 0: // control tokens: in the thinking only
				out[id] = before.Thinking()
				continue
			}
			s := *before
			_, answer := s.Write(string(b))
			answer = strings.TrimLeft(sofar+answer, blanks)
			if answer == "" {
				// Blank bytes outside the block before the answer, at most four: after the
				// close tag, or at the reply's start.
				full, run := text+string(b), 0
				if s.Closed() {
					run = len(full) - (strings.LastIndex(full, reasoning.Think.Close) + len(reasoning.Think.Close))
				} else {
					run = len(full) - len(strings.TrimLeft(full, blanks))
				}
				out[id] = s.Thinking() || run <= 4
				continue
			}
			k, ok := m.AdvanceBytes([]byte(answer))
			if ok {
				m.Pop(k)
			}
			out[id] = ok
		}
		return out
	}
	pieces := []string{"<think>", "<th", "ink>", "\n", "\n\n", "Let me", " see", "<call>", "</think>", "</th", "ink>\n\n", " ", "  ", "<call>", "ab", "</call>", "x", "{", " {", "cd}", "\n{"}
	var moves [][]core.TokenID
	for _, p := range pieces {
		enc, err := tok.Encode(p, core.EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		moves = append(moves, enc)
	}
	seqOf := func() *core.Sequence {
		s, err := core.NewSequence(nil, 0, core.SequenceOptions{Tokenizer: tok})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	type state struct {
		a    *constraint.AfterThinking
		seq  *core.Sequence
		text string
		open bool
		cfg  *grammar.CFG
	}
	rng := rand.New(rand.NewPCG(3, 4))
	answering, thinkingChecked := 0, 0
	for trial := range 80 {
		open, cfg := trial%3 == 0, grammars[trial%len(grammars)]
		states := []*state{{a: constraint.NewAfterThinking(constraint.New("call", cfg), reasoning.Think, open), seq: seqOf(), open: open, cfg: cfg}}
		for range 12 {
			s := states[rng.IntN(len(states))]
			if rng.IntN(4) == 0 {
				c := &state{a: s.a.Clone().(*constraint.AfterThinking), seq: seqOf(), text: s.text, open: s.open, cfg: s.cfg}
				states = append(states, c)
				s = c
			}
			for _, id := range moves[rng.IntN(len(moves))] {
				if !allowed(t, s.a, s.seq, n)[id] {
					break
				}
				s.a.Accept(s.seq, id)
				s.text += string(tok.TokenBytes(id))
			}
		}
		for k, s := range states {
			if got, w := allowed(t, s.a, s.seq, n), want(s.cfg, s.text, s.open); !slices.Equal(got, w) {
				for id := range got {
					if got[id] != w[id] {
						t.Fatalf("trial %d state %d after %q (open %v): token %d %q allowed %v, recomputed %v", trial, k, s.text, s.open, id, tok.TokenBytes(core.TokenID(id)), got[id], w[id])
					}
				}
			}
			// Sparse candidates (every token, as a truncating processor would leave them)
			// keep exactly the tokens the dense row allows.
			dense := allowed(t, s.a, s.seq, n)
			c := core.NewCandidates(nil)
			buf := c.Buffer(n)
			for i := range buf {
				buf[i] = core.Candidate{ID: core.TokenID(i), Logit: float32(-i)}
			}
			c.SetItems(buf, true)
			if err := s.a.Process(s.seq, c); err != nil {
				t.Fatal(err)
			}
			sparse := make([]bool, n)
			for _, it := range c.Items() {
				sparse[it.ID] = true
			}
			if !slices.Equal(sparse, dense) {
				t.Fatalf("trial %d state %d after %q: sparse candidates kept other tokens than the dense row", trial, k, s.text)
			}
			if s.a.Answering() {
				answering++
			} else {
				thinkingChecked++
			}
		}
	}
	if answering < 25 || thinkingChecked < 25 {
		t.Errorf("states checked: %d answering, %d not yet: too few of one kind", answering, thinkingChecked)
	}
}

// TestLazyTriggerToken: with a trigger token, only that token starts the grammar; the same
// text spelled by other tokens does not.
func TestLazyTriggerToken(t *testing.T) {
	_, tok := openDefault(t)
	seq, err := core.NewSequence(nil, 0, core.SequenceOptions{Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tok.Encode(" the", core.EncodeOptions{})
	if err != nil || len(ids) != 1 {
		t.Fatalf("\" the\" is %v (%v), want one token", ids, err)
	}
	cfg := grammar.MustCompile(`root ::= " the" " " [a-z]+`)
	spelled, err := tok.Encode(" t", core.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	he, _ := tok.Encode("he", core.EncodeOptions{})
	l := constraint.NewLazy(constraint.New("x", cfg), " the", false).TriggerToken(ids[0])
	for _, id := range append(spelled, he...) {
		l.Accept(seq, id)
	}
	if l.Active() {
		t.Fatal("the trigger spelled by other tokens started the grammar")
	}
	l.Accept(seq, ids[0])
	if !l.Active() {
		t.Fatal("the trigger token did not start the grammar")
	}
}

// TestLazySkipsThinking: a trigger written while the reply thinks does not start the grammar;
// one in the answer does, and AtStart counts from the answer's first byte.
func TestLazySkipsThinking(t *testing.T) {
	_, tok := openDefault(t)
	cfg := grammar.MustCompile(`root ::= "{" [a-z]+ "}"`)
	seq, err := core.NewSequence(nil, 0, core.SequenceOptions{Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		text          string
		open, atStart bool
		active        bool
	}{
		{"<think>Maybe {ab}", false, false, false},
		{"<think>Maybe {ab}</think>So {ab", false, false, true},
		{"Maybe {ab", true, false, false},
		{"Maybe {ab}</think>\n\n{ab", true, true, true},
		{"<think>x</think> So {ab", false, true, false},
		{"{ab", false, true, true},
	}
	for _, c := range cases {
		l := constraint.NewLazy(constraint.New("x", cfg), "{", c.atStart).SkipThinking(reasoning.Think, c.open)
		ids, err := tok.Encode(c.text, core.EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			l.Accept(seq, id)
		}
		if l.Active() != c.active {
			t.Errorf("%q (open %v, at start %v): active %v", c.text, c.open, c.atStart, l.Active())
		}
	}
}
