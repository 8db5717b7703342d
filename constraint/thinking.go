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
// begins a sentence of the grammar after it. Outside the block, blank tokens before the
// answer (at the reply's start, or after the block: a model must not spin on blanks) may
// write at most maxBlanks bytes (the token that begins the answer may begin with blanks of
// its own), no control token is allowed, and an end of generation only where the grammar accepts
// an empty answer. Inside the block only tokens that may complete the close tag are checked,
// so a thinking step costs no grammar mask (about 20 µs on Llama 3's 128k vocabulary,
// BenchmarkAfterThinking).
type AfterThinking struct {
	proto *Processor
	pre   before
	// inner is the grammar once the answer has begun; fresh the grammar at its start, asked
	// what may begin the answer.
	inner, fresh *Processor
	err          error
	// first is the set of bytes a sentence of the grammar may begin with, and closers the
	// tokens that hold the close tag's last byte, both shared by clones; scratch a buffer of
	// Process's.
	first   *[256]bool
	closers []core.TokenID
	scratch []byte
}

// maxBlanks bounds the blank bytes a reply may write outside a thinking block before its
// answer: "\n\n" after </think>, as Qwen3 writes, or "\r\n\r\n".
const maxBlanks = 4

// before is what AfterThinking knows of a reply before its answer begins.
type before struct {
	split reasoning.Splitter
	// run is the blank bytes written outside the block since the reply began or the block
	// closed.
	run int
}

// write takes the next token's bytes and returns the answer's first bytes they begin ("" while
// there is none), leading blanks dropped.
func (p *before) write(b []byte) string {
	held, wasClosed := p.split.Held(), p.split.Closed()
	_, answer := p.split.Write(string(b))
	if answer = strings.TrimLeft(answer, reasoning.Blanks); answer != "" {
		return answer
	}
	switch {
	case p.split.Thinking():
		p.run = 0
	case p.split.Closed() && !wasClosed: // closed by this token: blanks follow the tag in it
		hb, tag := held+string(b), p.split.Tags().Close
		p.run = len(hb) - (strings.LastIndex(hb, tag) + len(tag))
	case p.split.Closed() || p.split.Answering(): // blanks (an answer's, without tags)
		p.run += len(b)
	default: // the reply's beginning, held: blanks, maybe the open tag's beginning
		h := p.split.Held()
		p.run = len(h) - len(strings.TrimLeft(h, reasoning.Blanks))
	}
	return ""
}

// NewAfterThinking returns a constraint that holds the answer after a thinking block in tags
// to p's grammar; open says that the prompt left a block open (reasoning.Tags.OpenIn). p is
// not used itself, only cloned. Tags with an empty tag open no block: the reply is all
// answer.
func NewAfterThinking(p *Processor, tags reasoning.Tags, open bool) *AfterThinking {
	return &AfterThinking{proto: p, pre: before{split: *tags.NewSplitter(open)}}
}

// Name implements core.LogitsProcessor: the grammar's processor's name.
func (a *AfterThinking) Name() string { return a.proto.Name() }

// Answering reports whether the answer has begun (the grammar holds the text).
func (a *AfterThinking) Answering() bool { return a.inner != nil }

// Clone implements core.StatefulProcessor.
func (a *AfterThinking) Clone() core.StatefulProcessor {
	c := *a
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
	if isEndOfGeneration(tok, id) {
		if !a.mayEnd() {
			a.err = fmt.Errorf("%s: token %d (%q) ends the reply before its answer", a.Name(), id, tok.Piece(id))
			return
		}
		a.inner = a.proto.Clone().(*Processor) // the empty answer the grammar accepts
		a.inner.Accept(seq, id)
		return
	}
	answer := a.pre.write(tok.TokenBytes(id))
	if answer == "" {
		return
	}
	p := a.proto.Clone().(*Processor)
	if n, ok := p.m.AdvanceBytes([]byte(answer)); !ok {
		a.err = fmt.Errorf("%s: token %d (%q) begins the answer with %q, which the constraint does not allow (byte %d)", a.Name(), id, tok.Piece(id), answer, n)
		return
	}
	a.inner = p
}

// mayEnd reports whether the reply may end before its answer: outside the block, nothing but
// blanks held, and the grammar accepting the empty text.
func (a *AfterThinking) mayEnd() bool {
	s := &a.pre.split
	return !s.Thinking() && strings.TrimLeft(s.Held(), reasoning.Blanks) == "" && a.proto.m.Len() == 0 && a.proto.m.IsAccepting()
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
	if a.first == nil {
		a.first = a.fresh.firstBytes()
	}
	split := &a.pre.split
	tags := split.Tags()
	inside := split.Thinking()
	var start Mask
	if !inside {
		start = a.fresh.Mask(tok)
	}
	held := split.Held()
	// With only blanks held outside the block, a token that begins with another byte than a
	// blank or the open tag's first is the answer's beginning: the grammar's start mask
	// decides. Inside the block, a token that does not complete the close tag (with what is
	// held) keeps the reply thinking.
	blankHeld := !inside && strings.TrimLeft(held, reasoning.Blanks) == ""
	closing := append(a.scratch[:0], held...)
	eogAllowed := a.mayEnd()
	eog := endOfGeneration(tok)
	allowed := func(id core.TokenID) bool {
		if id < 0 || int(id) >= tok.VocabSize() {
			return false
		}
		b := tok.TokenBytes(id)
		switch {
		case slices.Contains(eog, id):
			return eogAllowed
		case len(b) == 0:
			return inside // control tokens: text of the thinking only
		case inside:
			closing = append(closing[:len(held)], b...)
			if !bytes.Contains(closing, []byte(tags.Close)) {
				return true
			}
		case blankHeld:
			i := 0
			for i < len(b) && isBlank(b[i]) {
				i++
			}
			switch {
			case i == len(b), tags.Open != "" && b[i] == tags.Open[0]:
				// blanks, or maybe the open tag: the splitter decides
			case i == 0:
				return start.Has(id)
			case !a.first[b[i]]:
				return false
			}
		}
		p := a.pre
		answer := p.write(b)
		if answer == "" {
			return p.split.Thinking() || p.run <= maxBlanks
		}
		n, ok := a.fresh.m.AdvanceBytes([]byte(answer))
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
			if a.closers == nil {
				a.closers = closers(tok, tags.Close[len(tags.Close)-1])
			}
			for _, id := range a.closers {
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
		for _, id := range eog { // inside the block, the loop above saw none of them
			if int(id) < len(row) && !eogAllowed {
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
			if allowed(it.ID) {
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

// isBlank reports whether c is one of reasoning.Blanks.
func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

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
	ids := []core.TokenID{}
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

// TriggerToken makes the trigger count only where token id writes it, not where other tokens
// spell its text: a tokenizer that writes a control token as its text (Mistral's
// [TOOL_CALLS], as loom serve's does) has the token for it, and prose that happens to spell
// the marker opens no call. The bytes the token writes begin the grammar. It returns l.
func (l *Lazy) TriggerToken(id core.TokenID) *Lazy {
	l.triggerToken, l.byToken = id, true
	return l
}

// SkipThinking makes l wait out a thinking block in tags (see AfterThinking): triggers
// written while the reply thinks do not count, and AtStart counts from the answer's first
// byte. open says that the prompt left a block open. It returns l. It applies to the text l
// accepts from then on (the reply's beginning when called before the first Accept, as it
// should be).
func (l *Lazy) SkipThinking(tags reasoning.Tags, open bool) *Lazy {
	l.think = tags.NewSplitter(open)
	return l
}
