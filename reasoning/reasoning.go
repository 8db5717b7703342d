// Package reasoning separates a reasoning model's thinking from its answer. Models such as
// DeepSeek R1, Qwen3 and QwQ think in a block before they answer, <think>…</think>, which
// OpenAI-compatible servers return apart from the answer (a message's reasoning_content).
//
// A reply thinks when it begins (after blanks) with the block's open tag, or when the prompt
// already opened the block (the generation prompt of DeepSeek R1's later templates ends with
// "<think>\n"; see Tags.OpenIn). The thinking is the text up to the close tag without the
// blank lines around it, and the answer the text after it without the blanks it starts with;
// a reply whose block never closes (cut by a token limit) is all thinking. An open tag later
// in a reply is text of the answer. A Splitter does the same to a reply as it streams,
// holding back only what may still be a tag or blanks the rules drop, so that its pieces put
// together are always what Split gives for the whole reply.
package reasoning

import "strings"

// Tags are the texts that open and close a thinking block.
type Tags struct{ Open, Close string }

// Think is the block of DeepSeek R1, Qwen3, QwQ and the models distilled from them.
var Think = Tags{Open: "<think>", Close: "</think>"}

// Detect reports the tags a chat template's replies think in, from the template's text:
// Think when it writes or reads "</think>" (the templates of DeepSeek R1 and Qwen3 drop or
// split the thinking of earlier turns at it).
func Detect(template string) (Tags, bool) {
	if strings.Contains(template, Think.Close) {
		return Think, true
	}
	return Tags{}, false
}

// OpenIn reports whether a prompt leaves a thinking block open, so that its reply begins
// inside it: the prompt ends (but for blanks) with the open tag, as the generation prompts of
// DeepSeek R1's later templates and of Qwen3's thinking models do. An open tag elsewhere (a
// user's message quoting it) does not count.
func (t Tags) OpenIn(prompt string) bool {
	return t.Open != "" && strings.HasSuffix(strings.TrimRight(prompt, Blanks), t.Open)
}

// Split separates a whole reply into its thinking and its answer (see the package doc); open
// says that the prompt left a thinking block open. It is a Splitter given the whole reply.
func (t Tags) Split(reply string, open bool) (thinking, answer string) {
	s := t.NewSplitter(open)
	th, an := s.Write(reply)
	th2, an2 := s.Flush()
	return th + th2, an + an2
}

// Splitter separates a streamed reply into thinking and answer (see the package doc); make
// one with Tags.NewSplitter (the zero value has no tags: its reply is all answer). Copying a
// Splitter copies its state.
type Splitter struct {
	tags  Tags
	open  bool // the reply begins inside a block
	state state
	// pending is text not yet given out: blanks and the beginning of a tag that may still
	// become one, or blanks the rules may drop.
	pending string
	// started reports whether the current part (thinking or answer after it) has given out
	// text, so that its leading blanks are dropped only before its first.
	started bool
}

type state uint8

const (
	atStart    state = iota // the reply may still open a block
	inThinking              // inside the block
	afterBlock              // the block closed; the answer's leading blanks are dropped
	inAnswer                // the rest is the answer as written
)

// NewSplitter returns a Splitter for a reply; open says that the prompt left a thinking block
// open (Tags.OpenIn). Tags with an empty tag open no block: the reply is all answer.
func (t Tags) NewSplitter(open bool) *Splitter {
	s := &Splitter{tags: t, open: open}
	s.reset()
	return s
}

// reset readies s for a reply's beginning.
func (s *Splitter) reset() {
	s.state, s.pending, s.started = atStart, "", false
	switch {
	case s.tags.Open == "" || s.tags.Close == "":
		s.state = inAnswer
	case s.open:
		s.state = inThinking
	}
}

// Tags returns the tags the Splitter looks for.
func (s *Splitter) Tags() Tags { return s.tags }

// Held returns the text written but not given out yet: blanks, or what may still become a
// tag.
func (s *Splitter) Held() string { return s.pending }

// Thinking reports whether the text written so far ends inside a thinking block (false before
// the reply has shown whether it opens one).
func (s *Splitter) Thinking() bool { return s.state == inThinking }

// Closed reports whether the reply's thinking block has closed and its answer has not begun
// (what Write gives out next is answer, its leading blanks dropped).
func (s *Splitter) Closed() bool { return s.state == afterBlock }

// Answering reports whether the answer has begun: what Write gives out from now on is
// answer, the blanks after a closed block dropped.
func (s *Splitter) Answering() bool { return s.state == inAnswer }

// Write takes the next text of the reply and returns what of it, and of the text held back
// before it, is now known to be thinking and answer.
func (s *Splitter) Write(text string) (thinking, answer string) {
	if s.tags.Open == "" || s.tags.Close == "" {
		s.state = inAnswer // no tags (the zero value): no block
	}
	s.pending += text
	var th, an strings.Builder
	for {
		switch s.state {
		case atStart:
			rest := strings.TrimLeft(s.pending, Blanks)
			switch {
			case strings.HasPrefix(rest, s.tags.Open):
				s.state, s.pending, s.started = inThinking, rest[len(s.tags.Open):], false
				continue
			case strings.HasPrefix(s.tags.Open, rest):
				return th.String(), an.String() // blanks, or the tag's beginning: wait
			}
			s.state = inAnswer // the reply does not think: all of it is answer
			continue
		case inThinking:
			if !s.started {
				s.pending = strings.TrimLeft(s.pending, Blanks)
			}
			if i := strings.Index(s.pending, s.tags.Close); i >= 0 {
				th.WriteString(strings.TrimRight(s.pending[:i], Blanks))
				s.state, s.pending, s.started = afterBlock, s.pending[i+len(s.tags.Close):], false
				continue
			}
			// Hold back the end that may begin the close tag, and the blanks before it.
			end := len(s.pending) - partialSuffix(s.pending, s.tags.Close)
			end = len(strings.TrimRight(s.pending[:end], Blanks))
			if end > 0 {
				th.WriteString(s.pending[:end])
				s.pending, s.started = s.pending[end:], true
			}
			return th.String(), an.String()
		case afterBlock:
			s.pending = strings.TrimLeft(s.pending, Blanks)
			if s.pending == "" {
				return th.String(), an.String()
			}
			s.state = inAnswer
			continue
		default: // answer
			an.WriteString(s.pending)
			s.pending = ""
			return th.String(), an.String()
		}
	}
}

// Flush ends the reply: what was held back is given out (a block left open is thinking).
// The Splitter is then ready for another reply, as NewSplitter made it.
func (s *Splitter) Flush() (thinking, answer string) {
	rest, state, started := s.pending, s.state, s.started
	s.reset()
	switch state {
	case inThinking:
		if !started {
			rest = strings.TrimLeft(rest, Blanks)
		}
		return strings.TrimRight(rest, Blanks), ""
	case afterBlock:
		return "", ""
	}
	return "", rest
}

// Blanks are the bytes dropped around thinking and before the answer that follows it.
const Blanks = " \t\r\n"

// partialSuffix is the length of the longest end of s that is a proper beginning of tag.
func partialSuffix(s, tag string) int {
	for k := min(len(tag)-1, len(s)); k > 0; k-- {
		if strings.HasSuffix(s, tag[:k]) {
			return k
		}
	}
	return 0
}
