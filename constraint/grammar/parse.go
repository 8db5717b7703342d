package grammar

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxRepeat bounds the counts of x{m,n}: a bounded repetition is expanded into copies of x.
const MaxRepeat = 10000

// Parse reads GBNF source. Errors are *Error values naming line and column.
func Parse(src string) (*Grammar, error) {
	p := &parser{src: src, line: 1, lineStart: 0}
	g := &Grammar{}
	seen := map[string]Pos{}
	p.skipSpace(true)
	for !p.eof() {
		r, err := p.rule()
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[r.Name]; dup {
			return nil, &Error{r.Pos, fmt.Sprintf("rule %q is defined twice (first at %s)", r.Name, prev)}
		}
		seen[r.Name] = r.Pos
		g.Rules = append(g.Rules, r)
		p.skipSpace(true)
	}
	if len(g.Rules) == 0 {
		return nil, &Error{p.pos(), "grammar has no rules"}
	}
	return g, nil
}

type parser struct {
	src       string
	i         int
	line      int
	lineStart int
	depth     int // parentheses open: newlines are spaces inside them
}

func (p *parser) eof() bool { return p.i >= len(p.src) }

func (p *parser) pos() Pos { return p.posAt(p.i) }

// posAt is the position of offset i, which must not precede the current line.
func (p *parser) posAt(i int) Pos { return Pos{p.line, i - p.lineStart + 1} }

func (p *parser) errf(at Pos, format string, args ...any) error {
	return &Error{at, fmt.Sprintf(format, args...)}
}

func (p *parser) newline() {
	p.i++
	p.line++
	p.lineStart = p.i
}

// skipSpace skips blanks and comments, and newlines when newlines is true.
func (p *parser) skipSpace(newlines bool) {
	for !p.eof() {
		switch c := p.src[p.i]; {
		case c == ' ' || c == '\t':
			p.i++
		case c == '#':
			for !p.eof() && p.src[p.i] != '\n' && p.src[p.i] != '\r' {
				p.i++
			}
		case (c == '\n' || c == '\r') && newlines:
			if c == '\r' && p.i+1 < len(p.src) && p.src[p.i+1] == '\n' {
				p.i++
			}
			p.newline()
		default:
			return
		}
	}
}

func isWordByte(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (p *parser) name() string {
	start := p.i
	for !p.eof() && isWordByte(p.src[p.i]) {
		p.i++
	}
	return p.src[start:p.i]
}

func (p *parser) rule() (Rule, error) {
	at := p.pos()
	name := p.name()
	if name == "" {
		return Rule{}, p.errf(at, "expected a rule name, found %s", p.describe())
	}
	p.skipSpace(false)
	if len(p.src)-p.i < 3 || p.src[p.i:p.i+3] != "::=" {
		return Rule{}, p.errf(p.pos(), "expected ::= after rule name %q, found %s", name, p.describe())
	}
	p.i += 3
	p.skipSpace(true)
	body, err := p.alternatives()
	if err != nil {
		return Rule{}, err
	}
	if !p.eof() && p.src[p.i] != '\n' && p.src[p.i] != '\r' {
		return Rule{}, p.errf(p.pos(), "expected end of line after rule %q, found %s", name, p.describe())
	}
	return Rule{Name: name, Body: body, Pos: at}, nil
}

// describe names what is at the cursor, for errors.
func (p *parser) describe() string {
	if p.eof() {
		return "end of input"
	}
	switch c := p.src[p.i]; c {
	case '\n', '\r':
		return "end of line"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.i:])
	return strconv.QuoteRune(r)
}

