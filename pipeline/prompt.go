package pipeline

import (
	"fmt"

	"github.com/loomlm/loom/core"
)

// MaxPromptBytes bounds the prompts that can fit a pipeline's model: a prompt of more bytes
// than this encodes to more tokens than the model's context holds, whatever the text. It lets
// a program refuse an oversized prompt before encoding it (encoding costs memory in proportion
// to the text). It returns 0 when the model declares no context length (no bound).
//
// The bound is sound because a token never covers more bytes of text than the longest entry
// of the vocabulary: a text of B bytes encodes to at least ⌈B / L⌉ tokens, where L is the
// longest token in bytes (its text or its stored piece, whichever is longer, so special tokens
// written in the text and escaped byte pieces count too). A text of more than C × L bytes thus
// needs more than C positions.
func MaxPromptBytes(p *core.Pipeline) int {
	ctx := p.Model.Config().ContextLength
	if ctx <= 0 {
		return 0
	}
	longest := 1
	for id := range p.Tokenizer.VocabSize() {
		t := core.TokenID(id)
		longest = max(longest, len(p.Tokenizer.TokenBytes(t)), len(p.Tokenizer.Piece(t)))
	}
	return ctx * longest
}

// CheckPromptSize returns an error naming what (a flag or file) when a prompt of n bytes
// cannot fit the pipeline's model (see MaxPromptBytes).
func CheckPromptSize(p *core.Pipeline, what string, n int64) error {
	limit := MaxPromptBytes(p)
	if limit == 0 || n <= int64(limit) {
		return nil
	}
	cfg := p.Model.Config()
	return fmt.Errorf("%s: %d bytes cannot fit the model's context of %d tokens (no token of %s covers more than %d bytes, so a prompt of more than %d bytes is too long)",
		what, n, cfg.ContextLength, modelName(cfg), limit/cfg.ContextLength, limit)
}

func modelName(cfg core.ModelConfig) string {
	if cfg.Name != "" {
		return fmt.Sprintf("%q", cfg.Name)
	}
	return "the model"
}
