package constraint_test

import (
	"testing"

	"github.com/loomlm/loom/constraint/earley"
	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/constraint/jsonschema"
)

// llamaCppCase is one case of llama.cpp's grammar integration test.
type llamaCppCase struct {
	name, grammar, schema string
	pass, fail            []string
	differs               []string // of fail: strings loom accepts, with why below
	why                   string
}

// The cases of llama.cpp's grammar integration test (tests/test-grammar-integration.cpp of
// https://github.com/ggml-org/llama.cpp, MIT licence): a grammar or a JSON Schema, strings it
// must accept in full and strings it must not. Where loom deliberately differs, the case says
// so in differs (strings llama.cpp rejects and loom accepts) with the reason; cases using
// llama.cpp's token references (<[10]>), which loom does not support, are not ported.
var llamaCppCases = []llamaCppCase{
	{name: "simple grammar", grammar: `
            root ::= expr
            expr ::= term ("+" term)*
            term ::= number
            number ::= [0-9]+`,
		pass: []string{"42", "1+2+3+4+5", "123+456"},
		fail: []string{"+", "/ 3", "1+2+3+4+5+", "12a45"}},
	{name: "medium complexity grammar", grammar: `
            root ::= expression
            expression ::= term ws (("+"|"-") ws term)*
            term ::= factor ws (("*"|"/") ws factor)*
            factor ::= number | variable | "(" expression ")" | function-call
            number ::= [0-9]+
            variable ::= [a-zA-Z_][a-zA-Z0-9_]*
            function-call ::= variable ws "(" (expression ("," ws expression)*)? ")"
            ws ::= [ \t\n\r]?`,
		pass: []string{"42", "1*2*3*4*5", "x", "x+10", "x1+y2", "(a+b)*(c-d)", "func()", "func(x,y+2)", "a*(b+c)-d/e",
			"f(g(x),h(y,z))", "x + 10", "x1 + y2", "(a + b) * (c - d)", "func()", "func(x, y + 2)", "a * (b + c) - d / e",
			"f(g(x), h(y, z))", "123+456", "123*456*789-123/456+789*123",
			"123+456*789-123/456+789*123-456/789+123*456-789/123+456*789-123/456+789*123-456"},
		fail: []string{"+", "/ 3x", "x + + y", "a * / b", "func(,)", "func(x y)", "(a + b", "x + y)", "a + b * (c - d", "42 +",
			"x +", "x + 10 +", "(a + b) * (c - d", "func(", "func(x, y + 2", "a * (b + c) - d /", "f(g(x), h(y, z)",
			"123+456*789-123/456+789*123-456/789+123*456-789/123+456*789-123/456+789*123-456/"}},
	{name: "special characters", grammar: `root ::= ... "abc" ...`,
		pass: []string{"abcabcabc", "aaaabcccc", "🔵🟠✅abc❌🟠🔵"},
		fail: []string{"aaabcccc", "aaaaabcccc", "aaaabccc", "aaaabccccc", "🔵🟠✅❌abc❌✅🟠🔵", "🔵🟠abc🟠🔵"}},
	{name: "* quantifier", grammar: `root ::= "a"*`,
		pass: []string{"", "a", "aaaaa", "aaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		fail: []string{"b", "ab", "aab", "ba", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"}},
	{name: "+ quantifier", grammar: `root ::= "a"+`,
		pass: []string{"a", "aaaaa", "aaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		fail: []string{"", "b", "ab", "aab", "ba", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"}},
	{name: "? quantifier", grammar: `root ::= "a"?`,
		pass: []string{"", "a"}, fail: []string{"b", "ab", "aa", "ba"}},
	{name: "mixed quantifiers", grammar: `
            root ::= cons+ vowel* cons? (vowel cons)*
            vowel ::= [aeiouy]
            cons ::= [bcdfghjklmnpqrstvwxyz]`,
		pass: []string{"yes", "no", "noyes", "crwth", "four", "bryyyy"},
		fail: []string{"yess", "yesno", "forty", "catyyy"}},
	{name: "simple exact repetition", grammar: `root ::= [ab]{4}`,
		pass: []string{"aaaa", "bbbb", "abab"}, fail: []string{"a", "b", "aaaaa"}},
	{name: "simple min repetition", grammar: `root ::= [ab]{4,}`,
		pass: []string{"aaaa", "aaaaab", "bbbb", "ababab"}, fail: []string{"", "aba"}},
	{name: "simple max repetition", grammar: `root ::= [ab]{0,4}`,
		pass: []string{"", "a", "aa", "aaa", "aaab"}, fail: []string{"aaaaa"}},
	{name: "min / max repetition", grammar: `root ::= ("0x" [A-F0-9]{2} " "?){3,5}`,
		pass: []string{"0xFF 0x12 0xAB", "0xFF 0x12 0xAB 0x00 0x00"},
		fail: []string{"", "0xFF", "0xFF 0x12", "0xFF 0x12 0xAB 0x00 0x00 0x00"}},
	{name: "segfault", grammar: `root ::= ( [x]* )*`, pass: []string{"", "x", "xx"}, fail: []string{"y", "yy"}},
	{name: "hang", grammar: `root ::= (((((([^x]*){0,99}){0,99}){0,99}){0,99}){0,99}){0,99}`,
		pass: []string{"", "abc"}, fail: []string{"x"}},
	// llama.cpp refuses left recursion; loom's Earley parser takes it (docs/structured.md).
	{name: "left recursion (llama.cpp refuses it)", grammar: `root ::= "a" | root "a"`,
		pass: []string{"a", "aaaa"}, fail: []string{"", "b"}},
	{name: "indirect left recursion (llama.cpp refuses it)", grammar: `
        root ::= asdf
        asdf ::= "a" | foo "b"
        foo ::= "c" | empty asdf "d" | "e"
        empty ::= "blah" | `,
		pass: []string{"a", "cb", "eb", "adb", "blahadb"}, fail: []string{"", "d", "ab"}},

	// JSON Schema cases (llama.cpp converts the schema to a grammar first).
	{name: "min 0", schema: `{"type": "integer", "minimum": 0}`,
		pass:    []string{"0", "10", "12", "10000"},
		fail:    []string{"-1", "-10", "-10000", "-100000000000000000000000000000000", "100000000000000000000000000000000", "00", "01", "-0"},
		differs: []string{"100000000000000000000000000000000"}, why: "loom allows integers of up to 40 digits, llama.cpp 15 past the first"},
	{name: "min 2", schema: `{"type": "integer", "minimum": 2}`,
		pass:    []string{"2", "3", "4", "10", "20", "1234567890000000"},
		fail:    []string{"0", "1", "-1", "-100", "0", "1", "01", "02", "12345678900000000"},
		differs: []string{"12345678900000000"}, why: "loom allows integers of up to 40 digits"},
	{name: "min 456", schema: `{"type": "integer", "minimum": 456}`,
		pass: []string{"456", "4560", "457", "460", "500"}, fail: []string{"455", "356", "50", "050", "-1", "-456"}},
	{name: "min -123", schema: `{"type": "integer", "minimum": -123}`,
		pass: []string{"-123", "-122", "-11", "-1", "0", "1", "123", "1234", "2345"}, fail: []string{"-1234", "-124"}},
	{name: "max 9999", schema: `{"type": "integer", "maximum": 9999}`,
		pass: []string{"-99999", "0", "9999"}, fail: []string{"10000", "99991"}},
	{name: "max -9999", schema: `{"type": "integer", "maximum": -9999}`,
		pass: []string{"-10000", "-9999"}, fail: []string{"-9998", "0", "9999"}},
	{name: "min 5 max 30", schema: `{"type": "integer", "minimum": 5, "maximum": 30}`,
		pass: []string{"5", "10", "30"}, fail: []string{"05", "4", "-1", "31", "123", "0123"}},
	{name: "min 1 max 900719925474091", schema: `{"type": "integer", "exclusiveMinimum": 0, "maximum": 900719925474091}`,
		pass: []string{"1", "2", "10", "900719925474090", "900719925474091"},
		fail: []string{"0", "01", "900719925474092", "9007199254740910"}},
	{name: "min -1 max 1", schema: `{"type": "integer", "minimum": -1, "maximum": 1}`,
		pass: []string{"-1", "0", "1"}, fail: []string{"-11", "-10", "-2", "2", "10", "11"}},
	{name: "min -123 max 42", schema: `{"type": "integer", "minimum": -123, "maximum": 42}`,
		pass: []string{"-123", "-122", "-13", "-11", "-2", "-1", "0", "1", "5", "10", "39", "40", "42"},
		fail: []string{"-0123", "-124", "-1123", "-200", "43", "123", "0123"}},
	{name: "exclusive min / max", schema: `{"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10000}`,
		pass: []string{"1", "9999"}, fail: []string{"0", "01", "10000", "99999"}},
	{name: "empty schema", schema: `{}`,
		pass:    []string{`{}`, `{"foo": "bar"}`},
		fail:    []string{"", "[]", "null", `""`, "true"},
		differs: []string{"[]", "null", `""`, "true"}, why: "JSON Schema's {} accepts every JSON value; llama.cpp takes it as an object"},
	{name: "string", schema: `{"type": "string"}`,
		pass: []string{`"foo"`, `"bar"`, `""`}, fail: []string{`{}`, `"foo": "bar"`}},
	{name: "string w/ min length 1", schema: `{"type": "string", "minLength": 1}`,
		pass: []string{`"foo"`, `"bar"`}, fail: []string{`""`, `{}`, `"foo": "bar"`}},
	{name: "string w/ min length 3", schema: `{"type": "string", "minLength": 3}`,
		pass: []string{`"foo"`, `"bar"`, `"foobar"`}, fail: []string{`""`, `"f"`, `"fo"`}},
	{name: "string w/ max length", schema: `{"type": "string", "maxLength": 3}`,
		pass: []string{`"foo"`, `"bar"`, `""`, `"f"`, `"fo"`}, fail: []string{`"foobar"`}},
	{name: "string w/ min & max length", schema: `{"type": "string", "minLength": 1, "maxLength": 4}`,
		pass: []string{`"foo"`, `"bar"`, `"f"`, `"barf"`}, fail: []string{`""`, `"barfo"`, `"foobar"`}},
	{name: "boolean", schema: `{"type": "boolean"}`,
		pass: []string{"true", "false"}, fail: []string{`""`, `"true"`, "True", "FALSE"}},
	{name: "integer", schema: `{"type": "integer"}`,
		pass: []string{"0", "12345", "1234567890123456"}, fail: []string{"", "01", "007", "12345678901234567  "}},
	{name: "string const", schema: `{"const": "foo"}`, pass: []string{`"foo"`}, fail: []string{"foo", `"bar"`}},
	{name: "non-string const", schema: `{"const": true}`, pass: []string{"true"}, fail: []string{"", "foo", `"true"`}},
	{name: "enum", schema: `{"enum": ["red", "amber", "green", null, 42, ["foo"]]}`,
		pass: []string{`"red"`, "null", "42", `["foo"]`}, fail: []string{"", "420", "true", "foo"}},
	{name: "simple pattern", schema: `{"pattern": "^[a-zA-Z0-9_-]*$"}`,
		pass: []string{`""`, `"He_llo-12"`}, fail: []string{`"!"`, `"Hello World"`}},
	{name: "pattern with escapes", schema: `{"pattern": "^a\\^\\$\\.\\[\\]\\(\\)\\|\\{\\}\\*\\+\\?b$"}`,
		pass: []string{`"a^$.[]()|{}*+?b"`}, fail: []string{`"ab"`}},
	{name: "nullable array of strings", schema: `{"type": ["array", "null"], "items": {"type": "string"}}`,
		pass: []string{"null", "[]", `["123"]`, `["foo", "bar"]`}, fail: []string{"", "[123]", `"foo"`, `["foo", 42]`}},
	{name: "min+max items", schema: `{"items": {"type": ["number", "integer"]}, "minItems": 3, "maxItems": 5}`,
		pass: []string{"[1, 2, 3]", "[1, 2, 3, 4]", "[1, 2, 3, 4, 5]"}, fail: []string{"[1, 2]", "[1, 2, 3, 4, 5, 6]", "1"},
		differs: []string{"1"}, why: "without a type the schema accepts any non-array value; llama.cpp takes items as making it an array"},
}

