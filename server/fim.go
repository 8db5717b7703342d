package server

import (
	"errors"
	"fmt"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/gguf"
)

// fimTokens are a code model's fill-in-the-middle tokens: the prefix, suffix and middle
// markers its GGUF names (tokenizer.ggml.fim_pre_token_id, fim_suf_token_id and
// fim_mid_token_id, or the older prefix_token_id, suffix_token_id and middle_token_id).
type fimTokens struct{ pre, suf, mid core.TokenID }

// fimKeys are the GGUF keys of the three markers, newest names first.
var fimKeys = [3][2]string{
	{"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"},
	{"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"},
	{"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"},
}

// fimOf reads a model's fill-in-the-middle tokens; an error says why the model has none.
func fimOf(e *entry) (fimTokens, error) {
	f, ok := e.model.raw.(interface{ File() *gguf.File })
	if !ok || f.File() == nil {
		return fimTokens{}, fmt.Errorf("model %q is not a GGUF file, which would name fill-in-the-middle tokens", e.name)
	}
	var ids [3]core.TokenID
	vocab := e.model.tok.VocabSize()
	for i, keys := range fimKeys {
		found := false
		for _, k := range keys {
			v, err := f.File().Uint32(k)
			if errors.Is(err, gguf.ErrKeyNotFound) {
				continue
			}
			switch {
			case err != nil:
				return fimTokens{}, fmt.Errorf("model %q: %v", e.name, err)
			case int(v) >= vocab:
				return fimTokens{}, fmt.Errorf("model %q: %s = %d is not a token of its vocabulary (%d tokens)", e.name, k, v, vocab)
			}
			ids[i], found = core.TokenID(v), true
			break
		}
		if !found {
			return fimTokens{}, fmt.Errorf("model %q has no fill-in-the-middle tokens (its GGUF names no %s)", e.name, keys[0])
		}
	}
	return fimTokens{pre: ids[0], suf: ids[1], mid: ids[2]}, nil
}

// fillInTheMiddle turns a completion request's prompts into fill-in-the-middle prompts for
// suffix, as llama.cpp's server writes them (prefix, suffix, middle): the model's BOS where
// it adds one, the prefix marker and the prompt, the suffix marker and suffix, then the
// middle marker, after which the model writes what goes between them.
func fillInTheMiddle(e *entry, prompts []promptInput, suffix string) ([]promptInput, error) {
	fim, err := fimOf(e)
	if err != nil {
		return nil, badParam("suffix", "%v", err)
	}
	tok := e.model.tok
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
	special, err := tok.Encode("", core.EncodeOptions{AddSpecial: true})
	if err != nil {
		return nil, badParam("prompt", "%v", err)
	}
	bos := tok.Special().BOS
	out := make([]promptInput, len(prompts))
	for i, p := range prompts {
		pre := p.tokens
		if pre == nil {
			if pre, err = encode("prompt", p.text); err != nil {
				return nil, err
			}
		}
		var ids []core.TokenID
		if bos >= 0 && len(special) > 0 && special[0] == bos {
			ids = append(ids, bos)
		}
		ids = append(append(ids, fim.pre), pre...)
		ids = append(append(ids, fim.suf), suf...)
		out[i] = promptInput{tokens: append(ids, fim.mid)}
	}
	return out, nil
}
