package tokenizer_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/loomlm/loom/model/tokenizer"
)

// familyCorpus is the Llama 3 corpus plus texts for the corners of the other families
// (digit grouping, camel case, Korean, kana, full-width punctuation, combining marks,
// chameleon's sentinels and image tokens, long whitespace runs). Texts JavaScript strings
// cannot hold (broken UTF-8) or where ECMAScript's \s differs from Unicode White_Space
// (U+0085, U+FEFF) are left out.
func familyCorpus(t *testing.T) []string {
	texts := append(llama3Corpus(t),
		"1234567 12345678 123456789 1,234,567.89 +49 (0)30 1234", "0123 007 2026",
		"CamelCaseWordsHTTPServer iPhone XMLHttpRequest O'Neil's l'homme", "ÀÉÎõü ǅungla ǈ ǋ ᾈ",
		"이것은 한국어 문장입니다. ㄱㄴㄷ ㅏㅑ", "ひらがな カタカナ ｶﾀｶﾅ 漢字かな交じり文。", "全角！（テスト）、“引用”…",
		"e\u0301te\u0301 a\u0308 नमस्ते क्षत्रिय", "<sentinel:12>IMGIMGABCDZ text IMGIMGAZ", "\t\n  \t    x  y",
		"a  b   c    d     e", strings.Repeat(" ", 600)+"x", "line\r\nline\rline\n\nend  \n",
		"don't DON'T We'Re it'S", "x=1;y=2 // comment\n/* block */", "ℂℇℊ ℌℍ Ωmega Kelvin \u212a \u2126",
		"1.5e-3 ½ ¾ ① ⅷ ٣٤٥ ۴۵۶ १२३", "((a|b).,!?…。，、।۔،)", "Ⅻ ⅻ ǅ ᾈ ᾼ", "   ", "",
	)
	var out []string
	for _, s := range texts {
		if utf8.ValidString(s) && !strings.ContainsAny(s, "\u0085\ufeff") {
			out = append(out, s)
		}
	}
	return out
}

// TestRegexFamiliesMatchECMAScript splits the corpus with every pre-tokenizer that runs on
// loom's regex engine and compares the words with those of Node's own RegExp engine running
// the same expressions (testdata/regexsplit.mjs): an independent ECMAScript implementation of
// the backtracking semantics these expressions are written for.
func TestRegexFamiliesMatchECMAScript(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed for the reference splits: %v", err)
	}
	texts := familyCorpus(t)
	type fam struct {
		Name    string   `json:"name"`
		Regexes []string `json:"regexes"`
	}
	var fams []fam
	for _, f := range tokenizer.RegexFamilies() {
		fams = append(fams, fam{f.Names[0], f.Regexes})
	}
	// Corners of the engine no family reaches: empty iterations, anchors, word boundaries,
	// bounded repeats of groups, nested quantifiers, dot.
	corners := [][]string{
		{`(?:a|)*b|(a*)+c`}, {`(?:x?)*y|(?:)+`}, {`\bthe\b|\B.`}, {`^.|.$`},
		{`(?=(\d{3})+$)`, `\d`}, {`(?:ab|a){2,3}|(?:\w\W){1,}`}, {`[^\s\S]|\S\s?`},
		{`(?:\p{Lu}\p{Ll}*)+|\P{L}+`}, {`.`},
	}
	for i, c := range corners {
		fams = append(fams, fam{fmt.Sprintf("corner %d", i), c})
	}
	in, err := json.Marshal(map[string]any{"families": fams, "texts": texts})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join("testdata", "regexsplit.mjs"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var want map[string][][]string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	words := 0
	for _, f := range tokenizer.RegexFamilies() {
		ref := want[f.Names[0]]
		if len(ref) != len(texts) {
			t.Fatalf("%s: %d reference splits for %d texts", f.Names[0], len(ref), len(texts))
		}
		for _, name := range f.Names {
			bad := 0
			for i, text := range texts {
				got, err := tokenizer.SplitWords(name, text)
				if err != nil {
					t.Fatal(err)
				}
				words += len(got)
				if !slices.Equal(got, ref[i]) && bad < 3 {
					bad++
					t.Errorf("%s: %q\n got %q\nwant %q", name, text, got, ref[i])
				}
			}
		}
	}
	for i, c := range corners {
		ref := want[fmt.Sprintf("corner %d", i)]
		for j, text := range texts {
			got, err := tokenizer.SplitRegexes(c, text)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, ref[j]) {
				t.Fatalf("%q: %q\n got %q\nwant %q", c, text, got, ref[j])
			}
		}
	}
	t.Logf("%d families and %d engine corner cases, %d texts, %d words identical", len(fams)-len(corners), len(corners), len(texts), words)
}

// TestRegexEngineMatchesScanners runs the original expressions of the families with
// hand-written scanners (in their ECMAScript spelling, contractions spelt out) on the regex
// engine: both must split every text of the corpus the same way.
func TestRegexEngineMatchesScanners(t *testing.T) {
	const contr = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`
	gpt2 := `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	for pre, exprs := range map[string][]string{
		"gpt-2":     {gpt2},
		"llama-bpe": {contr + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
		"qwen2":     {contr + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
		"smollm":    {`\p{N}`, gpt2},
		"default":   {`[\p{P}\$\+<=>\^~\|]+`, gpt2, `\p{N}+`, `[0-9][0-9][0-9]`},
	} {
		for _, text := range familyCorpus(t) {
			want, err := tokenizer.SplitWords(pre, text)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tokenizer.SplitRegexes(exprs, text)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: %q\nregex engine %q\n     scanner %q", pre, text, got, want)
			}
		}
	}
}
