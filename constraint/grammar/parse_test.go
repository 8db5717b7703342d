package grammar

import (
	"strings"
	"testing"
)

func TestParseValid(t *testing.T) {
	tests := []struct {
		name, src string
		rules     int
	}{
		{"literal", `root ::= "abc"`, 1},
		{"alternatives and refs", "root ::= a | b\na ::= \"a\"\nb ::= \"b\"\n", 3},
		{"comments and blank lines", "# head\n\nroot ::= \"x\" # tail\n\n# end\n", 1},
		{"continuation after bar", "root ::= \"a\" |\n   \"b\"\n", 1},
		{"newlines inside groups", "root ::= (\n  \"a\"\n  \"b\"\n)\n", 1},
		{"repetitions", `root ::= "a"? "b"* "c"+ "d"{2} "e"{2,} "f"{,3} "g"{1,4}`, 1},
		{"classes", `root ::= [a-zA-Z_] [^"\\\x7F\x00-\x1F] [\u00e9-\U0001F600] .`, 1},
		{"escapes in literals", `root ::= "\t\n\r\\\"\x41\u00e9\U0001F600"`, 1},
		{"crlf line ends", "root ::= a\r\na ::= \"a\"\r\n", 2},
		{"left recursion", "root ::= root \"a\" | \"a\"", 1},
		{"empty alternative", `root ::= "a" | `, 1},
		{"dashes in names", "root ::= my-rule\nmy-rule ::= \"x\"", 2},
		{"body on the next line", "root ::=\n  \"{\" (\n    [a-z] | # a letter\n    \"\\\\\" [nt] # an escape\n  )* \"}\"\n\nnext ::= \"x\"\n", 2},
		{"brackets and carets inside a class", "root ::= [!#-/:-@[\\\\\\]^_`{-~]", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Parse(tt.src)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(g.Rules) != tt.rules {
				t.Fatalf("got %d rules, want %d", len(g.Rules), tt.rules)
			}
			if _, err := Compile(g, "root"); err != nil {
				t.Fatalf("Compile: %v", err)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"no rules", "# nothing\n", "2:1: grammar has no rules"},
		{"missing ::=", "root \"a\"", "1:6: expected ::= after rule name \"root\""},
		{"unclosed string", "root ::= \"abc\n", "1:14: string opened at 1:10 is not closed"},
		{"unclosed class", "root ::= [a-z", "1:14: character class opened at 1:10 is not closed"},
		{"unclosed group", "root ::= (\"a\" \"b\"", "1:18: expected ) to close the group opened at 1:10"},
		{"unknown escape", `root ::= "\q"`, `1:11: unknown escape \q`},
		{"short hex escape", `root ::= "\x4"`, "1:11: escape needs 2 hex digits"},
		{"reversed range", "root ::= [z-a]", "1:11: character range 'z'-'a' is reversed"},
		{"bad repetition", "root ::= \"a\"{3,1}", "1:13: repetition {3,1}: maximum is less than minimum"},
		{"huge repetition", "root ::= \"a\"{99999}", "1:14: repetition count 99999 is larger than 10000"},
		{"dangling star", "root ::= * \"a\"", "1:10: repetition '*' has nothing to repeat"},
		{"duplicate rule", "root ::= \"a\"\nroot ::= \"b\"", "2:1: rule \"root\" is defined twice (first at 1:1)"},
		{"junk after rule", "root ::= \"a\" )", "1:14: expected end of line after rule \"root\""},
		{"token reference", "root ::= <[1000]>", "1:10: token references"},
		{"surrogate literal", `root ::= "\uD800"`, "1:11: code point U+D800 is a surrogate"},
		{"beyond unicode", `root ::= [\U00110000]`, "1:11: code point U+110000 is beyond U+10FFFF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.src)
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"undefined rule", "root ::= a \"x\"\nb ::= \"y\"", `1:10: rule "a" is not defined`},
		{"undefined rule in group", "root ::= (\"x\" | other)", `1:17: rule "other" is not defined`},
		{"accepts nothing", "root ::= root \"a\"", `1:1: rule "root" derives no finite string: the grammar accepts nothing`},
		{"empty class", `root ::= [^\x00-\U0010FFFF]`, "accepts nothing"},
		{"unproductive helper rule", "root ::= \"a\" | loop\nloop ::= \"b\" loop", `2:1: rule "loop" derives no finite string`},
		{"mutual recursion without base", "root ::= a\na ::= b \"x\"\nb ::= a", `1:1: rule "root" derives no finite string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Parse(tt.src)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			_, err = Compile(g, "root")
			if err == nil {
				t.Fatal("Compile succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestCompileMissingStart(t *testing.T) {
	g, err := Parse(`main ::= "a"`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(g, "root"); err == nil || !strings.Contains(err.Error(), `no rule named "root"`) {
		t.Fatalf("got %v, want an error about the missing root rule", err)
	}
	if _, err := Compile(g, "main"); err != nil {
		t.Fatalf("Compile with start main: %v", err)
	}
}
