package pipeline

import (
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/stopping"
)

// stoppingParts lists the built-in stopping criteria.
func stoppingParts() []*Part {
	return []*Part{
		{
			Kind: Stopping, Type: "max_new_tokens",
			Doc:    "Stop after n generated tokens (reason length).",
			Params: []Param{{Name: "n", Type: Int, Doc: "tokens to generate at most"}},
			NewStopping: func(a *Args) (core.StoppingCriterion, error) {
				return stopping.NewMaxNewTokens(a.Int("n"))
			},
		},
		{
			Kind: Stopping, Type: "eos",
			Doc:    "Stop on any of these end-of-generation ids (reason eos), besides the tokenizer's own.",
			Params: []Param{{Name: "ids", Type: IntList, Doc: "token ids"}},
			NewStopping: func(a *Args) (core.StoppingCriterion, error) {
				v, err := vocabSize(a)
				if err != nil {
					return nil, err
				}
				return stopping.NewEOS(a.Ints("ids"), v)
			},
		},
		{
			Kind: Stopping, Type: "stop_tokens",
			Doc:    "Stop on any of these token ids (reason stop_token).",
			Params: []Param{{Name: "ids", Type: IntList, Doc: "token ids"}},
			NewStopping: func(a *Args) (core.StoppingCriterion, error) {
				v, err := vocabSize(a)
				if err != nil {
					return nil, err
				}
				return stopping.NewStopTokens(a.Ints("ids"), v)
			},
		},
		{
			Kind: Stopping, Type: "stop_strings",
			Doc: "Stop when the generated text contains one of these strings, across token boundaries (reason stop_string).",
			Params: []Param{
				{Name: "strings", Type: StringList, Doc: "the stop strings"},
				{Name: "include", Type: Bool, Default: false, Doc: "keep the stop string in the returned text"},
			},
			NewStopping: func(a *Args) (core.StoppingCriterion, error) {
				return stopping.NewStopStrings(a.Strings("strings"), a.Bool("include"))
			},
		},
		{
			Kind: Stopping, Type: "max_time",
			Doc:    "Stop once the request has run this long (reason time).",
			Params: []Param{{Name: "seconds", Type: Float, Doc: "wall-clock limit in seconds"}},
			NewStopping: func(a *Args) (core.StoppingCriterion, error) {
				return stopping.NewMaxTime(a.Float("seconds"))
			},
		},
	}
}
