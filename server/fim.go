package server

import (
	"errors"
	"fmt"
	"slices"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/gguf"
)

// fimTokens are a code model's fill-in-the-middle tokens: the prefix, suffix and middle
// markers.
type fimTokens struct{ pre, suf, mid core.TokenID }

// fimMarkers names each marker: its GGUF keys, newest first, and the texts it has in the
// vocabularies of Qwen2.5-Coder, StarCoder, DeepSeek-Coder and CodeLlama, by which a file
// without the keys is read (as llama.cpp reads it).
var fimMarkers = [3]struct{ keys, texts []string }{
	{[]string{"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"}, []string{"<|fim_prefix|>", "<fim_prefix>", "<fim-prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>"}},
	{[]string{"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"}, []string{"<|fim_suffix|>", "<fim_suffix>", "<fim-suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>"}},
	{[]string{"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"}, []string{"<|fim_middle|>", "<fim_middle>", "<fim-middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>"}},
}

// fimOf reads a model's fill-in-the-middle tokens from its GGUF keys, or failing them from
// the marker texts of its vocabulary; an error says why the model has none.
func fimOf(e *entry) (fimTokens, error) {
	var file *gguf.File
	if f, ok := e.model.raw.(interface{ File() *gguf.File }); ok {
		file = f.File()
	}
	byText, _ := e.model.tok.(interface {
		ID(piece string) (core.TokenID, bool)
	})
	var ids [3]core.TokenID
	vocab := e.model.tok.VocabSize()
	for i, m := range fimMarkers {
		found := false
		for _, k := range m.keys {
			if file == nil {
				break
			}
			v, err := file.Uint32(k)
			switch {
			case errors.Is(err, gguf.ErrKeyNotFound):
				continue
			case err != nil:
				return fimTokens{}, fmt.Errorf("model %q: %v", e.name, err)
			case int(v) >= vocab:
				return fimTokens{}, fmt.Errorf("model %q: %s = %d is not a token of its vocabulary (%d tokens)", e.name, k, v, vocab)
			}
			ids[i], found = core.TokenID(v), true
			break
		}
		for _, text := range m.texts {
			if found || byText == nil {
				break
			}
			ids[i], found = byText.ID(text)
		}
		if !found {
			return fimTokens{}, fmt.Errorf("model %q has no fill-in-the-middle tokens (its GGUF names no %s, and its vocabulary has none of %q)", e.name, m.keys[0], m.texts)
		}
	}
	return fimTokens{pre: ids[0], suf: ids[1], mid: ids[2]}, nil
}

// addsBOS reports whether tok puts BOS before a text it encodes with its special tokens.
func addsBOS(tok core.Tokenizer) bool {
	if t, ok := tok.(interface{ AddsBOS() bool }); ok {
		return t.AddsBOS()
	}
	bos := tok.Special().BOS
	with, err1 := tok.Encode("a", core.EncodeOptions{AddSpecial: true})
	plain, err2 := tok.Encode("a", core.EncodeOptions{})
	return bos >= 0 && err1 == nil && err2 == nil && len(with) > len(plain) && with[0] == bos && slices.Equal(with[1:1+len(plain)], plain)
}

// fillInTheMiddle turns a completion request's prompts into fill-in-the-middle prompts for
// suffix, laid out as llama.cpp's server lays out an infill prompt (prefix, suffix, middle):
// the model's BOS where it adds one, the prefix marker and the prompt, the suffix marker and
// suffix, then the middle marker, after which the model writes what goes between them. A
// prompt of token ids is the prefix as ids (a BOS it begins with is dropped: it comes first).
func fillInTheMiddle(tok core.Tokenizer, fim fimTokens, prompts []promptInput, suffix string) ([]promptInput, error) {
	encode := func(param, text string) ([]core.TokenID, error) {
		ids, err := tok.Encode(text, core.EncodeOptions{})
		if err != nil {
			return nil, badParam(param, "%v", err)
		}
		return ids, nil
	}
	suf, err := encode("suffix", suffix)
	if err != nil {
		return nil, err
	}
	bos, withBOS := tok.Special().BOS, addsBOS(tok)
	out := make([]promptInput, len(prompts))
	for i, p := range prompts {
		pre := p.tokens
		if pre == nil {
			if pre, err = encode("prompt", p.text); err != nil {
				return nil, err
			}
		} else if len(pre) > 0 && pre[0] == bos {
			pre = pre[1:]
		}
		var ids []core.TokenID
		if withBOS {
			ids = append(ids, bos)
		}
		ids = append(append(ids, fim.pre), pre...)
		ids = append(append(ids, fim.suf), suf...)
		out[i] = promptInput{tokens: append(ids, fim.mid)}
	}
	return out, nil
}
