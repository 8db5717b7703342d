package earley

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loomlm/loom/constraint/grammar"
)

// randomNext returns a random byte of alphabet that may follow m's bytes, or any allowed byte
// when none of alphabet is, and false when no byte may follow.
func randomNext(m *Matcher, alphabet string, rng *rand.Rand) (byte, bool) {
	next := m.NextBytes()
	var ok []byte
	for i := range len(alphabet) {
		if next.Has(alphabet[i]) {
			ok = append(ok, alphabet[i])
		}
	}
	if len(ok) == 0 {
		for b := range 256 {
			if next.Has(byte(b)) {
				ok = append(ok, byte(b))
			}
		}
	}
	if len(ok) == 0 {
		return 0, false
	}
	return ok[rng.IntN(len(ok))], true
}

// futuresDiffer feeds clones of a and b the same random continuations (every other one valid
// for a, the others random bytes of alphabet), trials of up to steps bytes, and reports the
// first byte after which they differ (acceptance of the byte, accepting, next bytes).
func futuresDiffer(a, b *Matcher, alphabet string, rng *rand.Rand, trials, steps int) (int, byte, bool) {
	for trial := range trials {
		x, y := a.Clone(), b.Clone()
		for step := range steps {
			var c byte
			if trial%2 == 0 {
				var ok bool
				if c, ok = randomNext(x, alphabet, rng); !ok {
					break
				}
			} else {
				c = alphabet[rng.IntN(len(alphabet))]
			}
			okX, okY := x.Advance(c), y.Advance(c)
			if okX != okY || x.IsAccepting() != y.IsAccepting() || x.NextBytes() != y.NextBytes() {
				return step + 1, c, true
			}
			if !okX {
				break
			}
		}
	}
	return 0, 0, false
}

// statesByKey walks 300 random paths of up to 40 bytes through g (bytes of alphabet where
// they may follow) and returns clones of the states met, by their key.
func statesByKey(g *grammar.CFG, alphabet string, rng *rand.Rand, key func(*Matcher) []byte) map[string][]*Matcher {
	states := map[string][]*Matcher{}
	for range 300 {
		m := New(g)
		for range 40 {
			k := string(key(m))
			states[k] = append(states[k], m.Clone())
			b, ok := randomNext(m, alphabet, rng)
			if !ok || !m.Advance(b) {
				break
			}
		}
	}
	return states
}

