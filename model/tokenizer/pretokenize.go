package tokenizer

import (
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"
)

// Character classes of the pre-tokenizers: \p{L}, \p{N}, \s. A character in none of them
// (punctuation, symbols, marks, and bytes that are not UTF-8) is of class "other" (0).
const (
	clsLetter uint8 = 1 << iota
	clsNumber
	clsSpace
	clsEnd // past the end of the text
)

var asciiClass [128]uint8

func init() {
	for c := range 128 {
		r := rune(c)
		switch {
		case unicode.IsLetter(r):
			asciiClass[c] = clsLetter
		case unicode.IsNumber(r):
			asciiClass[c] = clsNumber
		case unicode.IsSpace(r):
			asciiClass[c] = clsSpace
		}
	}
}

// classAt returns the class of the character at s[i] and its size in bytes.
func classAt(s string, i int) (uint8, int) {
	if i >= len(s) {
		return clsEnd, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && n == 1 {
		return 0, 1
	}
	switch {
	case unicode.IsLetter(r):
		return clsLetter, n
	case unicode.IsNumber(r):
		return clsNumber, n
	case unicode.IsSpace(r):
		return clsSpace, n
	}
	return 0, n
}

// skipClass returns the end of the run of characters of class cls starting at i.
func skipClass(s string, i int, cls uint8) int {
	for {
		c, n := classAt(s, i)
		if c != cls {
			return i
		}
		i += n
	}
}

// contraction returns the length of an English contraction ('s 't 're 've 'm 'll 'd) at s[i],
// which is an apostrophe, or 0; fold makes it case-insensitive.
func contraction(s string, i int, fold bool) int {
	lower := func(c byte) byte {
		if fold && 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	if i+1 >= len(s) {
		return 0
	}
	switch lower(s[i+1]) {
	case 's', 't', 'm', 'd':
		return 2
	}
	if i+2 >= len(s) {
		return 0
	}
	switch string([]byte{lower(s[i+1]), lower(s[i+2])}) {
	case "re", "ve", "ll":
		return 3
	}
	return 0
}

// whitespace returns the end of the token of the whitespace run starting at i: with newlines
// set, through the run's last '\r' or '\n' if it has one (\s*[\r\n]+); otherwise all of a run
// that ends the text, or all but its last character when it is longer than one and followed by
// other text (\s+(?!\S)), or the single character (\s+).
func whitespace(s string, i int, newlines bool) int {
	end, last, lastNL, count := i, i, -1, 0
	for {
		c, n := classAt(s, end)
		if c != clsSpace {
			break
		}
		if s[end] == '\r' || s[end] == '\n' {
			lastNL = end + 1
		}
		last = end
		end += n
		count++
	}
	if newlines && lastNL >= 0 {
		return lastNL
	}
	if count > 1 && end < len(s) {
		return last
	}
	return end
}

// gpt2Next returns the end of the token at s[i] for GPT-2's expression
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func gpt2Next(s string, i int) int {
	if s[i] == '\'' {
		if n := contraction(s, i, false); n > 0 {
			return i + n
		}
	}
	j := i
	if s[i] == ' ' {
		j++
	}
	switch c, _ := classAt(s, j); c {
	case clsLetter, clsNumber:
		return skipClass(s, j, c)
	case 0:
		return skipClass(s, j, 0)
	}
	return whitespace(s, i, false)
}

// llama3Next returns the end of the token at s[i] for Llama 3's expression (maxDigits 3) and
// Qwen2's (maxDigits 1):
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func llama3Next(s string, i, maxDigits int) int {
	if s[i] == '\'' {
		if n := contraction(s, i, true); n > 0 {
			return i + n
		}
	}
	c, n := classAt(s, i)
	switch {
	case c == clsLetter:
		return skipClass(s, i, clsLetter)
	case c == clsNumber:
		for k := 0; k < maxDigits; k++ {
			c, n := classAt(s, i)
			if c != clsNumber {
				break
			}
			i += n
		}
		return i
	case s[i] != '\r' && s[i] != '\n':
		// One character that is not a letter, digit or newline, then letters.
		if next, _ := classAt(s, i+n); next == clsLetter {
			return skipClass(s, i+n, clsLetter)
		}
	}
	j := i
	if s[i] == ' ' {
		j++
	}
	if c, _ := classAt(s, j); c == 0 {
		j = skipClass(s, j, 0)
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	return whitespace(s, i, true)
}

// isDefaultPunct matches [\p{P}\$\+<=>\^~\|].
func isDefaultPunct(r rune) bool {
	switch r {
	case '$', '+', '<', '=', '>', '^', '~', '|':
		return true
	}
	return unicode.IsPunct(r)
}

// runMatcher returns a matcher of one or more characters satisfying ok.
func runMatcher(ok func(rune) bool, most int) func(s string, i int) int {
	return func(s string, i int) int {
		j := i
		for k := 0; k < most && j < len(s); k++ {
			r, n := utf8.DecodeRuneInString(s[j:])
			if (r == utf8.RuneError && n == 1) || !ok(r) {
				break
			}
			j += n
		}
		return j
	}
}

func isASCIIDigit(r rune) bool { return '0' <= r && r <= '9' }

// A stage splits a piece of text. A scanning stage (next) covers the piece with tokens; a
// matching stage (match) cuts out every leftmost match and keeps the text between matches as
// pieces too.
type stage struct {
	re    *regex // a regex stage (regex.go): matches and the text between them
	next  func(s string, i int) int
	match func(s string, i int) int // returns i when nothing matches at i
	exact int                       // match: only runs of exactly this many characters (0: any)
}

// pretokenizer splits text into the words that BPE tokenises one by one, by applying its
// stages in turn to the pieces of the previous one.
type pretokenizer struct {
	stages       []stage
	ignoreMerges bool // a word that is a whole vocabulary entry is taken as it is
	addBOS       bool // the family adds BOS unless the file says otherwise
}

var gpt2Stage = stage{next: gpt2Next}

var pretokenizers = map[string]*pretokenizer{}

func init() {
	llama3Stage := stage{next: func(s string, i int) int { return llama3Next(s, i, 3) }}
	llama3 := &pretokenizer{stages: []stage{llama3Stage}, ignoreMerges: true, addBOS: true}
	qwen2 := &pretokenizer{stages: []stage{{next: func(s string, i int) int { return llama3Next(s, i, 1) }}}}
	gpt2 := &pretokenizer{stages: []stage{gpt2Stage}}
	digitsFirst := &pretokenizer{stages: []stage{{match: runMatcher(unicode.IsNumber, 1)}, gpt2Stage}}
	def := &pretokenizer{stages: []stage{
		{match: runMatcher(isDefaultPunct, 1<<30)},
		gpt2Stage,
		{match: runMatcher(unicode.IsNumber, 1<<30)},
		{match: runMatcher(isASCIIDigit, 3), exact: 3},
	}}
	llama3Merges := &pretokenizer{stages: []stage{llama3Stage}}
	for name, p := range map[string]*pretokenizer{
		"default": def,
		"gpt-2":   gpt2, "phi-2": gpt2, "jina-es": gpt2, "jina-de": gpt2, "gigachat": gpt2,
		"jina-v2-es": gpt2, "jina-v2-de": gpt2, "a.x-4.0": gpt2, "mellum": gpt2, "modern-bert": gpt2,
		"jina-v1-en": gpt2, "jina-v2-code": gpt2, "roberta-bpe": gpt2, "mpt": gpt2, "olmo": gpt2,
		"jais": gpt2, "trillion": gpt2, "granite-docling": gpt2, "exaone4": gpt2,
		"llama3": llama3, "llama-v3": llama3, "llama-bpe": llama3, "falcon3": llama3,
		"falcon-h1": llama3, "pixtral": llama3, "midm-2.0": llama3, "lfm2": llama3, "jina-v5-nano": llama3,
		"dbrx": llama3Merges, "smaug-bpe": llama3Merges, "glm4": llama3Merges, "chatglm-bpe": llama3Merges,
		"qwen2": qwen2, "deepseek-r1-qwen": qwen2, "megrez": qwen2, "kormo": qwen2, "f2llmv2": qwen2,
		"stablelm2": qwen2, "hunyuan": qwen2, "solar-open": qwen2, "grok-2": qwen2,
		"smollm": digitsFirst, "starcoder": digitsFirst, "refact": digitsFirst, "command-r": digitsFirst,
		"codeshell": digitsFirst, "exaone": digitsFirst, "minerva-7b": digitsFirst, "mellum2": digitsFirst,
	} {
		pretokenizers[name] = p
	}
	for _, f := range regexFamilies {
		p := &pretokenizer{ignoreMerges: f.ignoreMerges, addBOS: f.addBOS}
		for _, src := range f.regexes {
			re, err := compileRegex(src)
			if err != nil {
				panic(fmt.Sprintf("tokenizer: pre-tokenizer %s: %v", f.names[0], err))
			}
			p.stages = append(p.stages, stage{re: re})
		}
		for _, name := range f.names {
			if pretokenizers[name] != nil {
				panic("tokenizer: pre-tokenizer " + name + " defined twice")
			}
			pretokenizers[name] = p
		}
	}
}

// Pretokenizers lists the supported values of "tokenizer.ggml.pre", sorted.
func Pretokenizers() []string {
	names := make([]string, 0, len(pretokenizers))
	for n := range pretokenizers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// split calls yield with each word of text, in order; the words cover text exactly.
func (p *pretokenizer) split(text string, yield func(string)) {
	p.splitStage(0, text, yield)
}

func (p *pretokenizer) splitStage(k int, s string, yield func(string)) {
	if k == len(p.stages) {
		yield(s)
		return
	}
	st := p.stages[k]
	emit := func(piece string) {
		if k+1 == len(p.stages) {
			yield(piece)
		} else {
			p.splitStage(k+1, piece, yield)
		}
	}
	if st.re != nil {
		st.re.split(s, emit)
		return
	}
	if st.next != nil {
		for i := 0; i < len(s); {
			j := st.next(s, i)
			if j <= i { // cannot happen; guarantees progress
				_, n := utf8.DecodeRuneInString(s[i:])
				j = i + n
			}
			emit(s[i:j])
			i = j
		}
		return
	}
	gap := 0
	for i := 0; i < len(s); {
		j := st.match(s, i)
		if st.exact > 0 && j > i && utf8.RuneCountInString(s[i:j]) != st.exact {
			j = i
		}
		if j > i {
			if gap < i {
				emit(s[gap:i])
			}
			emit(s[i:j])
			i, gap = j, j
			continue
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		i += n
	}
	if gap < len(s) {
		emit(s[gap:])
	}
}
