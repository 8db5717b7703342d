package constraint_test

import (
	"fmt"
	"math"

	"github.com/loomlm/loom/constraint"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/models"
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

// A lazy constraint lets the text be anything until it writes its trigger; from there the
// grammar holds it. Here a model answering with the embedded tokenizer writes prose, then
// opens a call, which the grammar then holds to "<call>" and a number.
func ExampleNewLazy() {
	m, tok, err := models.Open("default", llama.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	p, err := constraint.NewGrammar(`root ::= "<call>" [0-9]+ "</call>"`)
	if err != nil {
		fmt.Println(err)
		return
	}
	lazy := constraint.NewLazy(p, "<call>", false)
	seq, _ := core.NewSequence(nil, 0, core.SequenceOptions{Tokenizer: tok})
	write := func(text string) {
		ids, _ := tok.Encode(text, core.EncodeOptions{})
		for _, id := range ids {
			lazy.Accept(seq, id)
		}
	}
	write("Let me count. ")
	fmt.Println(lazy.Active())
	write("<call>")
	fmt.Println(lazy.Active())
	// The grammar now bans every token that is not a digit.
	row := make([]float32, tok.VocabSize())
	c := core.NewCandidates(row)
	_ = lazy.Process(seq, c)
	allowed := 0
	for _, v := range c.Dense() {
		if !math.IsInf(float64(v), -1) {
			allowed++
		}
	}
	seven, _ := tok.Encode("7", core.EncodeOptions{})
	word, _ := tok.Encode("whale", core.EncodeOptions{})
	fmt.Println(allowed > 0, !math.IsInf(float64(c.Dense()[seven[0]]), -1), math.IsInf(float64(c.Dense()[word[0]]), -1))
	// Output:
	// false
	// true
	// true true true
}
