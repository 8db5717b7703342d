package server

import (
	"reflect"
	"sync"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/toolcall"
)

// controlText is a model's tokenizer that writes the text of some of its control tokens,
// which write none otherwise: Mistral's [TOOL_CALLS] opens a reply's calls (toolcall.Mistral),
// and the reply is read, streamed and held to the tools' grammar by its text. Everything else
// is the model's tokenizer's.
type controlText struct {
	core.Tokenizer
	text map[core.TokenID][]byte

	// overs keeps what over made for each tokenizer (one wrapper each, so that the
	// constraint engine's per-tokenizer caches, by pointer, hold).
	mu    sync.Mutex
	overs map[core.Tokenizer]*controlText
}

// withControlText returns tok, wrapped to write the control tokens a chat template's tool-call
// format reads (toolcall.Format.ControlText) where the vocabulary holds them as such.
func withControlText(tok core.Tokenizer, template string) core.Tokenizer {
	f, ok := toolcall.Detect(template)
	if !ok || len(f.ControlText()) == 0 {
		return tok
	}
	byText, ok := tok.(interface {
		ID(piece string) (core.TokenID, bool)
	})
	if !ok {
		return tok
	}
	text := map[core.TokenID][]byte{}
	for _, piece := range f.ControlText() {
		if id, ok := byText.ID(piece); ok && len(tok.TokenBytes(id)) == 0 {
			text[id] = []byte(piece)
		}
	}
	if len(text) == 0 {
		return tok // the markers are text already (or absent)
	}
	return &controlText{Tokenizer: tok, text: text}
}

// over returns tok writing the same control tokens as text as t (a draft model's tokenizer
// beside its target's); tok itself when it already does.
func (t *controlText) over(tok core.Tokenizer) core.Tokenizer {
	if ct, ok := tok.(*controlText); ok {
		tok = ct.Tokenizer
	}
	if !reflect.TypeOf(tok).Comparable() {
		return &controlText{Tokenizer: tok, text: t.text}
	}
	if tok == t.Tokenizer {
		return t
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if o, ok := t.overs[tok]; ok {
		return o
	}
	if t.overs == nil {
		t.overs = map[core.Tokenizer]*controlText{}
	}
	o := &controlText{Tokenizer: tok, text: t.text}
	t.overs[tok] = o
	return o
}

// TokenBytes implements core.Tokenizer: a listed control token's text.
func (t *controlText) TokenBytes(id core.TokenID) []byte {
	if b, ok := t.text[id]; ok {
		return b
	}
	return t.Tokenizer.TokenBytes(id)
}

// Decode implements core.Tokenizer: the model's tokenizer's text with the listed control
// tokens' text in their places (what follows one is the bytes of its tokens, as the model's
// tokenizer joins them after its first).
func (t *controlText) Decode(ids []core.TokenID) string {
	for i, id := range ids {
		if _, ok := t.text[id]; ok {
			b := []byte(t.Tokenizer.Decode(ids[:i]))
			for _, id := range ids[i:] {
				b = append(b, t.TokenBytes(id)...)
			}
			return string(b)
		}
	}
	return t.Tokenizer.Decode(ids)
}

// AddsBOS reports whether the model's tokenizer puts BOS before a text (see addsBOS).
func (t *controlText) AddsBOS() bool { return addsBOS(t.Tokenizer) }

// ID finds a vocabulary entry (as the model's tokenizer does, where it can).
func (t *controlText) ID(piece string) (core.TokenID, bool) {
	if byText, ok := t.Tokenizer.(interface {
		ID(piece string) (core.TokenID, bool)
	}); ok {
		return byText.ID(piece)
	}
	return -1, false
}
