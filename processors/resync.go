package processors

import "github.com/loomlm/loom/core"

// The stateful processors below bring their state up to date from the sequence at every call
// (penalties recount their window when the sequence's Revision changes; DRY reads its window)
// or follow a random stream that a Truncate does not rewind (XTC's coin), so a Session rolls
// them back without snapshots. Mirostat's μ follows the distributions it saw and is restored
// from snapshots.
var (
	_ core.Resyncer = (*Penalties)(nil)
	_ core.Resyncer = (*DRY)(nil)
	_ core.Resyncer = (*XTC)(nil)
)

// Resyncs implements core.Resyncer.
func (*Penalties) Resyncs() {}

// Resyncs implements core.Resyncer.
func (*DRY) Resyncs() {}

// Resyncs implements core.Resyncer.
func (*XTC) Resyncs() {}
