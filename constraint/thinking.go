package constraint

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/reasoning"
)

// AfterThinking holds a reasoning model's answer to a grammar and leaves its thinking free: a
// reply that begins with a thinking block (reasoning.Tags: <think>…</think>), or begins
// inside one its prompt opened, may think as it likes, and the answer after the block (its
// leading blanks dropped, as reasoning.Splitter drops them) is held to the grammar from its
// first byte, as Processor holds a whole reply. A reply that does not open a block is all
// answer. This is how a reply that must call a tool (tool_choice "required") keeps the
// thinking such models are trained to write first.
//
// Until the answer begins, the mask allows every token that keeps the reply thinking (or on
// blanks, or on the beginning of the open tag) and every token that ends the block and
// begins a sentence of the grammar after it; inside the block only tokens that hold the close
// tag's last byte are checked, so a thinking step costs no grammar mask (about 20 µs on
// Llama 3's 128k vocabulary, BenchmarkAfterThinking).
type AfterThinking struct {
	proto *Processor
	split *reasoning.Splitter
	// inner is the grammar once the answer has begun; fresh the grammar at its start, asked
	// what may begin the answer.
	inner, fresh *Processor
	// blanks counts the blank bytes written by blank tokens outside the block before the
	// answer (at most maxBlanks: a model that may write blanks without end would).
	blanks int
	err    error
	// first is the set of bytes a sentence of the grammar may begin with, shared by clones;
	// scratch a buffer of Process's.
	first   *[256]bool
	scratch []byte
}

// maxBlanks bounds the blanks a reply may write by blank tokens before its answer, outside a
// thinking block: "\n\n" after </think>, as Qwen3 writes, or "\r\n\r\n".
const maxBlanks = 4

// NewAfterThinking returns a constraint that holds the answer after a thinking block in tags
// to p's grammar; open says that the prompt left a block open (reasoning.Tags.OpenIn). p is
// not used itself, only cloned.
func NewAfterThinking(p *Processor, tags reasoning.Tags, open bool) *AfterThinking {
	return &AfterThinking{proto: p, split: tags.NewSplitter(open)}
}

// Name implements core.LogitsProcessor: the grammar's processor's name.
func (a *AfterThinking) Name() string { return a.proto.Name() }

// Answering reports whether the answer has begun (the grammar holds the text).
func (a *AfterThinking) Answering() bool { return a.inner != nil }

// Clone implements core.StatefulProcessor.
func (a *AfterThinking) Clone() core.StatefulProcessor {
	c := *a
	s := *a.split
	c.split = &s
	if a.inner != nil {
		c.inner = a.inner.Clone().(*Processor)
	}
	c.fresh, c.scratch = nil, nil
	return &c
}

// Accept implements core.StatefulProcessor.
func (a *AfterThinking) Accept(seq *core.Sequence, id core.TokenID) {
	if a.err != nil {
		return
	}
	if a.inner != nil {
		a.inner.Accept(seq, id)
		return
	}
	tok := seq.Tokenizer()
	b := tok.TokenBytes(id)
	if isEndOfGeneration(tok, id) {
		a.err = fmt.Errorf("%s: token %d (%q) ends the reply before its answer began", a.Name(), id, tok.Piece(id))
		return
	}
	_, answer := a.split.Write(string(b))
	if answer = strings.TrimLeft(answer, blanks); answer == "" {
		if isBlank(b) && !a.split.Thinking() {
			a.blanks += len(b)
		}
		return
	}
	p := a.proto.Clone().(*Processor)
	if n, ok := p.m.AdvanceBytes([]byte(answer)); !ok {
		a.err = fmt.Errorf("%s: token %d (%q) begins the answer with %q, which the constraint does not allow (byte %d)", a.Name(), id, tok.Piece(id), answer, n)
		return
	}
	a.inner = p
}

// Forced implements core.Forcer: only the grammar forces tokens.
func (a *AfterThinking) Forced(seq *core.Sequence) (core.TokenID, bool) {
	if a.inner == nil || a.err != nil {
		return -1, false
	}
	return a.inner.Forced(seq)
}

