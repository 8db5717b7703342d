package constraint

import (
	"bytes"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/reasoning"
)

// Lazy is a constraint that starts when the generated text writes its trigger: until then
// every token is allowed (end of generation included); from the trigger on, the text is held
// to the grammar as Processor holds it, the trigger itself its first bytes. This is how a
// reply that may answer in prose or call a tool is held: free text, but once it opens a call
// (<tool_call>) the call is well formed.
//
// The trigger may be written across tokens, and a token may go on past it: the bytes from the
// trigger to the token's end are the grammar's first. Where they cannot begin a sentence of
// the grammar (text that only looks like the trigger), the constraint stays off and looks for
// a later trigger. With AtStart the trigger counts only as the text's first bytes after
// blanks (a reply that is one JSON object, say); once other text is written the constraint is
// off for good.
type Lazy struct {
	proto   *Processor
	trigger []byte
	atStart bool
	// inner is the constraint once triggered; tail the last bytes written before it (fewer
	// than the trigger's), where a trigger split across tokens begins; off that the trigger
	// can no longer come (AtStart after other text).
	inner *Processor
	tail  []byte
	off   bool
	// think, when set, splits a reasoning model's thinking off the text (SkipThinking):
	// only the answer is looked through for the trigger.
	think *reasoning.Splitter
	// triggerToken, when set (TriggerToken), is the one token whose writing is the trigger.
	triggerToken core.TokenID
	byToken      bool
}

// NewLazy returns a constraint that holds the text to p's grammar from the first time it
// writes trigger (see Lazy). p is not used itself, only cloned.
func NewLazy(p *Processor, trigger string, atStart bool) *Lazy {
	return &Lazy{proto: p, trigger: []byte(trigger), atStart: atStart}
}

// Name implements core.LogitsProcessor: the grammar's processor's name.
func (l *Lazy) Name() string { return l.proto.Name() }

// Active reports whether the trigger has been written (the grammar holds the text).
func (l *Lazy) Active() bool { return l.inner != nil }

// Process implements core.LogitsProcessor: nothing before the trigger, the grammar's mask
// after it.
func (l *Lazy) Process(seq *core.Sequence, c *core.Candidates) error {
	if l.inner == nil {
		return nil
	}
	return l.inner.Process(seq, c)
}

// Forced implements core.Forcer: only the grammar forces tokens.
func (l *Lazy) Forced(seq *core.Sequence) (core.TokenID, bool) {
	if l.inner == nil {
		return -1, false
	}
	return l.inner.Forced(seq)
}

// Clone implements core.StatefulProcessor.
func (l *Lazy) Clone() core.StatefulProcessor {
	c := *l
	c.tail = bytes.Clone(l.tail)
	if l.think != nil {
		s := *l.think
		c.think = &s
	}
	if l.inner != nil {
		c.inner = l.inner.Clone().(*Processor)
	}
	return &c
}

// Accept implements core.StatefulProcessor.
func (l *Lazy) Accept(seq *core.Sequence, id core.TokenID) {
	if l.inner != nil {
		l.inner.Accept(seq, id)
		return
	}
	if l.off {
		return
	}
	tok := seq.Tokenizer()
	b := tok.TokenBytes(id)
	if l.think != nil && !l.think.Answering() {
		_, answer := l.think.Write(string(b))
		b = []byte(answer)
	}
	if len(b) == 0 {
		return // control and end tokens, thinking: nothing written
	}
	if l.byToken {
		if id == l.triggerToken {
			l.start(b)
		}
		return
	}
	text := append(l.tail, b...)
	if l.atStart {
		rest := bytes.TrimLeft(text, reasoning.Blanks)
		n := min(len(rest), len(l.trigger))
		switch {
		case !bytes.Equal(rest[:n], l.trigger[:n]):
			l.off, l.tail = true, nil
		case n == len(l.trigger):
			if !l.start(rest) {
				l.off, l.tail = true, nil
			}
		default:
			l.tail = text // blanks and the trigger's beginning: wait for more
		}
		return
	}
	for from := 0; ; {
		i := bytes.Index(text[from:], l.trigger)
		if i < 0 {
			break
		}
		if l.start(text[from+i:]) {
			return
		}
		from += i + 1 // not a sentence's beginning: look for a later trigger
	}
	// text may sit in l.tail's array (append grew it in place): copy forward, which
	// overlapping slices allow. A clone has its own array (Clone).
	keep := min(len(text), len(l.trigger)-1)
	l.tail = append(l.tail[:0], text[len(text)-keep:]...)
}

// start begins the grammar with text (from the trigger on), reporting whether it can begin a
// sentence.
func (l *Lazy) start(text []byte) bool {
	p := l.proto.Clone().(*Processor)
	if _, ok := p.m.AdvanceBytes(text); !ok {
		return false
	}
	l.inner, l.tail = p, nil
	return true
}
