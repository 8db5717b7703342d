package regex

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/loomlm/loom/constraint/earley"
)

// TestAgainstGoRegexp checks, on random strings, that the compiled grammar accepts exactly the
// strings Go's regexp matches in full.
func TestAgainstGoRegexp(t *testing.T) {
	tests := []struct{ re, alphabet string }{
		{`[a-c]+x?`, "abcx"},
		{`(ab|c)*d{1,3}`, "abcd"},
		{`^\d{2,4}(\.\d+)?$`, "0123.x"},
		{`(?i)yes|no`, "yesnoYESNO"},
		{`\w+\s\w*`, "a_1 \t-"},
		{`[^a]*a[^a]*`, "abc"},
		{`(?s)a.b`, "ab\nc"},
		{`a.b`, "ab\nc"},
		{`x{0}y{2}z{1,}`, "xyz"},
		{`(é|日本)+[α-γ]?`, "é日本αβδ"},
		{`(a*)*b`, "ab"},
		{`a*?b+?`, "ab"},
		{`\A(\p{Greek}|[[:digit:]])+\z`, "αβ1a"},
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tt := range tests {
		cfg, err := Compile(tt.re)
		if err != nil {
			t.Fatalf("%s: %v", tt.re, err)
		}
		re := regexp.MustCompile(`^(?:` + tt.re + `)$`)
		alphabet := []rune(tt.alphabet)
		m := earley.New(cfg)
		accepted := 0
		for range 3000 {
			n := rng.IntN(8)
			var b strings.Builder
			for range n {
				b.WriteRune(alphabet[rng.IntN(len(alphabet))])
			}
			s := b.String()
			want := re.MatchString(s)
			m.Rollback(0)
			_, ok := m.AdvanceBytes([]byte(s))
			if got := ok && m.IsAccepting(); got != want {
				t.Fatalf("%s: %q: grammar says %v, regexp %v", tt.re, s, got, want)
			}
			if want {
				accepted++
			}
		}
		if accepted == 0 {
			t.Fatalf("%s: no random string matched; the comparison is vacuous", tt.re)
		}
	}
}

func TestErrors(t *testing.T) {
	for re, want := range map[string]string{
		`a(b`:                "missing closing )",
		`a^b`:                `^ or \A is only supported at the start`,
		`a$b`:                `$ or \z is only supported at the end`,
		`(?m)^a$`:            "line anchors",
		`\bword\b`:           "word boundaries",
		`a{2,20000}`:         "invalid repeat count",
		`[^\x00-\x{10FFFF}]`: "accepts nothing",
	} {
		if _, err := Compile(re); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", re, err, want)
		}
	}
}
