package pipeline

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/loomlm/loom/core"
)

// ModelOpener opens a model with the options of its [model] table (every key but path and
// builtin). It returns a Closer when the model holds resources (a memory-mapped file).
type ModelOpener func(options map[string]any) (core.Model, core.Tokenizer, io.Closer, error)

// FileOpener opens a model file with the options of its [model] table.
type FileOpener func(path string, options map[string]any) (core.Model, core.Tokenizer, io.Closer, error)

var (
	modelsMu   sync.RWMutex
	builtins   = map[string]ModelOpener{}
	fileOpener FileOpener
)

// RegisterBuiltinModel makes an embedded model available as [model] builtin = name.
func RegisterBuiltinModel(name string, open ModelOpener) {
	modelsMu.Lock()
	defer modelsMu.Unlock()
	builtins[name] = open
}

// SetFileOpener installs the loader of model files ([model] path = …).
func SetFileOpener(open FileOpener) {
	modelsMu.Lock()
	defer modelsMu.Unlock()
	fileOpener = open
}

// BuiltinModels lists the names of the embedded models.
func BuiltinModels() []string {
	modelsMu.RLock()
	defer modelsMu.RUnlock()
	names := make([]string, 0, len(builtins))
	for n := range builtins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// OpenModel opens the model a [model] table declares; a relative path is resolved against dir.
func OpenModel(ms ModelSpec, dir string) (core.Model, core.Tokenizer, io.Closer, error) {
	modelsMu.RLock()
	open, ok := builtins[ms.Builtin]
	files := fileOpener
	modelsMu.RUnlock()
	if ms.Builtin != "" {
		if !ok {
			return nil, nil, nil, fmt.Errorf("builtin = %q: no such embedded model (known: %s)", ms.Builtin, strings.Join(BuiltinModels(), ", "))
		}
		return open(ms.Options)
	}
	if files == nil {
		return nil, nil, nil, fmt.Errorf("path = %q: this program cannot load model files", ms.Path)
	}
	path := ms.Path
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	return files(path, ms.Options)
}
