package pipeline

import (
	"errors"
	"strconv"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/strategies"
)

// searchParts lists the search strategies beyond one-token-per-step decoding.
func searchParts() []*Part {
	specParams := []Param{
		{Name: "k", Type: Int, Default: int64(4), Doc: "tokens drafted per step"},
		{Name: "adaptive", Type: Bool, Default: false, Doc: "the same as k_policy = \"acceptance\""},
		{Name: "k_policy", Type: String, Default: "", Doc: "fixed (k every step), acceptance (grow k after fully accepted steps, shrink it after rejections, within [1, 2k]) or cost (measure draft and verification costs while decoding and draft the k in [0, 2k] with the most expected tokens per second; 0 is plain decoding); default fixed, or acceptance with adaptive = true"},
		{Name: "greedy", Type: Bool, Default: false, Doc: "verify by argmax (exactly greedy output) instead of rejection sampling"},
	}
	return []*Part{
		{
			Kind: Strategy, Type: "beam",
			Doc: "Beam search: keeps num_beams hypotheses ranked by summed log-probability after the processors; returns the best num_return_sequences.",
			Params: []Param{
				{Name: "num_beams", Type: Int, Default: int64(4), Doc: "live hypotheses per step"},
				{Name: "num_return_sequences", Type: Int, Default: int64(1), Doc: "finished sequences returned, best first (≤ num_beams)"},
				{Name: "length_penalty", Type: Float, Default: 1.0, Doc: "rank by sum / length^α (0 = raw sums; transformers' default is 1)"},
				{Name: "early_stopping", Type: Bool, Default: false, Doc: "stop at the first num_return_sequences finished (true) or when they can no longer be beaten (false)"},
				{Name: "no_repeat_ngram_size", Type: Int, Default: int64(0), Doc: "ban tokens that would repeat an n-gram of this size (0 = off)"},
				{Name: "do_sample", Type: Bool, Default: false, Doc: "draw the step's candidates from the beams' scores instead of taking the best"},
				{Name: "copy_forks", Type: Bool, Default: false, Doc: "copy whole caches when beams fork instead of sharing them (for benchmarks)"},
			},
			NewStrategy: func(a *Args) (core.Strategy, error) {
				return strategies.NewBeam(strategies.BeamConfig{
					NumBeams: a.Int("num_beams"), NumReturn: a.Int("num_return_sequences"),
					LengthPenalty: a.Float("length_penalty"), EarlyStopping: a.Bool("early_stopping"),
					NoRepeatNGram: a.Int("no_repeat_ngram_size"), DoSample: a.Bool("do_sample"), CopyForks: a.Bool("copy_forks"),
				})
			},
		},
		{
			Kind: Strategy, Type: "speculative",
			Doc:    "Speculative decoding with the [draft_model]: exact target distribution (rejection sampling) or exact greedy output.",
			Params: specParams, UsesDraftModel: true,
			NewStrategy: func(a *Args) (core.Strategy, error) {
				if a.Env.DraftModel == nil {
					return nil, errors.New("needs a [draft_model] table naming the draft model")
				}
				if err := strategies.CheckSameTokenizer(a.Env.Tokenizer, a.Env.DraftTokenizer, a.Env.Model, a.Env.DraftModel); err != nil {
					return nil, err
				}
				policy, err := kPolicy(a)
				if err != nil {
					return nil, err
				}
				return strategies.NewSpeculative(strategies.SpeculativeConfig{
					Draft: a.Env.DraftModel, K: a.Int("k"), Policy: policy, Greedy: a.Bool("greedy"),
				})
			},
		},
		{
			Kind: Strategy, Type: "prompt_lookup",
			Doc:    "Speculative decoding that drafts by matching the last n-gram against earlier text (no draft model): fast on copy-heavy tasks.",
			Params: append(specParams[:len(specParams):len(specParams)], Param{Name: "ngram", Type: Int, Default: int64(3), Doc: "longest n-gram to match (tries n down to 1)"}),
			NewStrategy: func(a *Args) (core.Strategy, error) {
				policy, err := kPolicy(a)
				if err != nil {
					return nil, err
				}
				return strategies.NewSpeculative(strategies.SpeculativeConfig{
					K: a.Int("k"), Policy: policy, Greedy: a.Bool("greedy"), NGram: a.Int("ngram"),
				})
			},
		},
	}
}

// kPolicy reads k_policy, and adaptive (its older spelling of "acceptance").
func kPolicy(a *Args) (strategies.KPolicy, error) {
	name, adaptive := a.String("k_policy"), a.Bool("adaptive")
	if name == "" {
		if adaptive {
			return strategies.KAcceptance, nil
		}
		return strategies.KFixed, nil
	}
	p, err := strategies.ParseKPolicy(name)
	if err != nil {
		return 0, &core.ParamError{Param: "k_policy", Value: name, Reason: "must be fixed, acceptance or cost"}
	}
	if adaptive && p != strategies.KAcceptance {
		return 0, &core.ParamError{Param: "adaptive", Value: true, Reason: "contradicts k_policy = " + strconv.Quote(name) + " (adaptive = true means k_policy = \"acceptance\")"}
	}
	return p, nil
}
