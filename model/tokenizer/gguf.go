package tokenizer

import (
	"errors"
	"fmt"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/gguf"
)

// Metadata keys read by FromGGUF.
const (
	keyModel       = "tokenizer.ggml.model"
	keyPre         = "tokenizer.ggml.pre"
	keyTokens      = "tokenizer.ggml.tokens"
	keyScores      = "tokenizer.ggml.scores"
	keyTypes       = "tokenizer.ggml.token_type"
	keyMerges      = "tokenizer.ggml.merges"
	keyBOS         = "tokenizer.ggml.bos_token_id"
	keyEOS         = "tokenizer.ggml.eos_token_id"
	keyUNK         = "tokenizer.ggml.unknown_token_id"
	keyPAD         = "tokenizer.ggml.padding_token_id"
	keyEOT         = "tokenizer.ggml.eot_token_id"
	keyEOM         = "tokenizer.ggml.eom_token_id"
	keyAddBOS      = "tokenizer.ggml.add_bos_token"
	keyAddEOS      = "tokenizer.ggml.add_eos_token"
	keySpacePrefix = "tokenizer.ggml.add_space_prefix"
)

// endOfGenerationTexts are control or user-defined tokens that end a turn in the chat formats
// of common models, and the fill-in-the-middle padding and repository tokens of Qwen2.5's
// vocabularies, which end an infill (llama.cpp counts them too); a vocabulary holding one
// lists it in Special().EndOfGeneration.
var endOfGenerationTexts = []string{
	"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
	"<|end_of_text|>", "<EOT>", "<|return|>", "<｜end▁of▁sentence｜>",
	"<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
}

// Load opens the GGUF file at path and builds its tokenizer. The file is closed before Load
// returns.
func Load(path string) (*Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// FromGGUF builds the tokenizer described by a file's "tokenizer.ggml.*" metadata. Defaults
// for absent keys follow the vocabulary type: a SentencePiece-style vocabulary adds BOS and
// a space prefix and takes ids 1, 2 and 0 as BOS, EOS and unknown; a BPE vocabulary adds BOS
// only with the Llama 3 pre-tokenizer. The Tokenizer keeps no reference to f.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	var v Vocab
	var err error
	if v.Model, err = f.String(keyModel); err != nil {
		return nil, err
	}
	if v.Model != ModelSPM && v.Model != ModelBPE {
		return nil, fmt.Errorf("tokenizer: %s %q is not supported (supported: %q, %q)", keyModel, v.Model, ModelSPM, ModelBPE)
	}
	if v.Tokens, err = f.Strings(keyTokens); err != nil {
		return nil, err
	}
	n := len(v.Tokens)
	if f.Has(keyScores) {
		if v.Scores, err = f.Float32s(keyScores); err != nil {
			return nil, err
		}
		if len(v.Scores) != n {
			return nil, fmt.Errorf("tokenizer: %s has %d entries for %d tokens", keyScores, len(v.Scores), n)
		}
	}
	if f.Has(keyTypes) {
		types, err := f.Int32s(keyTypes)
		if err != nil {
			return nil, err
		}
		if len(types) != n {
			return nil, fmt.Errorf("tokenizer: %s has %d entries for %d tokens", keyTypes, len(types), n)
		}
		v.Types = make([]TokenType, n)
		for i, t := range types {
			v.Types[i] = TokenType(t)
		}
	}
	spm := v.Model == ModelSPM
	if !spm {
		if v.Merges, err = f.Strings(keyMerges); err != nil {
			return nil, err
		}
		if v.Pre, err = optional(f.String, keyPre, "default"); err != nil {
			return nil, err
		}
	}
	id := func(key string, def core.TokenID) (core.TokenID, error) {
		x, err := f.Int64(key)
		switch {
		case errors.Is(err, gguf.ErrKeyNotFound):
			if int(def) >= n {
				return -1, nil
			}
			return def, nil
		case err != nil:
			return -1, err
		case x < 0 || x >= int64(n):
			// Like other readers of these files, treat an id outside the vocabulary as none.
			return -1, nil
		}
		return core.TokenID(x), nil
	}
	defBOS, defEOS, defUNK := core.TokenID(-1), core.TokenID(-1), core.TokenID(-1)
	if spm {
		defBOS, defEOS, defUNK = 1, 2, 0
	}
	if v.BOS, err = id(keyBOS, defBOS); err != nil {
		return nil, err
	}
	if v.EOS, err = id(keyEOS, defEOS); err != nil {
		return nil, err
	}
	if v.UNK, err = id(keyUNK, defUNK); err != nil {
		return nil, err
	}
	if v.PAD, err = id(keyPAD, -1); err != nil {
		return nil, err
	}
	for _, key := range []string{keyEOT, keyEOM} {
		x, err := id(key, -1)
		if err != nil {
			return nil, err
		}
		if x >= 0 {
			v.EndOfGeneration = append(v.EndOfGeneration, x)
		}
	}
	if v.Types != nil {
		for i, s := range v.Tokens {
			if v.Types[i] != Control && v.Types[i] != UserDefined {
				continue
			}
			for _, eog := range endOfGenerationTexts {
				if s == eog {
					v.EndOfGeneration = append(v.EndOfGeneration, core.TokenID(i))
				}
			}
		}
	}
	pre, _ := pretokenizers[v.Pre]
	defAddBOS := spm || (pre != nil && pre.addBOS) // Llama 3 family, tekken, chameleon
	if v.AddBOS, err = optional(f.Bool, keyAddBOS, defAddBOS); err != nil {
		return nil, err
	}
	if v.AddEOS, err = optional(f.Bool, keyAddEOS, false); err != nil {
		return nil, err
	}
	if v.AddSpacePrefix, err = optional(f.Bool, keySpacePrefix, spm); err != nil {
		return nil, err
	}
	if v.AddBOS && v.BOS < 0 {
		v.AddBOS = false
	}
	if v.AddEOS && v.EOS < 0 {
		v.AddEOS = false
	}
	return New(v)
}

// optional returns the value of key, or def when it is absent; a mistyped value is an error.
func optional[T any](get func(string) (T, error), key string, def T) (T, error) {
	x, err := get(key)
	if errors.Is(err, gguf.ErrKeyNotFound) {
		return def, nil
	}
	return x, err
}
