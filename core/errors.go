package core

import (
	"errors"
	"fmt"
)

// Errors a caller can test for with errors.Is. Messages built on them say where.
var (
	// ErrNoCandidates: every token of a step is banned (-Inf) or truncated away, so nothing
	// can be selected.
	ErrNoCandidates = errors.New("no candidate token left: every logit is -Inf or was removed")
	// ErrInvalidLogits: a logit is NaN or +Inf (from the model or a processor).
	ErrInvalidLogits = errors.New("invalid logits")
	// ErrEmptyPrompt: the prompt encodes to no tokens, so there is nothing to condition on.
	ErrEmptyPrompt = errors.New("empty prompt: it encodes to no tokens (give text, or let the tokenizer add BOS)")
	// ErrContextFull: the prompt alone fills the model's context window.
	ErrContextFull = errors.New("prompt does not fit the model's context window")
)

// ParamError reports a part's parameter that is out of range or inconsistent. Constructors of
// built-in parts return it so that the pipeline can place the error on the parameter's line:
// "creative.toml:14: processors[2].p = 1.5: must be in (0, 1]".
type ParamError struct {
	Param  string
	Value  any
	Reason string
}

func (e *ParamError) Error() string {
	if e.Value == nil {
		return e.Param + ": " + e.Reason
	}
	return fmt.Sprintf("%s = %v: %s", e.Param, formatValue(e.Value), e.Reason)
}

func formatValue(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}
