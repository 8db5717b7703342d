package pipeline

import (
	"errors"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
)

// Parameters shared by several processors.
var (
	minKeepParam = Param{Name: "min_keep", Type: Int, Default: int64(1),
		Doc: "never keep fewer tokens than this (≥ 1)"}
	scopeParam = Param{Name: "scope", Type: String, Default: "all",
		Doc: `which tokens count: "all" (prompt and generated) or "generated"`}
	lastNParam = Param{Name: "last_n", Type: Int, Default: int64(0),
		Doc: "count only the last n tokens of the scope; 0: all of them"}
)

// processorParts lists the built-in logits processors.
func processorParts() []*Part {
	return []*Part{
		{
			Kind: Processor, Type: "temperature",
			Doc: "Divides the logits by t (p ∝ p^(1/t)); t = 0 keeps only the most likely token (greedy).",
			Params: []Param{{Name: "t", Type: Float, Default: 0.8,
				Doc: "temperature ≥ 0; below 1 sharpens, above 1 flattens, 0 is greedy"}},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				return processors.NewTemperature(a.Float("t"))
			},
		},
		{
			Kind: Processor, Type: "top_k",
			Doc: "Keeps the k most likely tokens.",
			Params: []Param{{Name: "k", Type: Int, Default: int64(40),
				Doc: "tokens kept; 0 disables"}},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				return processors.NewTopK(a.Int("k"))
			},
		},
		{
			Kind: Processor, Type: "top_p",
			Doc: "Nucleus sampling: keeps the most likely tokens until their probability reaches p (the crossing token included).",
			Params: []Param{
				{Name: "p", Type: Float, Default: 0.95, Doc: "cumulative probability in (0, 1]; 1 disables"},
				minKeepParam,
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				return processors.NewTopP(a.Float("p"), a.Int("min_keep"))
			},
		},
		{
			Kind: Processor, Type: "min_p",
			Doc: "Keeps the tokens at least p times as likely as the most likely one.",
			Params: []Param{
				{Name: "p", Type: Float, Default: 0.05, Doc: "fraction of the top probability, in [0, 1]; 0 disables"},
				minKeepParam,
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				return processors.NewMinP(a.Float("p"), a.Int("min_keep"))
			},
		},
		{
			Kind: Processor, Type: "typical_p",
			Doc: "Locally typical sampling: keeps the tokens whose information content is closest to the entropy until their probability reaches p.",
			Params: []Param{
				{Name: "p", Type: Float, Doc: "cumulative probability in (0, 1]; 1 disables"},
				minKeepParam,
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				return processors.NewTypicalP(a.Float("p"), a.Int("min_keep"))
			},
		},
		{
			Kind: Processor, Type: "repetition_penalty",
			Doc: "Divides the positive logits of tokens already present by penalty and multiplies the negative ones.",
			Params: []Param{
				{Name: "penalty", Type: Float, Doc: "> 0; 1 disables, above 1 discourages repetition"},
				scopeParam, lastNParam,
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				w, err := window(a)
				if err != nil {
					return nil, err
				}
				return processors.NewRepetitionPenalty(a.Float("penalty"), w)
			},
		},
		{
			Kind: Processor, Type: "frequency_penalty",
			Doc: "Subtracts penalty × (occurrences so far) from each token's logit.",
			Params: []Param{
				{Name: "penalty", Type: Float, Doc: "per occurrence; negative encourages repetition"},
				scopeParam, lastNParam,
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				w, err := window(a)
				if err != nil {
					return nil, err
				}
				return processors.NewFrequencyPenalty(a.Float("penalty"), w)
			},
		},
		{
			Kind: Processor, Type: "presence_penalty",
			Doc: "Subtracts penalty once from the logit of every token already present.",
			Params: []Param{
				{Name: "penalty", Type: Float, Doc: "per distinct token; negative encourages repetition"},
				scopeParam, lastNParam,
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				w, err := window(a)
				if err != nil {
					return nil, err
				}
				return processors.NewPresencePenalty(a.Float("penalty"), w)
			},
		},
		{
			Kind: Processor, Type: "penalties",
			Doc: "Repetition, frequency and presence penalties in one pass over the same window (llama.cpp's penalties sampler).",
			Params: []Param{
				{Name: "repeat", Type: Float, Default: 1.0, Doc: "repetition penalty > 0; 1 disables"},
				{Name: "frequency", Type: Float, Default: 0.0, Doc: "frequency penalty per occurrence; 0 disables"},
				{Name: "presence", Type: Float, Default: 0.0, Doc: "presence penalty per distinct token; 0 disables"},
				scopeParam,
				{Name: "last_n", Type: Int, Default: int64(64), Doc: "count only the last n tokens of the scope; 0: all of them"},
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				w, err := window(a)
				if err != nil {
					return nil, err
				}
				return processors.NewPenalties(a.Float("repeat"), a.Float("frequency"), a.Float("presence"), w)
			},
		},
		{
			Kind: Processor, Type: "no_repeat_ngram",
			Doc:    "Bans any token that would repeat an n-gram already in the sequence (prompt included).",
			Params: []Param{{Name: "n", Type: Int, Doc: "n-gram size ≥ 1"}},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				return processors.NewNoRepeatNGram(a.Int("n"))
			},
		},
		{
			Kind: Processor, Type: "logit_bias",
			Doc: `Adds a bias to chosen tokens' logits; "-inf" bans a token.`,
			Params: []Param{{Name: "bias", Type: FloatMap,
				Doc: `token id → bias, e.g. { "15" = 2.5, "7" = "-inf" }`}},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				bias := a.FloatMap("bias")
				vocab, err := vocabSize(a)
				if err != nil {
					return nil, err
				}
				return processors.NewLogitBias(bias, vocab)
			},
		},
		{
			Kind: Processor, Type: "min_new_tokens",
			Doc:    "Bans the end-of-generation tokens until n tokens have been generated.",
			Params: []Param{{Name: "n", Type: Int, Doc: "minimum number of generated tokens ≥ 0"}},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				n := a.Int("n")
				if a.Env.Tokenizer == nil {
					return nil, errors.New("needs the pipeline's tokenizer")
				}
				return processors.NewMinNewTokens(n, a.Env.Tokenizer.Special().EndOfGeneration)
			},
		},
		{
			Kind: Processor, Type: "bad_words",
			Doc: "Bans token sequences: the last token of a sequence is banned where the text ends with the rest of it.",
			Params: []Param{
				{Name: "words", Type: StringList, Default: []any{},
					Doc: "words or phrases, each banned as encoded with and without a leading space"},
				{Name: "ids", Type: IntListList, Default: []any{},
					Doc: "token id sequences, e.g. [[15, 16], [7]]"},
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				words, idLists := a.Strings("words"), a.IntLists("ids")
				if a.Err() != nil {
					return nil, a.Err()
				}
				if len(words) == 0 && len(idLists) == 0 {
					return nil, &core.ParamError{Param: "words", Reason: "nothing to ban: give words, ids or both"}
				}
				vocab, err := vocabSize(a)
				if err != nil {
					return nil, err
				}
				// The id lists first, so that an error's index names the ids entry; the words'
				// sequences come from the tokenizer and are valid.
				var seqs [][]core.TokenID
				for _, l := range idLists {
					s := make([]core.TokenID, len(l))
					for i, id := range l {
						s[i] = core.TokenID(id)
						if int(s[i]) != id { // beyond int32: the range check names it
							s[i] = -1
						}
					}
					seqs = append(seqs, s)
				}
				if len(words) > 0 {
					if a.Env.Tokenizer == nil {
						return nil, errors.New("words need the pipeline's tokenizer")
					}
					ws, err := processors.BadWordSequences(a.Env.Tokenizer, words)
					if err != nil {
						return nil, err
					}
					seqs = append(seqs, ws...)
				}
				bw, err := processors.NewBadWords(seqs, vocab)
				if err != nil {
					return nil, err
				}
				return bw, nil
			},
		},
	}
}

// window reads the scope and last_n parameters of a penalty.
func window(a *Args) (processors.Window, error) {
	scope, err := processors.ParseScope(a.String("scope"))
	if err != nil && a.Err() == nil {
		return processors.Window{}, err
	}
	return processors.Window{Scope: scope, LastN: a.Int("last_n")}, nil
}

// vocabSize is the number of logits per row: the model's, or the tokenizer's without a model.
func vocabSize(a *Args) (int, error) {
	switch {
	case a.Env.Model != nil:
		return a.Env.Model.Config().VocabSize, nil
	case a.Env.Tokenizer != nil:
		return a.Env.Tokenizer.VocabSize(), nil
	}
	return 0, errors.New("needs the pipeline's model to check token ids")
}
