package constraint_test

import (
	"fmt"

	"github.com/loomlm/loom/constraint"
)

// A grammar processor's parser can be driven by hand: it tells which bytes may come next and
// whether the text so far is complete.
func ExampleNewGrammar() {
	p, err := constraint.NewGrammar(`
root   ::= answer ("." | "!")?
answer ::= "yes" | "no"
`)
	if err != nil {
		fmt.Println(err)
		return
	}
	m := p.Matcher()
	for _, b := range []byte("yes") {
		m.Advance(b)
	}
	fmt.Println(m.IsAccepting(), m.CanAdvance('!'), m.CanAdvance('?'))

	_, err = constraint.NewGrammar("root ::= answer\n")
	fmt.Println(err)
	// Output:
	// true true false
	// grammar: 1:10: rule "answer" is not defined
}

// A choice allows exactly one of its strings.
func ExampleNewChoice() {
	p, err := constraint.NewChoice([]string{"red", "green", "blue"})
	if err != nil {
		fmt.Println(err)
		return
	}
	m := p.Matcher()
	_, ok := m.AdvanceBytes([]byte("gre"))
	fmt.Println(ok, m.IsAccepting())
	_, ok = m.AdvanceBytes([]byte("en"))
	fmt.Println(ok, m.IsAccepting())
	// Output:
	// true false
	// true true
}

// A regex constraint accepts the strings the expression matches in full.
func ExampleNewRegex() {
	p, err := constraint.NewRegex(`[0-9]{3}-[0-9]{4}`)
	if err != nil {
		fmt.Println(err)
		return
	}
	m := p.Matcher()
	_, ok := m.AdvanceBytes([]byte("555-12"))
	fmt.Println(ok, m.IsAccepting(), m.CanAdvance('3'), m.CanAdvance('-'))

	_, err = constraint.NewRegex(`\bword`)
	fmt.Println(err)
	// Output:
	// true false true false
	// regex "\\bword": word boundaries (\b, \B) are not supported
}