// TestStateKeyEqualMeansSameFuture checks AppendStateKey against what it promises: states
// reached by random walks through a grammar, at different positions, whose keys are equal
// accept exactly the same continuations (random continuations valid for one of them, and
// random byte strings), and states inside a JSON string have equal keys after each character.
func TestStateKeyEqualMeansSameFuture(t *testing.T) {
	tests := []struct{ grammar, alphabet string }{
		{jsonGrammar, `{}[]":, 0123456789-.eEtrufalsn\/ab` + "\n"},
		{`root ::= ("ab" | "c")* "d"{1,3}`, "abcd"},
		{"root ::= x\nx ::= \"a\" x | \"b\" x | \"c\"", "abc"},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	moved := 0 // pairs of equal keys at different positions
	for _, tt := range tests {
		states := statesByKey(grammar.MustCompile(tt.grammar), tt.alphabet, rng, func(m *Matcher) []byte { return m.AppendStateKey(nil) })
		for _, ms := range states {
			if len(ms) < 2 {
				continue
			}
			a, b := ms[0], ms[len(ms)-1]
			if a.Len() != b.Len() {
				moved++
			}
			if step, c, differ := futuresDiffer(a, b, tt.alphabet, rng, 20, 30); differ {
				t.Fatalf("%s: states at positions %d and %d have equal keys but differ after %d more bytes (the last %q)", tt.grammar, a.Len(), b.Len(), step, c)
			}
		}
	}
	// Equal keys at different positions need the memo to have reused the same sets below, so
	// how many there are varies with set ids; inside JSON strings there are always some.
	if moved == 0 {
		t.Fatal("no two states at different positions had equal keys; the test is vacuous")
	}
	// Inside a JSON string, the state after each plain character has the same key.
	m := New(grammar.MustCompile(jsonGrammar))
	if _, ok := m.AdvanceBytes([]byte(`{"k": "ab`)); !ok {
		t.Fatal("prefix rejected")
	}
	key := string(m.AppendStateKey(nil))
	for _, c := range []byte("cdefg hij") {
		m.Advance(c)
		if got := string(m.AppendStateKey(nil)); got != key {
			t.Fatalf("after %q inside a string the key changed", c)
		}
	}
}

// randomSteps makes walks random walks of up to length bytes through g (bytes of alphabet
// where they may follow) and calls visit after each byte b with the matcher m and a clone of
// it from before b.
func randomSteps(g *grammar.CFG, alphabet string, rng *rand.Rand, walks, length int, visit func(before, m *Matcher, b byte)) {
	for range walks {
		m := New(g)
		for range length {
			before := m.Clone()
			b, ok := randomNext(m, alphabet, rng)
			if !ok || !m.Advance(b) {
				break
			}
			visit(before, m, b)
		}
	}
}

// TestSameAsPreviousMeansSameFuture walks random strings through grammars with loops and,
// wherever SameAsPrevious says the state after a byte is the same as before it, checks that
// both accept the same random continuations.
func TestSameAsPreviousMeansSameFuture(t *testing.T) {
	tests := []struct{ grammar, alphabet string }{
		{jsonGrammar, `{}[]":, 0123456789-.eEtrufalsn\/ab=` + "\n"},
		{`root ::= "<" [a-c=]* (">" | "=>") [0-9]{0,8} "."`, "<>=abc019."},
		{"root ::= x\nx ::= \"a\" x | \"b\" x | \"c\"", "abc"},
		// Nesting: the states after "((" and "(((" differ only in their items' origins.
		{"root ::= x\nx ::= \"(\" x \")\" | \"a\"", "(((a)"},
	}
	rng := rand.New(rand.NewPCG(7, 8))
	same := 0
	for _, tt := range tests {
		randomSteps(grammar.MustCompile(tt.grammar), tt.alphabet, rng, 200, 40, func(before, m *Matcher, b byte) {
			if !m.SameAsPrevious() {
				return
			}
			same++
			if step, c, differ := futuresDiffer(before, m, tt.alphabet, rng, 10, 20); differ {
				t.Fatalf("%s: after %d bytes, byte %q left the same state by SameAsPrevious, but %d bytes later (%q) they differ", tt.grammar, before.Len(), b, step, c)
			}
		})
	}
	if same == 0 {
		t.Fatal("SameAsPrevious never held; the test is vacuous")
	}
	t.Logf("%d bytes left the state the same", same)
}

// TestSameAsPreviousWithinMeansSameNearFuture walks random strings through grammars with
// bounded repetitions and, wherever SameAsPreviousWithin(h) says the state after a byte
// accepts what the state before it accepts for h more bytes, checks that both accept the same
// random continuations of up to h bytes; inside a bounded string it holds while more than h+1
// characters may come, and not once fewer may.
func TestSameAsPreviousWithinMeansSameNearFuture(t *testing.T) {
	tests := []struct{ grammar, alphabet string }{
		{`root ::= "\"" [a-c]{0,30} "\"" ("x" | "yz")`, `abc"xyz`},
		{`root ::= "[" ([a-c]{1,25} ",")* "]"`, "abc,]["},
		{`root ::= "<" [ab]{2,20} ">" [ab]{0,12} "."`, "ab<>."},
		{`root ::= "{" ("\"k\":\"" [a-z ]{0,40} "\"")? "}"`, `{}"k: abz`},
		{jsonGrammar, `{}[]":, 0123456789-.eEtrufalsn\/ab` + "\n"},
	}
	rng := rand.New(rand.NewPCG(13, 14))
	within := 0 // bytes where it held and SameAsPrevious did not
	for _, tt := range tests {
		g := grammar.MustCompile(tt.grammar)
		for _, h := range []int{1, 3, 6} {
			randomSteps(g, tt.alphabet, rng, 40, 50, func(before, m *Matcher, b byte) {
				if !m.SameAsPreviousWithin(h) {
					return
				}
				if !m.SameAsPrevious() {
					within++
				}
				if step, c, differ := futuresDiffer(before, m, tt.alphabet, rng, 10, h); differ {
					t.Fatalf("%s: after %d bytes, byte %q left a state the same within %d bytes by SameAsPreviousWithin, but %d bytes later (%q) they differ", tt.grammar, before.Len(), b, h, step, c)
				}
			})
		}
	}
	if within == 0 {
		t.Fatal("SameAsPreviousWithin never held where SameAsPrevious did not; the test is vacuous")
	}
	t.Logf("%d bytes left the state the same within the horizon only", within)
	const h = 5
	m := New(grammar.MustCompile(`root ::= "\"" [a-c]{0,30} "\"" "x"`))
	if _, ok := m.AdvanceBytes([]byte(`"a`)); !ok {
		t.Fatal("prefix rejected")
	}
	for i := 2; i <= 30; i++ {
		m.Advance('b')
		got := m.SameAsPreviousWithin(h)
		if left := 30 - i; left > h+1 && !got {
			t.Fatalf("after %d characters (%d left) the state is not the same as before within %d bytes", i, left, h)
		} else if left < h && got {
			t.Fatalf("after %d characters (%d left) the state is still the same as before within %d bytes", i, left, h)
		}
	}
}

// TestWalkCallsInAnyOrder drives matchers and their clones through random sequences of
// Advance, Pop, Rollback, Clone, BeginWalk, EndWalk and SameAsPrevious — walks left open,
// clones taken mid-walk, walks begun inside walks — and checks every matcher against a fresh
// one fed the same bytes: recycling a walk's sets must never touch a set a chart still holds.
func TestWalkCallsInAnyOrder(t *testing.T) {
	g := grammar.MustCompile(jsonGrammar)
	alphabet := `{}[]":, 0123456789-.eEtrufalsn\/ab`
	rng := rand.New(rand.NewPCG(9, 10))
	type tracked struct {
		m       *Matcher
		history []byte
	}
	check := func(step int, all []*tracked) {
		for i, tm := range all {
			fresh := New(g)
			if _, ok := fresh.AdvanceBytes(tm.history); !ok {
				t.Fatalf("step %d: matcher %d's bytes %q are rejected by a fresh matcher", step, i, tm.history)
			}
			if tm.m.Len() != fresh.Len() || tm.m.IsAccepting() != fresh.IsAccepting() || tm.m.NextBytes() != fresh.NextBytes() {
				t.Fatalf("step %d: matcher %d after %q differs from a fresh matcher", step, i, tm.history)
			}
		}
	}
	recycled := 0
	for run := range 20 {
		all := []*tracked{{m: New(g)}}
		for step := range 400 {
			tm := all[rng.IntN(len(all))]
			switch op := rng.IntN(10); {
			case op < 4:
				if b, ok := randomNext(tm.m, alphabet, rng); ok && tm.m.Advance(b) {
					tm.history = append(tm.history, b)
				}
			case op == 4 && tm.m.Len() > 0:
				n := 1 + rng.IntN(tm.m.Len())
				tm.m.Pop(n)
				tm.history = tm.history[:len(tm.history)-n]
			case op == 5:
				pos := rng.IntN(tm.m.Len() + 1)
				if err := tm.m.Rollback(pos); err != nil {
					t.Fatal(err)
				}
				tm.history = tm.history[:pos]
			case op == 6 && len(all) < 8:
				all = append(all, &tracked{m: tm.m.Clone(), history: slices.Clone(tm.history)})
			case op == 7:
				tm.m.BeginWalk()
				if len(tm.m.spare) > 0 {
					recycled++
				}
			case op == 8:
				tm.m.EndWalk()
			default:
				tm.m.SameAsPrevious()
			}
			if step%50 == 49 {
				check(run*1000+step, all)
			}
		}
		check(run*1000+400, all)
	}
	if recycled == 0 {
		t.Fatal("no walk recycled any set: the property the test is about was not exercised")
	}
	t.Logf("%d walks began with sets to recycle", recycled)
}

// TestStateKeyWithinMeansSameNearFuture checks AppendStateKeyWithin against what it promises:
// states reached by random walks whose keys within h bytes are equal accept the same random
// continuations of up to h bytes; and inside a bounded repetition, states whose exact keys
// differ (the copies left differ) share a key within h bytes while more than h+1 are left,
// and no longer once fewer are.
func TestStateKeyWithinMeansSameNearFuture(t *testing.T) {
	const h = 5
	tests := []struct{ grammar, alphabet string }{
		{`root ::= "\"" [a-c]{0,30} "\"" ("x" | "yz")`, `abc"xyz`},
		{`root ::= "[" ([a-c]{1,25} ",")* "]"`, "abc,]["},
		{`root ::= "<" [ab]{2,20} ">" [ab]{0,12} "."`, "ab<>."},
		{jsonGrammar, `{}[]":, 0123456789-.eEtrufalsn\/ab` + "\n"},
	}
	rng := rand.New(rand.NewPCG(11, 12))
	merged := 0 // pairs of states with equal keys within h bytes and different exact keys
	for _, tt := range tests {
		states := statesByKey(grammar.MustCompile(tt.grammar), tt.alphabet, rng, func(m *Matcher) []byte { return m.AppendStateKeyWithin(nil, h) })
		for _, ms := range states {
			if len(ms) < 2 {
				continue
			}
			a, b := ms[0], ms[len(ms)-1]
			if string(a.AppendStateKey(nil)) != string(b.AppendStateKey(nil)) {
				merged++
			}
			if step, c, differ := futuresDiffer(a, b, tt.alphabet, rng, 20, h); differ {
				t.Fatalf("%s: states at positions %d and %d have equal keys within %d bytes but differ after %d (the last %q)", tt.grammar, a.Len(), b.Len(), h, step, c)
			}
		}
	}
	if merged == 0 {
		t.Fatal("no two states with different exact keys shared a key within h bytes; the test is vacuous")
	}
	// Inside a string of at most 30 characters: the keys within h bytes stay equal while more
	// than h+1 characters may come, and change once fewer may.
	m := New(grammar.MustCompile(`root ::= "\"" [a-c]{0,30} "\"" "x"`))
	if _, ok := m.AdvanceBytes([]byte(`"a`)); !ok {
		t.Fatal("prefix rejected")
	}
	key := string(m.AppendStateKeyWithin(nil, h))
	for i := 2; i <= 30; i++ {
		m.Advance('b')
		got := string(m.AppendStateKeyWithin(nil, h))
		if left := 30 - i; left > h+1 && got != key {
			t.Fatalf("after %d characters (%d left) the key within %d bytes changed", i, left, h)
		} else if left < h+1 && got == key {
			t.Fatalf("after %d characters (%d left) the key within %d bytes is still the first one", i, left, h)
		}
	}
}

// TestSameAsPreviousWithinAnyHorizonOrder asks SameAsPreviousWithin with horizons in random
// order, negative ones too, after every byte of random walks, and checks each answer against
// a fresh matcher fed the same bytes and asked once: the answer a set caches for one horizon
// must never stand for another. A negative horizon counts as 0, for AppendStateKeyWithin too.
func TestSameAsPreviousWithinAnyHorizonOrder(t *testing.T) {
	tests := []struct{ grammar, alphabet string }{
		{`root ::= "\"" [a-c]{0,30} "\"" ("x" | "yz")`, `abc"xyz`},
		{`root ::= "<" [ab]{2,20} ">" [ab]{0,12} "."`, "ab<>."},
		{jsonGrammar, `{}[]":, 0123456789-.eEtrufalsn\/ab` + "\n"},
	}
	horizons := []int{-3, -2, -1, 0, 1, 2, 3, 6, 40}
	rng := rand.New(rand.NewPCG(21, 22))
	asked := map[bool]int{}
	for _, tt := range tests {
		g := grammar.MustCompile(tt.grammar)
		for range 20 {
			m := New(g)
			var seen []byte
			for range 40 {
				b, ok := randomNext(m, tt.alphabet, rng)
				if !ok || !m.Advance(b) {
					break
				}
				seen = append(seen, b)
				for range 4 {
					h := horizons[rng.IntN(len(horizons))]
					fresh := New(g)
					if _, ok := fresh.AdvanceBytes(seen); !ok {
						t.Fatalf("%s: %q rejected by a fresh matcher", tt.grammar, seen)
					}
					got, want := m.SameAsPreviousWithin(h), fresh.SameAsPreviousWithin(h)
					if got != want {
						t.Fatalf("%s: after %q, SameAsPreviousWithin(%d) = %v, a fresh matcher says %v", tt.grammar, seen, h, got, want)
					}
					if h < 0 {
						zero := New(g)
						zero.AdvanceBytes(seen)
						if zero.SameAsPreviousWithin(0) != want {
							t.Fatalf("%s: after %q, SameAsPreviousWithin(%d) = %v, with 0 %v", tt.grammar, seen, h, want, !want)
						}
						if string(m.AppendStateKeyWithin(nil, h)) != string(m.AppendStateKeyWithin(nil, 0)) {
							t.Fatalf("%s: after %q, AppendStateKeyWithin(%d) differs from the key within 0", tt.grammar, seen, h)
						}
					}
					asked[got]++
				}
			}
		}
	}
	if asked[true] == 0 || asked[false] == 0 {
		t.Fatalf("answers %v: the test is vacuous", asked)
	}
}

// TestStayingBytesMatchesEachByte checks StayingBytes against asking byte by byte (CanAdvance,
// then Advance, SameAsPreviousWithin and Pop) in the states of random walks through grammars
// with strings, loops and bounded repetitions, at several horizons, and that the matcher is
// left as it was; a limit below the states it needs gives ok false.
func TestStayingBytesMatchesEachByte(t *testing.T) {
	tests := []struct{ grammar, alphabet string }{
		{jsonGrammar, `{}[]":, 0123456789-.eEtrufalsn\/ab` + "\n"},
		{`root ::= "\"" [a-c]{0,30} "\"" ("x" | "yz")`, `abc"xyz`},
		{`root ::= "<" [a-c=]* (">" | "=>") [0-9]{0,8} "."`, "<>=abc019."},
		{"root ::= x\nx ::= \"(\" x \")\" | \"a\"", "(((a)"},
	}
	rng := rand.New(rand.NewPCG(21, 22))
	checked, stayed, refused := 0, 0, 0
	for _, tt := range tests {
		g := grammar.MustCompile(tt.grammar)
		for _, h := range []int{0, 3, 128} {
			randomSteps(g, tt.alphabet, rng, 20, 40, func(_, m *Matcher, _ byte) {
				var next, stays [4]uint64
				for b := range 256 {
					c := byte(b)
					if !m.CanAdvance(c) {
						continue
					}
					next[b>>6] |= 1 << (b & 63)
					m.Advance(c)
					if m.SameAsPreviousWithin(h) {
						stays[b>>6] |= 1 << (b & 63)
						stayed++
					}
					m.Pop(1)
				}
				n := m.Len()
				gotNext, gotStays, ok := m.StayingBytes(h, 256)
				if !ok {
					t.Fatalf("%s: StayingBytes refused with a limit of 256 states", tt.grammar)
				}
				if gotNext != next || gotStays != stays {
					t.Fatalf("%s, horizon %d, after %d bytes: StayingBytes %x %x, byte by byte %x %x", tt.grammar, h, n, gotNext, gotStays, next, stays)
				}
				if m.Len() != n {
					t.Fatalf("%s: StayingBytes left the matcher at %d bytes, not %d", tt.grammar, m.Len(), n)
				}
				if _, _, ok := m.StayingBytes(h, 0); !ok && next != [4]uint64{} {
					refused++
				}
				checked++
			})
		}
	}
	if stayed == 0 || refused == 0 {
		t.Fatalf("%d states checked, %d staying bytes, %d refusals: the test is vacuous", checked, stayed, refused)
	}
}
