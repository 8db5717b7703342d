package earley

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/loomlm/loom/constraint/grammar"
)

// recognises feeds s to a fresh matcher and reports whether s is a sentence of g.
func recognises(g *grammar.CFG, s string) bool {
	m := New(g)
	if _, ok := m.AdvanceBytes([]byte(s)); !ok {
		return false
	}
	return m.IsAccepting()
}

const jsonGrammar = `
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
`

func TestMatcherTables(t *testing.T) {
	tests := []struct {
		name    string
		grammar string
		pass    []string
		fail    []string
	}{
		{
			name:    "literal",
			grammar: `root ::= "hello"`,
			pass:    []string{"hello"},
			fail:    []string{"", "hell", "hello!", "Hello"},
		},
		{
			name:    "alternatives and sequences",
			grammar: "root ::= greeting \" \" name\ngreeting ::= \"hi\" | \"hello\"\nname ::= [A-Z] [a-z]*",
			pass:    []string{"hi Ann", "hello B", "hi Zzzzzz"},
			fail:    []string{"hi", "hi ann", "hey Ann", "hello  Ann", "hi Ann "},
		},
		{
			name:    "repetition counts",
			grammar: `root ::= "a"{2} "b"{1,3} "c"{2,} "d"{,2}`,
			pass:    []string{"aabcc", "aabbbcccc", "aabccd", "aabbccdd"},
			fail:    []string{"abcc", "aaabcc", "aacc", "aabbbbcc", "aabc", "aabccddd"},
		},
		{
			name:    "optional and plus",
			grammar: `root ::= "-"? [0-9]+ ("." [0-9]+)?`,
			pass:    []string{"0", "-12", "3.14", "-0.5"},
			fail:    []string{"", "-", "1.", ".5", "1.2.3", "--1"},
		},
		{
			name:    "negated class and any",
			grammar: `root ::= "\"" [^"]* "\"" .`,
			pass:    []string{`"abc"x`, `""é`, `"日本"🙂`},
			fail:    []string{`"a"b"c`, `"abc"`, `"abc"xy`},
		},
		{
			name:    "unicode classes",
			grammar: `root ::= [α-ω]+ [\u4e00-\u9fff]`,
			pass:    []string{"αβγ中", "ω字"},
			fail:    []string{"abc中", "αβ", "Ω中", "α\xe4\xb8"},
		},
		{
			name:    "left recursion",
			grammar: "root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= term \"*\" [0-9] | [0-9]",
			pass:    []string{"1", "1+2", "1*2+3*4*5", "9+9+9"},
			fail:    []string{"", "+1", "1+", "1**2", "12"},
		},
		{
			name:    "right recursion and nesting",
			grammar: "root ::= list\nlist ::= \"(\" items? \")\"\nitems ::= item (\" \" items)?\nitem ::= [a-z] | list",
			pass:    []string{"()", "(a)", "(a b c)", "((a) (b (c)) d)", "(())"},
			fail:    []string{"(", "(a b", "(a  b)", "(a)(b)", "((a)"},
		},
		{
			name:    "deep right recursion (Leo chains)",
			grammar: "root ::= \"[\" ws \"]\" tail\nws ::= ([ \\t] ws)?\ntail ::= \"x\" tail | \"\"",
			pass:    []string{"[]", "[" + strings.Repeat(" \t", 300) + "]", "[ ]" + strings.Repeat("x", 500)},
			fail:    []string{"[" + strings.Repeat(" ", 300), "[" + strings.Repeat(" ", 300) + "x]", "[ ]" + strings.Repeat("x", 500) + "y"},
		},
		{
			name:    "centre recursion",
			grammar: `root ::= "a" root "b" | "c"`,
			pass:    []string{"c", "acb", strings.Repeat("a", 200) + "c" + strings.Repeat("b", 200)},
			fail:    []string{"", "ab", strings.Repeat("a", 200) + "c" + strings.Repeat("b", 199), "acbb"},
		},
		{
			name:    "nullable everything",
			grammar: "root ::= a b c\na ::= \"x\"?\nb ::= (\"y\" | )\nc ::= a*",
			pass:    []string{"", "x", "y", "xy", "xyxxx", "xx", "yx"},
			fail:    []string{"yy", "xyy", "z"},
		},
		{
			name:    "escapes",
			grammar: `root ::= "\x41\u00e9\t" [\n\r] "\\"`,
			pass:    []string{"Aé\t\n\\", "Aé\t\r\\"},
			fail:    []string{"Ae\t\n\\", "Aé \n\\"},
		},
		{
			name: "schema-converter style",
			grammar: `
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
item ::= "{" space item-a-kv "," space item-b-kv "}" space
item-a-kv ::= "\"a\"" space ":" space integer
item-b-kv ::= "\"b\"" space ":" space string
integer ::= ("-"? integral-part) space
integral-part ::= [0] | [1-9] [0-9]{0,15}
root ::= "[" space (item ("," space item)*)? "]" space
space ::= | " " | "\n"{1,2} [ \t]{0,20}
string ::= "\"" char* "\"" space
`,
			pass: []string{`[]`, `[{"a": 1, "b": "x"}]`, "[\n\n\t{\"a\":-20,\"b\":\"\\u00e9\\n\"} , {\"a\": 0, \"b\": \"\"}]"},
			fail: []string{`[{"a": 01, "b": "x"}]`, `[{"b": "x", "a": 1}]`, "[\n\n\n]", `[{"a": 1, "b": "\q"}]`},
		},
		{
			name:    "json",
			grammar: jsonGrammar,
			pass: []string{
				`{}`, `{"a":1}`, `{"a": [1, 2.5, -3e19], "b": {"c": null}}`,
				"{\"k\": \"v\\n\\u00e9\"}", `{"x": [true, false, {}, []]}`,
			},
			fail: []string{
				`[]`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a":1,}`, `{"a":01}`, "{\"a\":\"\x01\"}", `{"a":1}}`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := grammar.MustCompile(tt.grammar)
			for _, s := range tt.pass {
				if !recognises(g, s) {
					t.Errorf("rejected %q, want accepted", s)
				}
			}
			for _, s := range tt.fail {
				if recognises(g, s) {
					t.Errorf("accepted %q, want rejected", s)
				}
			}
		})
	}
}

// TestMatcherAgainstRegexp compares the matcher with Go's regexp on random strings, for
// grammars that are regular languages written both ways.
func TestMatcherAgainstRegexp(t *testing.T) {
	tests := []struct{ grammar, re, alphabet string }{
		{`root ::= ("ab" | "c")* "d"{1,3}`, `^(ab|c)*d{1,3}$`, "abcd"},
		{`root ::= ([a-c] "x"?)+ ("y" | "zz")?`, `^([a-c]x?)+(y|zz)?$`, "abcxyz"},
		{`root ::= "a"{2,4} ("b" "a"{0,2})*`, `^a{2,4}(ba{0,2})*$`, "ab"},
		{`root ::= [^a]* "a" [^a]*`, `^[^a]*a[^a]*$`, "abc"},
		{"root ::= x*\nx ::= \"(\" \")\" | \"[\" x* \"]\"", `^(\(\)|\[(\(\)|\[\])*\])*$`, "()[]"},
		{"root ::= x\nx ::= \"a\" x | \"b\" x | \"c\"", `^[ab]*c$`, "abc"},
		{"root ::= \"(\" x \")\" y\nx ::= (\"a\" x)?\ny ::= (\"b\" z)?\nz ::= y", `^\(a*\)b*$`, "()ab"},
	}
	// 300 words in parallel: after a byte, more than 64 scan items at once (the memo of
	// Advance then keys sets by a wide signature).
	words := map[string]bool{}
	wordRng := rand.New(rand.NewPCG(3, 4))
	for len(words) < 300 {
		w := make([]byte, 2+wordRng.IntN(5))
		for i := range w {
			w[i] = "abcd"[wordRng.IntN(4)]
		}
		words[string(w)] = true
	}
	var gbnf, re []string
	for w := range words {
		gbnf = append(gbnf, `"`+w+`"`)
		re = append(re, w)
	}
	tests = append(tests, struct{ grammar, re, alphabet string }{
		"root ::= (" + strings.Join(gbnf, " | ") + ")+", "^(" + strings.Join(re, "|") + ")+$", "abcd",
	})
	wide := 0
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tt := range tests {
		g := grammar.MustCompile(tt.grammar)
		if m := New(g); m.Advance('a') && len(m.sets[1].scan) > 64 {
			wide++
		}
		re := regexp.MustCompile(tt.re)
		// One matcher rolled back between strings, so states built for earlier strings are
		// reused (the memo of Advance), next to a fresh matcher per string.
		shared := New(g)
		accepted := 0
		for range 4000 {
			n := rng.IntN(13)
			b := make([]byte, n)
			for i := range b {
				b[i] = tt.alphabet[rng.IntN(len(tt.alphabet))]
			}
			want := re.Match(b)
			if got := recognises(g, string(b)); got != want {
				t.Fatalf("%s: %q: matcher says %v, regexp %v", tt.grammar, b, got, want)
			}
			if err := shared.Rollback(0); err != nil {
				t.Fatal(err)
			}
			_, ok := shared.AdvanceBytes(b)
			if got := ok && shared.IsAccepting(); got != want {
				t.Fatalf("%s: %q: reused matcher says %v, regexp %v", tt.grammar, b, got, want)
			}
			if want {
				accepted++
			}
		}
		if accepted == 0 {
			t.Fatalf("%s: no random string was accepted; the comparison is vacuous", tt.grammar)
		}
	}
	if wide == 0 {
		t.Fatal("no grammar has more than 64 scan items in a set")
	}
}

func TestMatcherRejectLeavesState(t *testing.T) {
	g := grammar.MustCompile(`root ::= "ab" | "ac"`)
	m := New(g)
	if !m.Advance('a') {
		t.Fatal("a rejected")
	}
	if m.Advance('x') {
		t.Fatal("x accepted after a")
	}
	if m.Len() != 1 {
		t.Fatalf("Len = %d after a rejected byte, want 1", m.Len())
	}
	if n, ok := m.AdvanceBytes([]byte("cx")); ok || n != 1 || m.Len() != 1 {
		t.Fatalf("AdvanceBytes(cx) = %d, %v, Len %d; want 1, false, Len 1", n, ok, m.Len())
	}
	if !m.CanAdvance('b') || !m.CanAdvance('c') || m.CanAdvance('a') {
		t.Fatal("CanAdvance after a: want exactly b and c")
	}
	if !m.Advance('c') || !m.IsAccepting() || !m.IsDone() {
		t.Fatal("ac: want accepting and done")
	}
}

// TestCloneAndRollbackIndependence forks matchers at many points, rolls some back and
// advances all of them differently, and checks each against a matcher built from scratch.
func TestCloneAndRollbackIndependence(t *testing.T) {
	g := grammar.MustCompile(jsonGrammar)
	doc := `{"a": [1, 2, {"b": "c"}], "d": true}`
	type fork struct {
		m      *Matcher
		prefix string
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var forks []fork
	root := New(g)
	for i := 0; i < len(doc); i++ {
		if !root.Advance(doc[i]) {
			t.Fatalf("byte %d of %q rejected", i, doc)
		}
		forks = append(forks, fork{root.Clone(), doc[:i+1]})
	}
	// Roll the root back and take it elsewhere: the clones must not see it.
	if err := root.Rollback(5); err != nil {
		t.Fatal(err)
	}
	if _, ok := root.AdvanceBytes([]byte(`"x"}`)); !ok {
		t.Fatal("root could not continue after rollback")
	}
	for step := 0; step < 3000; step++ {
		f := &forks[rng.IntN(len(forks))]
		switch rng.IntN(3) {
		case 0: // roll back a random amount
			pos := rng.IntN(len(f.prefix) + 1)
			if err := f.m.Rollback(pos); err != nil {
				t.Fatal(err)
			}
			f.prefix = f.prefix[:pos]
		case 1: // clone
			forks = append(forks, fork{f.m.Clone(), f.prefix})
		default: // advance by an allowed byte
			nb := f.m.NextBytes()
			var allowed []byte
			for b := 0; b < 256; b++ {
				if nb.Has(byte(b)) {
					allowed = append(allowed, byte(b))
				}
			}
			if len(allowed) == 0 {
				continue
			}
			b := allowed[rng.IntN(len(allowed))]
			if !f.m.Advance(b) {
				t.Fatalf("byte %q in NextBytes rejected after %q", b, f.prefix)
			}
			f.prefix += string([]byte{b})
		}
	}
	for _, f := range forks {
		fresh := New(g)
		if _, ok := fresh.AdvanceBytes([]byte(f.prefix)); !ok {
			t.Fatalf("a fresh matcher rejects %q, which a fork reached", f.prefix)
		}
		if f.m.Len() != len(f.prefix) || f.m.IsAccepting() != fresh.IsAccepting() || f.m.NextBytes() != fresh.NextBytes() {
			t.Fatalf("fork at %q differs from a fresh matcher: len %d/%d accept %v/%v next %v/%v", f.prefix, f.m.Len(), len(f.prefix), f.m.IsAccepting(), fresh.IsAccepting(), f.m.NextBytes(), fresh.NextBytes())
		}
	}
	if err := root.Rollback(1000); err == nil {
		t.Fatal("Rollback beyond Len succeeded")
	}
}

// TestLongInputRollbacks advances a document longer than the memo's ring of rows, rolls back
// to random positions and re-advances, checking every position against a fresh matcher.
func TestLongInputRollbacks(t *testing.T) {
	g := grammar.MustCompile(jsonGrammar)
	doc := `{"items": [`
	for i := range 60 {
		if i > 0 {
			doc += ", "
		}
		doc += `{"id": 12, "name": "n\u00e9", "ok": true}`
	}
	doc += "]}"
	fresh := New(g)
	want := make([]grammar.ByteSet, len(doc)+1)
	want[0] = fresh.NextBytes()
	for i := 0; i < len(doc); i++ {
		if !fresh.Advance(doc[i]) {
			t.Fatalf("byte %d rejected", i)
		}
		want[i+1] = fresh.NextBytes()
	}
	if !fresh.IsAccepting() {
		t.Fatal("document not accepted")
	}
	m := New(g)
	m.AdvanceBytes([]byte(doc))
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		pos := rng.IntN(m.Len() + 1)
		if err := m.Rollback(pos); err != nil {
			t.Fatal(err)
		}
		if m.NextBytes() != want[pos] {
			t.Fatalf("after rollback to %d: next bytes differ", pos)
		}
		end := min(len(doc), pos+rng.IntN(400))
		for i := pos; i < end; i++ {
			if !m.Advance(doc[i]) || m.NextBytes() != want[i+1] {
				t.Fatalf("re-advancing byte %d from %d: state differs", i, pos)
			}
		}
	}
}
