package core

import "errors"

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
