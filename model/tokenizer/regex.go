package tokenizer

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A small backtracking regular-expression engine with ECMAScript semantics (leftmost match,
// alternatives tried in order, greedy quantifiers, lookahead), for the pre-tokenizer
// expressions of the BPE model families (llama.cpp's llama-vocab.cpp lists them, taken from
// each model's tokenizer.json). Go's regexp package cannot run them: it has no lookahead
// (`\s+(?!\S)`, `(?=[\p{L}])`), and its leftmost-longest mode is not the leftmost-first
// backtracking order these expressions are written for. The common families keep their
// hand-written scanners (pretokenize.go); this engine runs the others.
//
// Supported: literals, `.`, classes `[...]` with ranges and negation, `\s \S \d \D \w \W`,
// `\p{X}`/`\P{X}` for the categories L, Lu, Ll, Lt, Lm, Lo, M, N, P, S and the script Han,
// groups `(...)` and `(?:...)` (nothing is captured), `|`, `* + ? {n} {n,} {n,m}` (greedy),
// `(?=...)`, `(?!...)`, `^`, `$` and `\b`. \s is Unicode White_Space (as llama.cpp's), \d and
// \w are ASCII (as ECMAScript's).

type reOp uint8

const (
	reClass reOp = iota
	reConcat
	reAlt
	reRepeat
	reLookahead
	reNegLookahead
	reBegin
	reEnd
	reWordBoundary
	reNotWordBoundary
)

type reNode struct {
	op       reOp
	cls      *runeSet
	subs     []*reNode
	min, max int // reRepeat; max < 0 is unbounded
}

// runeSet is a set of characters: ranges (pairs, inclusive) and predicates, negated or not.
type runeSet struct {
	neg    bool
	ranges []rune
	preds  []func(rune) bool
}

func (c *runeSet) has(r rune) bool {
	in := false
	for i := 0; i < len(c.ranges); i += 2 {
		if c.ranges[i] <= r && r <= c.ranges[i+1] {
			in = true
			break
		}
	}
	if !in {
		for _, p := range c.preds {
			if p(r) {
				in = true
				break
			}
		}
	}
	return in != c.neg
}

// regex is a compiled expression.
type regex struct {
	src  string
	root *reNode
}

// compileRegex parses src; an error names the offset and what is wrong there.
func compileRegex(src string) (*regex, error) {
	p := &reParser{src: src}
	n, err := p.alt()
	if err == nil && p.pos < len(src) {
		err = p.errorf("unexpected %q", src[p.pos:p.pos+1])
	}
	if err != nil {
		return nil, err
	}
	return &regex{src: src, root: n}, nil
}

type reParser struct {
	src string
	pos int
}

func (p *reParser) errorf(format string, args ...any) error {
	return fmt.Errorf("regex %q at byte %d: %s", p.src, p.pos, fmt.Sprintf(format, args...))
}

func (p *reParser) peek() (rune, int) {
	if p.pos >= len(p.src) {
		return 0, 0
	}
	return utf8.DecodeRuneInString(p.src[p.pos:])
}

func (p *reParser) alt() (*reNode, error) {
	var alts []*reNode
	for {
		seq, err := p.concat()
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		if r, _ := p.peek(); r != '|' || p.pos >= len(p.src) {
			break
		}
		p.pos++
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return &reNode{op: reAlt, subs: alts}, nil
}

func (p *reParser) concat() (*reNode, error) {
	var items []*reNode
	for p.pos < len(p.src) {
		r, _ := p.peek()
		if r == '|' || r == ')' {
			break
		}
		atom, err := p.atom()
		if err != nil {
			return nil, err
		}
		atom, err = p.quantifier(atom)
		if err != nil {
			return nil, err
		}
		items = append(items, atom)
	}
	if len(items) == 1 {
		return items[0], nil
	}
	return &reNode{op: reConcat, subs: items}, nil
}

func (p *reParser) quantifier(atom *reNode) (*reNode, error) {
	r, n := p.peek()
	min, max := -1, -1
	switch r {
	case '*':
		min, max = 0, -1
		p.pos += n
	case '+':
		min, max = 1, -1
		p.pos += n
	case '?':
		min, max = 0, 1
		p.pos += n
	case '{':
		end := strings.IndexByte(p.src[p.pos:], '}')
		if end < 0 {
			return nil, p.errorf("unclosed {")
		}
		body := p.src[p.pos+1 : p.pos+end]
		lo, hi, comma := strings.Cut(body, ",")
		var err error
		if min, err = strconv.Atoi(lo); err != nil {
			return nil, p.errorf("bad repetition {%s}", body)
		}
		switch {
		case !comma:
			max = min
		case hi == "":
			max = -1
		default:
			if max, err = strconv.Atoi(hi); err != nil || max < min {
				return nil, p.errorf("bad repetition {%s}", body)
			}
		}
		p.pos += end + 1
	default:
		return atom, nil
	}
	if r, _ := p.peek(); r == '?' || r == '+' {
		return nil, p.errorf("lazy and possessive quantifiers are not supported")
	}
	if atom.op == reBegin || atom.op == reEnd || atom.op == reLookahead || atom.op == reNegLookahead {
		return nil, p.errorf("quantified assertion")
	}
	return &reNode{op: reRepeat, subs: []*reNode{atom}, min: min, max: max}, nil
}

func (p *reParser) atom() (*reNode, error) {
	r, n := p.peek()
	switch r {
	case '(':
		p.pos++
		op := reConcat
		switch {
		case strings.HasPrefix(p.src[p.pos:], "?:"):
			p.pos += 2
		case strings.HasPrefix(p.src[p.pos:], "?="):
			op = reLookahead
			p.pos += 2
		case strings.HasPrefix(p.src[p.pos:], "?!"):
			op = reNegLookahead
			p.pos += 2
		case strings.HasPrefix(p.src[p.pos:], "?"):
			return nil, p.errorf("unsupported group (%s", p.src[p.pos:min(p.pos+3, len(p.src))])
		}
		inner, err := p.alt()
		if err != nil {
			return nil, err
		}
		if r, _ := p.peek(); r != ')' {
			return nil, p.errorf("missing )")
		}
		p.pos++
		if op == reConcat {
			return inner, nil
		}
		return &reNode{op: op, subs: []*reNode{inner}}, nil
	case '[':
		return p.class()
	case '.':
		p.pos++
		return &reNode{op: reClass, cls: &runeSet{neg: true, ranges: []rune{'\n', '\n', '\r', '\r', 0x2028, 0x2029}}}, nil
	case '^':
		p.pos++
		return &reNode{op: reBegin}, nil
	case '$':
		p.pos++
		return &reNode{op: reEnd}, nil
	case '\\':
		switch p.src[min(p.pos+1, len(p.src)-1)] {
		case 'b':
			p.pos += 2
			return &reNode{op: reWordBoundary}, nil
		case 'B':
			p.pos += 2
			return &reNode{op: reNotWordBoundary}, nil
		}
		c := &runeSet{}
		if err := p.escape(c); err != nil {
			return nil, err
		}
		return &reNode{op: reClass, cls: c}, nil
	case '*', '+', '?', '{':
		return nil, p.errorf("nothing to repeat")
	}
	p.pos += n
	return &reNode{op: reClass, cls: &runeSet{ranges: []rune{r, r}}}, nil
}

// class parses [...] (p.pos at '[').
func (p *reParser) class() (*reNode, error) {
	p.pos++
	c := &runeSet{}
	if r, _ := p.peek(); r == '^' {
		c.neg = true
		p.pos++
	}
	first := true
	for {
		if p.pos >= len(p.src) {
			return nil, p.errorf("unclosed [")
		}
		r, n := p.peek()
		if r == ']' && !first {
			p.pos++
			break
		}
		first = false
		var lo rune
		if r == '\\' {
			before := len(c.ranges)
			preds := len(c.preds)
			if err := p.escape(c); err != nil {
				return nil, err
			}
			if len(c.preds) != preds || len(c.ranges) != before+2 || c.ranges[before] != c.ranges[before+1] {
				continue // a class escape (\s, \p{L}): no range from it
			}
			lo = c.ranges[before]
			c.ranges = c.ranges[:before]
		} else {
			lo = r
			p.pos += n
		}
		hi := lo
		if strings.HasPrefix(p.src[p.pos:], "-") && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' {
			p.pos++
			r2, n2 := p.peek()
			if r2 == '\\' {
				tmp := &runeSet{}
				if err := p.escape(tmp); err != nil {
					return nil, err
				}
				if len(tmp.preds) > 0 || len(tmp.ranges) != 2 || tmp.ranges[0] != tmp.ranges[1] {
					return nil, p.errorf("class escape as a range end")
				}
				hi = tmp.ranges[0]
			} else {
				hi = r2
				p.pos += n2
			}
			if hi < lo {
				return nil, p.errorf("range out of order")
			}
		}
		c.ranges = append(c.ranges, lo, hi)
	}
	return &reNode{op: reClass, cls: c}, nil
}

// escape parses the escape at p.pos into c: one character (a range of one) or a predicate.
func (p *reParser) escape(c *runeSet) error {
	if p.pos+1 >= len(p.src) {
		return p.errorf("trailing backslash")
	}
	p.pos++
	r, n := p.peek()
	p.pos += n
	lit := func(x rune) error { c.ranges = append(c.ranges, x, x); return nil }
	not := func(f func(rune) bool) func(rune) bool { return func(r rune) bool { return !f(r) } }
	switch r {
	case 'n':
		return lit('\n')
	case 'r':
		return lit('\r')
	case 't':
		return lit('\t')
	case 'f':
		return lit('\f')
	case 'v':
		return lit('\v')
	case '0':
		return lit(0)
	case 's', 'S', 'd', 'D', 'w', 'W':
		f := map[rune]func(rune) bool{'s': unicode.IsSpace, 'd': isASCIIDigit, 'w': isWordChar}[unicode.ToLower(r)]
		if unicode.IsUpper(r) {
			f = not(f)
		}
		c.preds = append(c.preds, f)
		return nil
	case 'p', 'P':
		if !strings.HasPrefix(p.src[p.pos:], "{") {
			return p.errorf(`\%c without {name}`, r)
		}
		end := strings.IndexByte(p.src[p.pos:], '}')
		if end < 0 {
			return p.errorf("unclosed \\%c{", r)
		}
		name := p.src[p.pos+1 : p.pos+end]
		table, ok := reCategories[name]
		if !ok {
			return p.errorf("unsupported property \\%c{%s}", r, name)
		}
		p.pos += end + 1
		f := func(r rune) bool { return unicode.Is(table, r) }
		if r == 'P' {
			f = not(f)
		}
		c.preds = append(c.preds, f)
		return nil
	case 'u', 'x':
		return p.errorf(`\%c escapes are not supported`, r)
	}
	if unicode.IsLetter(r) || unicode.IsDigit(r) {
		return p.errorf(`unknown escape \%c`, r)
	}
	return lit(r) // an escaped punctuation character
}

var reCategories = map[string]*unicode.RangeTable{
	"L": unicode.L, "Lu": unicode.Lu, "Ll": unicode.Ll, "Lt": unicode.Lt, "Lm": unicode.Lm, "Lo": unicode.Lo,
	"M": unicode.M, "N": unicode.N, "P": unicode.P, "S": unicode.S, "Han": unicode.Han,
}

func isWordChar(r rune) bool {
	return r == '_' || isASCIIDigit(r) || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')
}

// reMatcher runs a regex over one text (as runes).
type reMatcher struct {
	rs []rune
}

// matchAt returns the end of the leftmost-first match starting at i, if any.
func (m *reMatcher) matchAt(n *reNode, i int) (int, bool) {
	end := -1
	ok := m.match(n, i, func(j int) bool { end = j; return true })
	return end, ok
}

func (m *reMatcher) match(n *reNode, i int, k func(int) bool) bool {
	switch n.op {
	case reClass:
		return i < len(m.rs) && n.cls.has(m.rs[i]) && k(i+1)
	case reConcat:
		return m.seq(n.subs, i, k)
	case reAlt:
		for _, s := range n.subs {
			if m.match(s, i, k) {
				return true
			}
		}
		return false
	case reRepeat:
		if s := n.subs[0]; s.op == reClass {
			// One character per iteration: scan the run, then give back from the longest.
			j := i
			for (n.max < 0 || j-i < n.max) && j < len(m.rs) && s.cls.has(m.rs[j]) {
				j++
			}
			for ; j-i >= n.min; j-- {
				if k(j) {
					return true
				}
			}
			return false
		}
		return m.repeat(n, 0, i, k)
	case reLookahead:
		return m.match(n.subs[0], i, func(int) bool { return true }) && k(i)
	case reNegLookahead:
		return !m.match(n.subs[0], i, func(int) bool { return true }) && k(i)
	case reBegin:
		return i == 0 && k(i)
	case reEnd:
		return i == len(m.rs) && k(i)
	case reWordBoundary, reNotWordBoundary:
		a := i > 0 && isWordChar(m.rs[i-1])
		b := i < len(m.rs) && isWordChar(m.rs[i])
		return (a != b) == (n.op == reWordBoundary) && k(i)
	}
	panic("tokenizer: bad regex node")
}

func (m *reMatcher) seq(subs []*reNode, i int, k func(int) bool) bool {
	if len(subs) == 0 {
		return k(i)
	}
	return m.match(subs[0], i, func(j int) bool { return m.seq(subs[1:], j, k) })
}

// repeat is a greedy quantifier over a general sub-expression: as ECMAScript's RepeatMatcher,
// an iteration past the minimum that matches the empty string fails.
func (m *reMatcher) repeat(n *reNode, count, i int, k func(int) bool) bool {
	if n.max < 0 || count < n.max {
		if m.match(n.subs[0], i, func(j int) bool {
			if j == i && count >= n.min {
				return false
			}
			return m.repeat(n, count+1, j, k)
		}) {
			return true
		}
	}
	return count >= n.min && k(i)
}

// split cuts s as llama.cpp's regex pre-tokenizer does: every leftmost match is a piece and so
// is the text between matches; an empty match only cuts (the search then moves on one
// character, as ECMAScript's global matching does).
func (re *regex) split(s string, emit func(string)) {
	rs := []rune(s)
	offs := make([]int, len(rs)+1)
	o := 0
	for i, r := range rs {
		offs[i] = o
		o += utf8.RuneLen(r)
	}
	offs[len(rs)] = len(s)
	if o != len(s) {
		// Invalid UTF-8: decode positions byte by byte as DecodeRune does.
		rs, offs = rs[:0], offs[:0]
		for i := 0; i < len(s); {
			r, n := utf8.DecodeRuneInString(s[i:])
			rs = append(rs, r)
			offs = append(offs, i)
			i += n
		}
		offs = append(offs, len(s))
	}
	m := &reMatcher{rs: rs}
	last := 0
	for i := 0; i <= len(rs); {
		end, ok := m.matchAt(re.root, i)
		if !ok {
			i++
			continue
		}
		if i > last {
			emit(s[offs[last]:offs[i]])
		}
		if end > i {
			emit(s[offs[i]:offs[end]])
			last, i = end, end
			continue
		}
		last = i
		i++
	}
	if last < len(rs) {
		emit(s[offs[last]:])
	}
}