// TestLlamaCppGrammarCases runs llama.cpp's grammar integration cases.
func TestLlamaCppGrammarCases(t *testing.T) {
	for _, c := range llamaCppCases {
		t.Run(c.name, func(t *testing.T) {
			var cfg *grammar.CFG
			var err error
			if c.schema != "" {
				cfg, err = jsonschema.Compile([]byte(c.schema), jsonschema.Options{FlexibleWhitespace: true})
			} else {
				var g *grammar.Grammar
				if g, err = grammar.Parse(c.grammar); err == nil {
					cfg, err = grammar.Compile(g, "root")
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			accepts := func(s string) bool {
				m := earley.New(cfg)
				_, ok := m.AdvanceBytes([]byte(s))
				return ok && m.IsAccepting()
			}
			for _, s := range c.pass {
				if !accepts(s) {
					t.Errorf("rejects %q", s)
				}
			}
			differs := map[string]bool{}
			for _, s := range c.differs {
				differs[s] = true
			}
			for _, s := range c.fail {
				if got := accepts(s); got != differs[s] {
					if got {
						t.Errorf("accepts %q", s)
					} else {
						t.Errorf("rejects %q, which loom should accept: %s", s, c.why)
					}
				}
			}
		})
	}
}

// TestLlamaCppGrammarFailures: a grammar without a root rule, and one referring to a rule
// it does not define, are errors, as in llama.cpp.
func TestLlamaCppGrammarFailures(t *testing.T) {
	for _, src := range []string{
		"rot ::= expr\nexpr ::= term (\"+\" term)*\nterm ::= number\nnumber ::= [0-9]+",
		"root ::= expr\nexpr ::= term (\"+\" term)*\nterm ::= numero\nnumber ::= [0-9]+",
	} {
		g, err := grammar.Parse(src)
		if err == nil {
			_, err = grammar.Compile(g, "root")
		}
		if err == nil {
			t.Errorf("%q compiled", src)
		}
	}
}
