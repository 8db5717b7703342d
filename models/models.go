// Package models embeds loom's own small models, so that a pipeline runs on a real transformer
// with no download. Importing it, even blank, registers them with the pipeline:
//
//	[model]
//	builtin = "default"   # the target: Llama architecture, ~5.5M parameters, English
//	builtin = "draft"     # its draft for speculative decoding: ~0.6M parameters, same tokenizer
//
// Both were trained by the project from public-domain English (the King James Bible, the State
// of the Union addresses, Moby-Dick, Newton's Opticks) with a byte-level BPE tokenizer of 4096
// tokens; models/recipe/train.sh rebuilds them and models/README.md describes them. A [model]
// table's other keys are the options of the GGUF loader (see package model/loader).
package models

import (
	_ "embed"
	"fmt"
	"io"
	"unsafe"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/gguf"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/model/loader"
	"github.com/loomlm/loom/model/tokenizer"
	"github.com/loomlm/loom/pipeline"
)

var (
	//go:embed default.gguf
	defaultGGUF []byte
	//go:embed draft.gguf
	draftGGUF []byte
)

// files maps the registered names to the embedded GGUF files.
var files = map[string][]byte{
	"default": defaultGGUF,
	"draft":   draftGGUF,
}

func init() {
	for name := range files {
		pipeline.RegisterBuiltinModel(name, func(options map[string]any) (core.Model, core.Tokenizer, io.Closer, error) {
			opts, err := loader.ParseOptions(options)
			if err != nil {
				return nil, nil, nil, err
			}
			m, tok, err := Open(name, opts)
			if err != nil {
				return nil, nil, nil, err
			}
			return m, tok, m, nil
		})
	}
}

// Names lists the embedded models.
func Names() []string { return []string{"default", "draft"} }

// GGUF returns the embedded GGUF file of the named model, or nil. The bytes must not be changed.
func GGUF(name string) []byte { return files[name] }

// Open loads the named embedded model and its tokenizer. The weights are used in place, in
// the executable's memory, unless the embedded data is not aligned for the kernels or
// opts.NoMmap asks for them in memory of the process's own (a copy on the heap: at these
// sizes huge pages made no difference).
func Open(name string, opts llama.Options) (*llama.Model, *tokenizer.Tokenizer, error) {
	data, ok := files[name]
	if !ok {
		return nil, nil, fmt.Errorf("models: no embedded model %q (known: default, draft)", name)
	}
	if opts.NoMmap || uintptr(unsafe.Pointer(unsafe.SliceData(data)))%64 != 0 {
		data = aligned(data)
	}
	f, err := gguf.Read(data)
	if err != nil {
		return nil, nil, fmt.Errorf("models: %s: %w", name, err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, nil, fmt.Errorf("models: %s: %w", name, err)
	}
	opts.NoPrefetch = true // the data is already in memory
	m, err := llama.New(f, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("models: %s: %w", name, err)
	}
	return m, tok, nil
}

// aligned returns a copy of b that starts on a 64-byte boundary.
func aligned(b []byte) []byte {
	buf := make([]byte, len(b)+64)
	off := (64 - int(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%64)) % 64
	out := buf[off : off+len(b)]
	copy(out, b)
	return out
}
