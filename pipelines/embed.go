// Package pipelines embeds the example pipeline files of this directory, so that programs
// (loom serve with no arguments) can offer them with nothing on disk.
package pipelines

import "embed"

// Files holds the example pipelines, one NAME.toml each at the root.
//
//go:embed *.toml
var Files embed.FS
