// Package loader opens GGUF model files: the transformer (package llama) and the tokenizer
// (package tokenizer) from one path. Importing it, even blank, installs it as the pipeline's
// loader of model files, so that a pipeline's [model] path = "…" and `loom run --model FILE`
// work on any supported GGUF file.
//
// The [model] table's other keys tune the runtime:
//
//	kv_type        = "f32"   # element type of the KV cache: "f32" (default), "f16" or "q8_0"
//	kv_budget_mb   = 1024    # most memory the KV cache may take, in MiB
//	block_size     = 16      # positions per KV cache block
//	prefix_cache   = true    # reuse cached prompt prefixes across requests
//	context_length = 4096    # override the file's context length
//	batch_tokens   = 256     # most token rows per pass through the layers
//	repack         = true    # copy Q4_0/Q8_0/IQ4_NL weights into the packed kernels' layout
//	                         # (AVX-512 VNNI; their size in memory again)
//	mmap           = true    # map the file; false reads it into memory of its own, on Linux
//	                         # on transparent huge pages (llama.cpp's --no-mmap), which can
//	                         # make the weights read in place much faster to stream
package loader

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/gguf"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/model/tokenizer"
	"github.com/loomlm/loom/pipeline"
)

func init() {
	pipeline.SetFileOpener(Open)
}

// Load opens the model file at path and returns its model and tokenizer. The model holds the
// file's memory mapping until its Close.
func Load(path string, opts llama.Options) (*llama.Model, *tokenizer.Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, nil, err
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	f.Close()
	m, err := llama.Open(path, opts)
	if err != nil {
		return nil, nil, err
	}
	if tv, mv := tok.VocabSize(), m.Params().VocabSize; tv > mv {
		m.Close()
		return nil, nil, fmt.Errorf("%s: the tokenizer has %d tokens but the model only %d embedding rows", path, tv, mv)
	}
	return m, tok, nil
}

// Open is the pipeline's file opener: Load with the options of a [model] table (see the
// package documentation), reporting loading and long prefills on standard error when it is
// a terminal.
func Open(path string, options map[string]any) (core.Model, core.Tokenizer, io.Closer, error) {
	opts, err := ParseOptions(options)
	if err != nil {
		return nil, nil, nil, err
	}
	if IsTerminal(os.Stderr) {
		opts.Progress = TerminalProgress(os.Stderr, filepath.Base(path))
	}
	m, tok, err := Load(path, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	return m, tok, m, nil
}

// optionKeys lists the options ParseOptions accepts.
var optionKeys = []string{"batch_tokens", "block_size", "context_length", "kv_budget_mb", "kv_type", "mmap", "prefix_cache", "repack"}

// ParseOptions converts the options of a [model] table to llama.Options. It reports every bad
// option at once: the error joins one *core.ParamError per key (errors.Join).
func ParseOptions(options map[string]any) (llama.Options, error) {
	var o llama.Options
	var errs []error
	keys := make([]string, 0, len(options))
	for k := range options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := options[k]
		bad := func(reason string) error { return &core.ParamError{Param: k, Value: v, Reason: reason} }
		positive := func() (int, error) {
			n, ok := asInt(v)
			if !ok || n <= 0 {
				return 0, bad("must be a positive integer")
			}
			return n, nil
		}
		boolean := func() (bool, error) {
			b, ok := v.(bool)
			if !ok {
				return false, bad("must be true or false")
			}
			return b, nil
		}
		var err error
		switch k {
		case "kv_type":
			s, ok := v.(string)
			var perr error
			if ok {
				o.KVType, perr = cache.ParseDType(s)
			}
			if !ok || perr != nil {
				err = bad(`must be "f32", "f16" or "q8_0"`)
			}
		case "kv_budget_mb":
			var n int
			if n, err = positive(); err == nil {
				o.KVBudget = int64(n) << 20
			}
		case "block_size":
			o.BlockSize, err = positive()
		case "context_length":
			o.ContextLength, err = positive()
		case "batch_tokens":
			o.BatchTokens, err = positive()
		case "prefix_cache":
			var b bool
			b, err = boolean()
			o.NoPrefixCache = !b
		case "repack":
			var b bool
			b, err = boolean()
			o.NoRepack = !b
		case "mmap":
			var b bool
			b, err = boolean()
			o.NoMmap = !b
		default:
			err = &core.ParamError{Param: k, Reason: "unknown model option (known: " + strings.Join(optionKeys, ", ") + ")"}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return o, errors.Join(errs...)
}

func asInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case float64:
		if x == float64(int(x)) {
			return int(x), true
		}
	}
	return 0, false
}

// IsTerminal reports whether f is a character device (a terminal).
func IsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// TerminalProgress returns a llama.Options.Progress that draws a one-line progress report on
// w, a terminal: the percentage of the weights read while loading name, and the tokens of a
// long prefill. The line is erased when the work completes.
func TerminalProgress(w io.Writer, name string) func(stage string, done, total int64) {
	var mu sync.Mutex
	return func(stage string, done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		if done >= total {
			fmt.Fprint(w, "\r\033[K")
			return
		}
		switch stage {
		case "load":
			fmt.Fprintf(w, "\rloading %s: %3d%% of %d MiB", name, done*100/max(total, 1), total>>20)
		default:
			fmt.Fprintf(w, "\r%s: %d/%d tokens", stage, done, total)
		}
	}
}
