package pipeline

import (
	"errors"
	"fmt"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
)

// Parameters shared by several processors.
var (
	minKeepParam = Param{Name: "min_keep", Type: Int, Default: int64(1),
		Doc: "never keep fewer tokens than this (≥ 1)"}
	scopeParam = Param{Name: "scope", Type: String, Default: "all",
		Doc: `which tokens count: "all" (prompt and generated) or "generated"`}
	lastNParam = Param{Name: "last_n", Type: Int, Default: int64(-1),
		Doc: "count only the last n tokens of the scope; -1: all of them, 0 disables"}
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
			Doc: "Keeps the k most likely tokens, at least min_keep: max(k, min_keep).",
			Params: []Param{
				{Name: "k", Type: Int, Default: int64(40), Doc: "tokens kept; 0 disables"},
				minKeepParam,
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				return processors.NewTopKMinKeep(a.Int("k"), a.Int("min_keep"))
			},
		},
		{
			Kind: Processor, Type: "top_p",
			Doc: "Nucleus sampling: keeps the most likely tokens until their probability reaches p (the crossing token included).",
			Params: []Param{
				{Name: "p", Type: Float, Default: 0.95, Doc: "cumulative probability in [0, 1]; 1 disables, 0 keeps the most likely token"},
				minKeepParam,
				{Name: "boundary", Type: String, Default: "inclusive",
					Doc: `when a prefix sums to exactly p: "inclusive" (it is enough: llama.cpp, transformers, vLLM) or "exclusive" (one more token: the classic top_k_top_p_filtering)`},
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				b, err := processors.ParseBoundary(a.String("boundary"))
				if err != nil && a.Err() == nil {
					return nil, err
				}
				return processors.NewTopPBoundary(a.Float("p"), a.Int("min_keep"), b)
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
			Kind: Processor, Type: "top_n_sigma",
			Doc: "Keeps the tokens whose logit is within n standard deviations of the largest (top-nσ).",
			Params: []Param{{Name: "n", Type: Float, Default: 1.0,
				Doc: "standard deviations ≥ 0; 0 disables (llama.cpp's -1)"}},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				return processors.NewTopNSigma(a.Float("n"))
			},
		},
		{
			Kind: Processor, Type: "epsilon_cutoff",
			Doc: "Epsilon sampling: removes the tokens less likely than epsilon (transformers' epsilon_cutoff).",
			Params: []Param{
				{Name: "epsilon", Type: Float, Default: 3e-4, Doc: "probability cutoff in (0, 1); the paper suggests 3e-4"},
				minKeepParam,
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				return processors.NewEpsilonCutoff(a.Float("epsilon"), a.Int("min_keep"))
			},
		},
		{
			Kind: Processor, Type: "eta_cutoff",
			Doc: "Eta sampling: removes the tokens less likely than min(ε, √ε·e^−H), H the entropy (transformers' eta_cutoff).",
			Params: []Param{
				{Name: "epsilon", Type: Float, Default: 2e-3, Doc: "ε in (0, 1); the paper suggests 3e-4 to 4e-3"},
				minKeepParam,
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				return processors.NewEtaCutoff(a.Float("epsilon"), a.Int("min_keep"))
			},
		},
		{
			Kind: Processor, Type: "xtc",
			Doc: "Exclude top choices: at random steps, removes every token at least threshold likely except the least likely of them.",
			Params: []Param{
				{Name: "threshold", Type: Float, Default: 0.1, Doc: "probability in (0, 1]; above 0.5 disables"},
				{Name: "probability", Type: Float, Default: 0.5, Doc: "chance of acting at a step, in [0, 1]; 0 disables"},
				minKeepParam,
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				return processors.NewXTC(a.Float("threshold"), a.Float("probability"), a.Int("min_keep"))
			},
		},
		{
			Kind: Processor, Type: "mirostat",
			Doc: "Mirostat: truncates adaptively so that the chosen tokens' surprise tracks tau; put it last (the strategy draws from what it keeps).",
			Params: []Param{
				{Name: "version", Type: Int, Default: int64(2), Doc: "1 (Basu et al.) or 2 (llama.cpp's simplified variant)"},
				{Name: "tau", Type: Float, Default: 5.0, Doc: "target surprise in bits, ≥ 0"},
				{Name: "eta", Type: Float, Default: 0.1, Doc: "learning rate of the threshold mu, ≥ 0"},
				{Name: "m", Type: Int, Default: int64(100), Doc: "version 1: tokens used to estimate the Zipf exponent, ≥ 2"},
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				cfg := processors.MirostatConfig{Version: a.Int("version"), Tau: a.Float("tau"), Eta: a.Float("eta"), M: a.Int("m")}
				if cfg.Version == 1 {
					vocab, err := vocabSize(a)
					if err != nil {
						return nil, err
					}
					cfg.VocabSize = vocab
				}
				return processors.NewMirostat(cfg)
			},
		},
		{
			Kind: Processor, Type: "dynamic_temperature",
			Doc: "Entropy-scaled temperature between t − delta and t + delta (llama.cpp's dynatemp).",
			Params: []Param{
				{Name: "t", Type: Float, Default: 0.8, Doc: "centre temperature ≥ 0"},
				{Name: "delta", Type: Float, Default: 0.5, Doc: "half-range ≥ 0 (llama.cpp's dynatemp_range); 0: plain temperature t"},
				{Name: "exponent", Type: Float, Default: 1.0, Doc: "≥ 0; above 1 keeps the temperature low until the entropy is high"},
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				return processors.NewDynamicTemperature(a.Float("t"), a.Float("delta"), a.Float("exponent"))
			},
		},
		{
			Kind: Processor, Type: "dry",
			Doc: "DRY: penalises tokens that would extend a repetition, by multiplier·base^(length − allowed_length).",
			Params: []Param{
				{Name: "multiplier", Type: Float, Default: 0.8, Doc: "penalty scale ≥ 0; 0 disables"},
				{Name: "base", Type: Float, Default: 1.75, Doc: "growth per repeated token, ≥ 1"},
				{Name: "allowed_length", Type: Int, Default: int64(2), Doc: "longest repetition left unpenalised, ≥ 0"},
				{Name: "penalty_last_n", Type: Int, Default: int64(-1),
					Doc: "tokens searched (prompt included): -1 the whole sequence, 0 disables"},
				{Name: "sequence_breakers", Type: StringList, Default: breakerDefaults(),
					Doc: "strings a repetition cannot run across, matched on the text across token boundaries"},
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				breakers := a.Strings("sequence_breakers")
				if a.Err() != nil {
					return nil, a.Err()
				}
				if len(breakers) > 0 && a.Env.Tokenizer == nil {
					return nil, errors.New("sequence_breakers need the pipeline's tokenizer")
				}
				return processors.NewDRY(processors.DRYConfig{
					Multiplier: a.Float("multiplier"), Base: a.Float("base"), AllowedLength: a.Int("allowed_length"),
					LastN: a.Int("penalty_last_n"), SequenceBreakers: breakers,
				}, a.Env.Tokenizer)
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
				{Name: "last_n", Type: Int, Default: int64(64), Doc: "count only the last n tokens of the scope; -1: all of them, 0 disables"},
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
			Doc: "Bans the end-of-sequence tokens until n tokens have been generated.",
			Params: []Param{
				{Name: "n", Type: Int, Doc: "minimum number of generated tokens ≥ 0"},
				{Name: "eos_token_ids", Type: IntList, Default: []any{},
					Doc: "the token ids banned until then; empty: the tokenizer's end-of-generation tokens"},
			},
			NewProcessor: func(a *Args) (core.LogitsProcessor, error) {
				n, ids := a.Int("n"), a.Ints("eos_token_ids")
				if a.Err() != nil {
					return nil, a.Err()
				}
				if len(ids) == 0 {
					if a.Env.Tokenizer == nil {
						return nil, errors.New("needs the pipeline's tokenizer (or eos_token_ids)")
					}
					return processors.NewMinNewTokens(n, a.Env.Tokenizer.Special().EndOfGeneration, 0)
				}
				eos, err := tokenIDs("eos_token_ids", ids)
				if err != nil {
					return nil, err
				}
				vocab, err := vocabSize(a)
				if err != nil {
					return nil, err
				}
				return processors.NewMinNewTokens(n, eos, vocab)
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
				{Name: "exempt_eos", Type: Bool, Default: true,
					Doc: "never ban the tokenizer's end-of-generation tokens on their own (as transformers); false bans them too"},
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
				var exempt []core.TokenID
				if a.Bool("exempt_eos") {
					if a.Env.Tokenizer == nil {
						return nil, &core.ParamError{Param: "exempt_eos", Value: true, Reason: "needs the pipeline's tokenizer to know the end-of-generation tokens (or set it to false)"}
					}
					exempt = a.Env.Tokenizer.Special().EndOfGeneration
				}
				if a.Err() != nil {
					return nil, a.Err()
				}
				bw, err := processors.NewBadWords(seqs, vocab, exempt)
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

// tokenIDs converts a list of ints to token ids; a value beyond the int32 range is an error
// naming param[i].
func tokenIDs(param string, ids []int) ([]core.TokenID, error) {
	out := make([]core.TokenID, len(ids))
	for i, id := range ids {
		out[i] = core.TokenID(id)
		if int(out[i]) != id {
			return nil, &core.ParamError{Param: fmt.Sprintf("%s[%d]", param, i), Value: id, Reason: "is not a token id (beyond the int32 range)"}
		}
	}
	return out, nil
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

func breakerDefaults() []any {
	out := make([]any, len(processors.DefaultSequenceBreakers))
	for i, b := range processors.DefaultSequenceBreakers {
		out[i] = b
	}
	return out
}

// Class is what a processor does, for the order presets (see Orders).
type Class int

const (
	// ClassShaping adjusts logits from the history or from fixed lists: penalties, biases,
	// bans, DRY. Processor types without a class (plugins) count as shaping.
	ClassShaping Class = iota
	// ClassTemperature rescales the whole distribution: temperature, dynamic temperature.
	ClassTemperature
	// ClassTruncation removes tokens by their probability: top-k, top-p, min-p, typical-p,
	// top-nσ, epsilon, eta, XTC.
	ClassTruncation
	// ClassFinal chooses the set the strategy draws from, adaptively: mirostat.
	ClassFinal
)

var processorClasses = map[string]Class{
	"temperature": ClassTemperature, "dynamic_temperature": ClassTemperature,
	"top_k": ClassTruncation, "top_p": ClassTruncation, "min_p": ClassTruncation,
	"typical_p": ClassTruncation, "top_n_sigma": ClassTruncation, "epsilon_cutoff": ClassTruncation,
	"eta_cutoff": ClassTruncation, "xtc": ClassTruncation,
	"mirostat": ClassFinal,
}

// ProcessorClass returns the class of a processor type; unknown types are ClassShaping.
func ProcessorClass(typ string) Class { return processorClasses[typ] }