func (p *parser) alternatives() (Expr, error) {
	var alts []Expr
	for {
		s, err := p.sequence()
		if err != nil {
			return nil, err
		}
		alts = append(alts, s)
		if p.eof() || p.src[p.i] != '|' {
			break
		}
		p.i++
		p.skipSpace(true)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return &Alt{Alts: alts}, nil
}

func (p *parser) sequence() (Expr, error) {
	var items []Expr
	for !p.eof() {
		c := p.src[p.i]
		var item Expr
		switch {
		case c == '"':
			lit, err := p.literal()
			if err != nil {
				return nil, err
			}
			item = lit
		case c == '[':
			cls, err := p.class()
			if err != nil {
				return nil, err
			}
			item = cls
		case c == '.':
			p.i++
			item = &Class{Negated: true}
		case c == '(':
			open := p.pos()
			p.i++
			p.depth++
			p.skipSpace(true)
			inner, err := p.alternatives()
			if err != nil {
				return nil, err
			}
			if p.eof() || p.src[p.i] != ')' {
				return nil, p.errf(p.pos(), "expected ) to close the group opened at %s, found %s", open, p.describe())
			}
			p.i++
			p.depth--
			item = inner
		case isWordByte(c):
			at := p.pos()
			item = &Ref{Name: p.name(), Pos: at}
		case c == '*' || c == '+' || c == '?' || c == '{':
			return nil, p.errf(p.pos(), "repetition %q has nothing to repeat", c)
		case c == '<':
			return nil, p.errf(p.pos(), "token references (<...>) are not supported")
		default:
			if len(items) == 0 && c != '|' && c != ')' && c != '\n' && c != '\r' {
				return nil, p.errf(p.pos(), "unexpected %s", p.describe())
			}
			return seqOf(items), nil
		}
		p.skipSpace(p.depth > 0)
		for !p.eof() {
			rep, ok, err := p.repetition(item)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			item = rep
			p.skipSpace(p.depth > 0)
		}
		items = append(items, item)
	}
	return seqOf(items), nil
}

func seqOf(items []Expr) Expr {
	if len(items) == 1 {
		return items[0]
	}
	return &Seq{Items: items}
}

// repetition parses a postfix operator applied to item, if one is at the cursor.
func (p *parser) repetition(item Expr) (Expr, bool, error) {
	switch p.src[p.i] {
	case '*':
		p.i++
		return &Repeat{Expr: item, Min: 0, Max: -1}, true, nil
	case '+':
		p.i++
		return &Repeat{Expr: item, Min: 1, Max: -1}, true, nil
	case '?':
		p.i++
		return &Repeat{Expr: item, Min: 0, Max: 1}, true, nil
	case '{':
	default:
		return nil, false, nil
	}
	open := p.pos()
	p.i++
	p.skipSpace(false)
	lo, haveLo, err := p.count()
	if err != nil {
		return nil, false, err
	}
	hi := lo
	p.skipSpace(false)
	if !p.eof() && p.src[p.i] == ',' {
		p.i++
		p.skipSpace(false)
		var haveHi bool
		hi, haveHi, err = p.count()
		if err != nil {
			return nil, false, err
		}
		if !haveHi {
			hi = -1
		}
		p.skipSpace(false)
	} else if !haveLo {
		return nil, false, p.errf(p.pos(), "expected a count in the repetition opened at %s, found %s", open, p.describe())
	}
	if p.eof() || p.src[p.i] != '}' {
		return nil, false, p.errf(p.pos(), "expected } to close the repetition opened at %s, found %s", open, p.describe())
	}
	p.i++
	if hi >= 0 && hi < lo {
		return nil, false, p.errf(open, "repetition {%d,%d}: maximum is less than minimum", lo, hi)
	}
	return &Repeat{Expr: item, Min: lo, Max: hi}, true, nil
}

func (p *parser) count() (int, bool, error) {
	at := p.pos()
	start := p.i
	for !p.eof() && p.src[p.i] >= '0' && p.src[p.i] <= '9' {
		p.i++
	}
	if start == p.i {
		return 0, false, nil
	}
	n, err := strconv.Atoi(p.src[start:p.i])
	if err != nil || n > MaxRepeat {
		return 0, false, p.errf(at, "repetition count %s is larger than %d", p.src[start:p.i], MaxRepeat)
	}
	return n, true, nil
}

func (p *parser) literal() (Expr, error) {
	open := p.pos()
	p.i++ // "
	var buf []byte
	for {
		if p.eof() || p.src[p.i] == '\n' || p.src[p.i] == '\r' {
			return nil, p.errf(p.pos(), "string opened at %s is not closed", open)
		}
		if p.src[p.i] == '"' {
			p.i++
			return &Literal{Text: string(buf)}, nil
		}
		at := p.pos()
		r, err := p.char()
		if err != nil {
			return nil, err
		}
		if r >= 0xD800 && r <= 0xDFFF {
			return nil, p.errf(at, "code point U+%04X is a surrogate and has no UTF-8 form", r)
		}
		buf = utf8.AppendRune(buf, r)
	}
}

func (p *parser) class() (Expr, error) {
	open := p.pos()
	p.i++ // [
	cls := &Class{}
	if !p.eof() && p.src[p.i] == '^' {
		cls.Negated = true
		p.i++
	}
	for {
		if p.eof() || p.src[p.i] == '\n' || p.src[p.i] == '\r' {
			return nil, p.errf(p.pos(), "character class opened at %s is not closed", open)
		}
		if p.src[p.i] == ']' {
			p.i++
			return cls, nil
		}
		at := p.pos()
		lo, err := p.char()
		if err != nil {
			return nil, err
		}
		hi := lo
		if p.i+1 < len(p.src) && p.src[p.i] == '-' && p.src[p.i+1] != ']' {
			p.i++
			if p.eof() || p.src[p.i] == '\n' || p.src[p.i] == '\r' {
				return nil, p.errf(p.pos(), "character class opened at %s is not closed", open)
			}
			hi, err = p.char()
			if err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, p.errf(at, "character range %q-%q is reversed", lo, hi)
			}
		}
		cls.Ranges = append(cls.Ranges, RuneRange{lo, hi})
	}
}

// char reads one character of a literal or class: a UTF-8 code point or an escape.
func (p *parser) char() (rune, error) {
	at := p.pos()
	if p.src[p.i] != '\\' {
		r, size := utf8.DecodeRuneInString(p.src[p.i:])
		if r == utf8.RuneError && size == 1 {
			return 0, p.errf(at, "invalid UTF-8 byte 0x%02X", p.src[p.i])
		}
		p.i += size
		return r, nil
	}
	p.i++
	if p.eof() {
		return 0, p.errf(at, "escape at end of input")
	}
	c := p.src[p.i]
	p.i++
	switch c {
	case 't':
		return '\t', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case '\\', '"', '[', ']', '-', '^':
		return rune(c), nil
	case 'x':
		return p.hex(at, 2)
	case 'u':
		return p.hex(at, 4)
	case 'U':
		return p.hex(at, 8)
	}
	return 0, p.errf(at, "unknown escape \\%c", c)
}

func (p *parser) hex(at Pos, n int) (rune, error) {
	if len(p.src)-p.i < n {
		return 0, p.errf(at, "escape needs %d hex digits", n)
	}
	v, err := strconv.ParseUint(p.src[p.i:p.i+n], 16, 32)
	if err != nil {
		return 0, p.errf(at, "escape needs %d hex digits, found %q", n, p.src[p.i:p.i+n])
	}
	p.i += n
	if v > utf8.MaxRune {
		return 0, p.errf(at, "code point U+%X is beyond U+10FFFF", v)
	}
	return rune(v), nil
}
