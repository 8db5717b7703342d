package core

import "context"

// ModelConfig describes a loaded model.
type ModelConfig struct {
	// Name is a human-readable name (file name or general.name).
	Name string
	// Architecture is the architecture family, e.g. "llama" or "qwen2".
	Architecture string
	// VocabSize is the number of logits per row.
	VocabSize int
	// ContextLength is the largest number of positions a sequence may hold.
	ContextLength int
}

// State is one sequence's state inside a model: how many tokens it has processed and their
// cached keys and values. States come from Model.NewState and are advanced by Model.Forward.
type State interface {
	// Len is the number of tokens processed so far (the next token's position).
	Len() int
	// Fork returns a new state with the same history. Implementations share cached data
	// copy-on-write, so a fork costs bookkeeping, not a copy.
	Fork() (State, error)
	// Truncate rolls the state back to its first n tokens (0 ≤ n ≤ Len).
	Truncate(n int) error
	// Close releases the state's resources. The state must not be used afterwards.
	Close()
}

// StateCopier is implemented by states that can also fork by copying all their cached data
// instead of sharing it (see Session.ForkCopy).
type StateCopier interface {
	Copy() (State, error)
}

// ForwardItem is one sequence's part of a batched forward pass.
type ForwardItem struct {
	// State is the sequence to advance; Tokens are appended at positions State.Len()….
	State  State
	Tokens []TokenID
	// AllLogits asks for a logits row for every token of Tokens (speculative verification);
	// otherwise only the row after the last token is returned.
	AllLogits bool
	// Logits is filled by Forward: one row of VocabSize logits per requested position. The
	// rows belong to the model and stay valid until the next Forward on the same State; the
	// caller may modify them in place.
	Logits [][]float32
}

// Model is a causal language model that turns token sequences into next-token logits.
// Implementations must allow concurrent Forward calls on different States.
type Model interface {
	Config() ModelConfig
	// NewState returns an empty sequence state.
	NewState() (State, error)
	// Forward runs one batched forward pass over the items, each with its own new tokens at
	// its own positions, and fills every item's Logits.
	Forward(ctx context.Context, batch []ForwardItem) error
}

// PrefixCached is implemented by a State whose model reuses the keys and values of earlier
// sequences with the same prefix: CachedTokens reports how many positions the state took
// from that cache instead of computing them.
type PrefixCached interface {
	CachedTokens() int
}
