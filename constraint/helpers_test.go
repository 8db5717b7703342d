package constraint_test

import (
	"testing"

	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/model/tokenizer"
	"github.com/loomlm/loom/models"
)

// openDefault loads the embedded default model and its tokenizer.
func openDefault(t testing.TB) (*llama.Model, *tokenizer.Tokenizer) {
	t.Helper()
	m, tok, err := models.Open("default", llama.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, tok
}

// jsonGrammar is llama.cpp's JSON grammar as people write it (written anew here).
const jsonGrammar = `
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
`

// personGrammar is a small JSON object grammar of bounded length: every output ends.
const personGrammar = `
root ::= "{" ws "\"name\":" ws name "," ws "\"age\":" ws age ws "," ws "\"tags\":" ws tags ws "}"
name ::= "\"" [A-Za-z] [a-z ]{0,10} "\""
age  ::= [1-9] [0-9]? | "0"
tags ::= "[" ( tag ("," ws tag){0,2} )? "]"
tag  ::= "\"" [a-z]{1,6} "\""
ws   ::= " "?
`