// Process implements core.LogitsProcessor.
func (a *AfterThinking) Process(seq *core.Sequence, c *core.Candidates) error {
	if a.err != nil {
		return a.err
	}
	if a.inner != nil {
		return a.inner.Process(seq, c)
	}
	tok := seq.Tokenizer()
	if a.fresh == nil {
		a.fresh = a.proto.Clone().(*Processor)
	}
	var start Mask
	inside := a.split.Thinking()
	if !inside {
		start = a.fresh.Mask(tok)
	}
	if a.first == nil {
		a.first = a.fresh.firstBytes()
	}
	tags := a.split.Tags()
	held := a.split.Held()
	// With only blanks held outside the block, a token's answer is its bytes after their
	// blanks: one whose first byte neither begins a sentence nor the open tag is refused at
	// once. Inside the block, a token that does not complete the close tag (with what is held)
	// keeps the reply thinking.
	blankHeld := !inside && strings.TrimLeft(held, blanks) == ""
	closing := append(a.scratch[:0], held...)
	eog := endOfGeneration(tok) // banned: the reply must answer
	allowed := func(id core.TokenID) bool {
		if id < 0 || int(id) >= tok.VocabSize() {
			return false
		}
		b := tok.TokenBytes(id)
		switch {
		case inside:
			closing = append(closing[:len(held)], b...)
			if !bytes.Contains(closing, []byte(tags.Close)) {
				return true
			}
		case blankHeld && len(b) > 0:
			i := 0
			for i < len(b) && isBlankByte(b[i]) {
				i++
			}
			switch {
			case i == len(b):
				// blank: fall through to the bound
			case b[i] == tags.Open[0]:
				// may open the block: the splitter decides
			case i == 0:
				return start.Has(id) // the answer is the token's bytes
			case !a.first[b[i]]:
				return false
			}
		}
		s := *a.split
		_, answer := s.Write(string(b))
		trimmed := strings.TrimLeft(answer, blanks)
		switch {
		case trimmed == "" && isBlank(b) && !s.Thinking():
			return a.blanks+len(b) <= maxBlanks
		case trimmed == "":
			return true
		case !inside && answer == string(b) && trimmed == answer:
			return start.Has(id)
		}
		n, ok := a.fresh.m.AdvanceBytes([]byte(trimmed))
		if ok {
			a.fresh.m.Pop(n)
		}
		return ok
	}
	kept := 0
	switch {
	case c.IsDense():
		row := c.Dense()
		if inside {
			// Only a token holding the close tag's last byte can end the block.
			for _, id := range closers(tok, tags.Close[len(tags.Close)-1]) {
				if int(id) < len(row) && !allowed(id) {
					row[id] = float32(math.Inf(-1))
				}
			}
			for i := tok.VocabSize(); i < len(row); i++ {
				row[i] = float32(math.Inf(-1)) // a padded row's entries beyond the vocabulary
			}
		} else {
			for i := range row {
				if !allowed(core.TokenID(i)) {
					row[i] = float32(math.Inf(-1))
				}
			}
		}
		for _, id := range eog {
			if int(id) < len(row) {
				row[id] = float32(math.Inf(-1))
			}
		}
		for _, v := range row {
			if !math.IsInf(float64(v), -1) {
				kept++
				break
			}
		}
	default:
		items := c.Items()
		out := items[:0]
		for _, it := range items {
			if allowed(it.ID) && !slices.Contains(eog, it.ID) {
				out = append(out, it)
			}
		}
		kept = len(out)
		c.SetItems(out, c.Sorted())
	}
	a.scratch = closing[:0]
	if kept == 0 {
		return fmt.Errorf("%s: no candidate token can go on thinking or begin the answer", a.Name())
	}
	return nil
}

// blanks are what an answer may begin with before its grammar: reasoning.Splitter drops them
// after a thinking block, and a reply may write them before it shows whether it thinks.
const blanks = " \t\r\n"

// firstBytes is the set of bytes a sentence may begin with.
func (p *Processor) firstBytes() *[256]bool {
	var out [256]bool
	for c := range 256 {
		if n, ok := p.m.AdvanceBytes([]byte{byte(c)}); ok {
			p.m.Pop(n)
			out[c] = true
		}
	}
	return &out
}

// isBlank reports whether b is all blanks (and not empty).
func isBlank(b []byte) bool { return len(b) > 0 && len(bytes.TrimLeft(b, blanks)) == 0 }

// isBlankByte reports whether c is one of blanks.
func isBlankByte(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// closers lists the tokens of tok's vocabulary whose bytes hold c, kept for each comparable
// tokenizer.
func closers(tok core.Tokenizer, c byte) []core.TokenID {
	type key struct {
		tok core.Tokenizer
		c   byte
	}
	comparable := reflect.TypeOf(tok).Comparable()
	if comparable {
		if ids, ok := closerCache.Load(key{tok, c}); ok {
			return ids.([]core.TokenID)
		}
	}
	var ids []core.TokenID
	for id := range core.TokenID(tok.VocabSize()) {
		if bytes.IndexByte(tok.TokenBytes(id), c) >= 0 {
			ids = append(ids, id)
		}
	}
	if comparable {
		closerCache.Store(key{tok, c}, ids)
	}
	return ids
}

var closerCache sync.Map

// SkipThinking makes l wait out a thinking block in tags (see AfterThinking): triggers
// written while the reply thinks do not count, and AtStart counts from the answer's first
// byte. open says that the prompt left a block open. It returns l. It applies to the text l
// accepts from then on (the reply's beginning when called before the first Accept, as it
// should be).
func (l *Lazy) SkipThinking(tags reasoning.Tags, open bool) *Lazy {
	l.think = tags.NewSplitter(open)
	return l
}
