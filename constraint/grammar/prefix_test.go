package grammar

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPrefixAutomaton checks a group's prefix automaton against brute force: every byte string
// of up to 4 bytes over an alphabet is live in the automaton exactly when some string of the
// rule's language (enumerated up to 8 bytes, checked by Go's regexp) starts with it.
func TestPrefixAutomaton(t *testing.T) {
	src := `
s0 ::= c s1 | "x" | "é" s2 | "y" d
d  ::= "never"
s1 ::= [abé]* ("y" s0)?
s2 ::= "é"{1,2} s1
c  ::= [ab]
`
	// The same language: s0 = c s1 | x | é s2; s1 = [abé]* (y s0)?; s2 = é{1,2} s1.
	re := regexp.MustCompile(`^(?:(?:[ab]|é{2,3})(?:a|b|é)*y)*(?:x|(?:[ab]|é{2,3})(?:a|b|é)*)$`)
	g, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]Expr{}
	for _, r := range g.Rules {
		bodies[r.Name] = r.Body
	}
	bodies["d"] = &Class{}                              // matches nothing: "y" starts no string of s0
	group := []Rule{g.Rules[0], g.Rules[2], g.Rules[3]} // s0, s1, s2
	// The automaton is built from what the call was given, not from what the caller changes
	// before the first DFA.
	mutRules, mutBodies := slices.Clone(group), maps.Clone(bodies)
	a := NewPrefixGroup(mutRules, mutBodies)[0]
	mutRules[1].Body = &Literal{Text: "zzz"}
	mutBodies["c"] = &Literal{Text: "q"}
	trans, start, key, ok := a.DFA()
	if !ok || key == "" {
		t.Fatal("no automaton")
	}
	alphabet := []byte{'a', 'b', 'x', 'y', 0xC3, 0xA9}
	prefixes := map[string]bool{}
	var walk func(s []byte)
	walk = func(s []byte) {
		if re.Match(s) {
			for i := 0; i <= len(s); i++ {
				prefixes[string(s[:i])] = true
			}
		}
		if len(s) == 8 {
			return
		}
		for _, c := range alphabet {
			walk(append(s[:len(s):len(s)], c))
		}
	}
	walk(nil)
	checked := 0
	var check func(s []byte, st uint16)
	check = func(s []byte, st uint16) {
		if got, want := st != 0, prefixes[string(s)]; got != want {
			t.Fatalf("%q: live %v, a prefix of the language %v", s, got, want)
		}
		checked++
		if len(s) == 4 {
			return
		}
		for _, c := range alphabet {
			next := uint16(0)
			if st != 0 {
				next = trans[(int(st)-1)*256+int(c)]
			}
			check(append(s[:len(s):len(s)], c), next)
		}
	}
	check(nil, uint16(start))
	if len(prefixes) < 20 {
		t.Fatalf("only %d prefixes: the comparison is weak", len(prefixes))
	}
	// The same group again (a schema compiled twice): the same automaton, shared.
	again, _, _, _ := NewPrefixGroup(group, bodies)[0].DFA()
	if &again[0] != &trans[0] {
		t.Error("the same group compiled twice got two automata")
	}
	// The same name twice: no automaton.
	if _, _, _, ok := NewPrefixGroup([]Rule{group[0], group[0]}, bodies)[0].DFA(); ok {
		t.Error("a group with a rule name twice got an automaton")
	}
	// A reference to a group rule that is not in tail position: no automaton.
	bad := []Rule{{Name: "p", Body: &Seq{Items: []Expr{&Ref{Name: "p"}, &Literal{Text: "a"}}}}}
	if _, _, _, ok := NewPrefixGroup(bad, nil)[0].DFA(); ok {
		t.Error("a group with a non-tail reference to itself got an automaton")
	}
	// A group reaching a recursive rule of other (x ::= "a" x "b" x | "c"): no automaton, at
	// once (each reference was expanded again, down to the depth limit: exponential time).
	x := &Alt{Alts: []Expr{&Seq{Items: []Expr{&Literal{Text: "a"}, &Ref{Name: "x"}, &Literal{Text: "b"}, &Ref{Name: "x"}}}, &Literal{Text: "c"}}}
	rec := []Rule{{Name: "n", Body: &Seq{Items: []Expr{&Class{Ranges: []RuneRange{{Lo: 'a', Hi: 'z'}}}, &Ref{Name: "x"}}}}}
	done := make(chan bool)
	go func() {
		_, _, _, ok := NewPrefixGroup(rec, map[string]Expr{"x": x})[0].DFA()
		done <- ok
	}()
	select {
	case ok := <-done:
		if ok {
			t.Error("a group reaching a recursive rule got an automaton")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a group reaching a recursive rule: NewPrefixGroup still running after 10 s")
	}
	t.Logf("%d strings checked, %d prefixes", checked, len(prefixes))
}

// TestRegularGroupUnknownRule checks that Compile names a regular group's rule the grammar
// does not have (it was dropped, and the next name quietly became the group's entry).
func TestRegularGroupUnknownRule(t *testing.T) {
	g, err := Parse("root ::= n\nn ::= [a-z] n | [a-z]\n")
	if err != nil {
		t.Fatal(err)
	}
	g.RegularGroups = [][]string{{"missing", "n"}}
	if _, err := Compile(g, "root"); err == nil || !strings.Contains(err.Error(), `regular group 0: no rule "missing"`) {
		t.Fatalf("err = %v, want one naming the group and the rule", err)
	}
	g.RegularGroups = [][]string{{"n"}}
	if _, err := Compile(g, "root"); err != nil {
		t.Fatal(err)
	}
}
