package pipeline

import (
	"sync"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/strategies"
)

var (
	builtinsOnce sync.Once
	builtinReg   *Registry
)

// Builtins returns the registry of loom's built-in parts. It is shared: Clone it before adding
// parts.
func Builtins() *Registry {
	builtinsOnce.Do(func() {
		builtinReg = &Registry{}
		for _, p := range builtinParts() {
			builtinReg.MustRegister(p)
		}
	})
	return builtinReg
}

// forceTokensParam is greedy's and sample's option to append forced tokens without a step.
var forceTokensParam = Param{Name: "force_tokens", Type: Bool, Default: false,
	Doc: "append a token that a constraint allows alone (json_schema, grammar, regex, choice) without waiting for the model's step: it runs with the next token, one forward fewer"}

// builtinParts lists every built-in part; the processors and stopping criteria are in their
// own files.
func builtinParts() []*Part {
	parts := []*Part{
		{
			Kind: Strategy, Type: "greedy",
			Doc:    "Argmax of the processed distribution at every step.",
			Params: []Param{forceTokensParam},
			NewStrategy: func(a *Args) (core.Strategy, error) {
				return strategies.Greedy{ForceTokens: a.Bool("force_tokens")}, nil
			},
		},
		{
			Kind: Strategy, Type: "sample",
			Doc:    "Ancestral (multinomial) sampling from the processed distribution, one seeded stream per sequence.",
			Params: []Param{forceTokensParam},
			NewStrategy: func(a *Args) (core.Strategy, error) {
				return strategies.Ancestral{ForceTokens: a.Bool("force_tokens")}, nil
			},
		},
	}
	parts = append(parts, searchParts()...)
	parts = append(parts, processorParts()...)
	parts = append(parts, constraintParts()...)
	parts = append(parts, stoppingParts()...)
	return parts
}
