package pipeline

import (
	"fmt"

	"github.com/loomlm/loom/core"
)

// MaxPromptBytes is core.MaxPromptBytes.
func MaxPromptBytes(p *core.Pipeline) int { return core.MaxPromptBytes(p) }

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
