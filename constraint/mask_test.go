package constraint_test

import (
	"testing"

	"github.com/loomlm/loom/constraint"
	"github.com/loomlm/loom/core"
)

// TestMaskMatchesBruteForce compares the trie walk's mask, at several points of several
// grammars, with a check of every token of the embedded vocabulary on its own: a token is
// allowed when a copy of the parser accepts all its bytes (an end-of-generation token when
// the parser accepts the text so far).
func TestMaskMatchesBruteForce(t *testing.T) {
	_, tok := openDefault(t)
	tests := []struct {
		name, grammar, text string
		sliced              bool // the parser runs a repetition with a vocabulary slice
	}{
		{"json", jsonGrammar, `{"name": "Ann", "list": [1, -2.5e3, true, {"x": null}], "s": "a\"b\u00e9"}`, true},
		{"person", personGrammar, `{ "name": "Bob smith", "age": 42, "tags": ["x", "yy"] }`, true},
		{"unicode", `root ::= [α-ω]+ " " [^\x00-\x7F]{1,3} "."`, "αβγ é日本.", true},
		{"choice", `root ::= "the Lord" | "the Lord God" | "thee" | "then"`, "the Lord God", false},
		// Repetitions whose body is regular take whole vocabulary slices (bounded ones by
		// their remaining copies); the walk must still give the exact mask.
		{"bounded", `root ::= "\"" [a-z ]{1,12} "\"" | "\"" [a-z]{2,6} "!\"" | "<" [^<>]{0,40} ">"`, `"and the lord"`, true},
		{"string", `root ::= "\"" ( [^"\\\x00-\x1F] | "\\" ["\\/bfnrt] )* "\"" [ ]{0,9} "."`, `"In the \"God\" é\\ the" .`, true},
		{"digits", `root ::= [0-9]{5,} ("." [0-9]{0,7})? " " [a-z]+`, "1234567.1234567 and", true},
		// Required copies written as a chain of rules, each copy's body a rule of its own
		// (as a schema's minLength is translated): one run of the repetition after them.
		{"chain", "root ::= \"\\\"\" s0 \"\\\"\"\ns0 ::= a s1\ns1 ::= b s2\ns2 ::= c tail\ntail ::= d*\na ::= [a-z ]\nb ::= [a-z ]\nc ::= [a-z ]\nd ::= [a-z ]", `"and the lord"`, true},
		{"loop and chain", "root ::= \"\\\"\" a tail1 \"\\\"\" | \"'\" s0 \"'\"\ntail1 ::= a*\ns0 ::= b s1\ns1 ::= c tail2\ntail2 ::= d*\na ::= [a-z ]\nb ::= [a-z ]\nc ::= [a-z ]\nd ::= [a-z ]", `'the lord'`, true},
		{"bounded chain", "root ::= \"\\\"\" s0 \"\\\"\"\ns0 ::= a s1\ns1 ::= b s2\ns2 ::= c tail\ntail ::= d{0,9}\na ::= [a-z ]\nb ::= [a-z ]\nc ::= [a-z ]\nd ::= [a-z ]", `"the lord"`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := constraint.NewGrammar(tt.grammar)
			if err != nil {
				t.Fatal(err)
			}
			text := []byte(tt.text)
			someAllowed, someBanned, sliced := false, false, false
			for cut := 0; cut <= len(text); cut++ {
				q := p.Clone().(*constraint.Processor)
				m := q.Matcher()
				if _, ok := m.AdvanceBytes(text[:cut]); !ok {
					t.Fatalf("grammar rejects prefix %q", text[:cut])
				}
				mask := q.Mask(tok)
				sliced = sliced || len(m.ActiveRuns(nil)) > 0
				for id := range tok.VocabSize() {
					want := allowedDirect(q, tok, core.TokenID(id))
					if got := mask.Has(core.TokenID(id)); got != want {
						t.Fatalf("after %q: token %d (%q) in mask = %v, brute force %v", text[:cut], id, tok.Piece(core.TokenID(id)), got, want)
					}
					someAllowed = someAllowed || want
					someBanned = someBanned || !want
				}
				if m.Len() != cut {
					t.Fatalf("Mask moved the parser: Len %d, want %d", m.Len(), cut)
				}
			}
			if sliced != tt.sliced {
				t.Fatalf("vocabulary slices used: %v, want %v", sliced, tt.sliced)
			}
			if !someAllowed || !someBanned {
				t.Fatalf("masks were trivial (some allowed %v, some banned %v)", someAllowed, someBanned)
			}
		})
	}
}

// allowedDirect decides one token without the trie, on a clone of q's parser.
func allowedDirect(q *constraint.Processor, tok core.Tokenizer, id core.TokenID) bool {
	m := q.Matcher().Clone()
	for _, e := range tok.Special().EndOfGeneration {
		if e == id {
			return m.IsAccepting()
		}
	}
	b := tok.TokenBytes(id)
	if len(b) == 0 {
		return false
	}
	_, ok := m.AdvanceBytes(b)
	return ok
}
