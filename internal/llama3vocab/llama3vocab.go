// Package llama3vocab gives loom's tests and benchmarks Llama 3's real 128 256-token
// vocabulary as a vocabulary-only GGUF file, and Llama 3's reference encoder to compare with.
//
// Both come from the npm package llama3-tokenizer-js (MIT), installed from the lockfile in
// node/ with `npm ci` when missing: node/dump.mjs prints its vocabulary and merges, from which
// GGUF writes the file the way llama.cpp's converter does for Llama 3 (model "gpt2",
// pre-tokenizer "llama-bpe", ids 128000 and up control tokens, BOS 128000, EOS 128001); and
// node/encode.mjs encodes texts with the package's own BPE implementation. The GGUF is built
// once and kept beside node_modules (node_modules/.loom/llama3-vocab.gguf), so it is rebuilt
// whenever the package is installed afresh.
package llama3vocab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"

	"github.com/loomlm/loom/model/gguf"
	"github.com/loomlm/loom/model/tokenizer"
)

// The Llama 3 vocabulary's shape and special ids.
const (
	VocabSize    = 128256
	FirstSpecial = 128000
	BOS          = 128000
	EOS          = 128001
)

// nodeDir returns the folder holding package.json and the scripts.
func nodeDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "node")
}

var install struct {
	sync.Mutex
	done bool
}

// ensureInstalled runs `npm ci` in node/ when llama3-tokenizer-js is not installed there.
func ensureInstalled() error {
	install.Lock()
	defer install.Unlock()
	if install.done {
		return nil
	}
	dir := nodeDir()
	// Packages' tests run as parallel processes: one npm ci at a time in the folder.
	lock, err := os.OpenFile(filepath.Join(dir, ".install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "llama3-tokenizer-js", "package.json")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			return fmt.Errorf("npm is required to install llama3-tokenizer-js from %s/package-lock.json: %w", dir, err)
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	install.done = true
	return nil
}

// node runs script in node/ with stdin as its input and returns its standard output.
func node(script string, stdin []byte) ([]byte, error) {
	if err := ensureInstalled(); err != nil {
		return nil, err
	}
	bin, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is required to run llama3-tokenizer-js: %w", err)
	}
	cmd := exec.Command(bin, script)
	cmd.Dir = nodeDir()
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("node %s: %v\n%s", script, err, stderr.Bytes())
	}
	return out, nil
}

var built struct {
	sync.Mutex
	path string
}

// Path returns the path of the vocabulary-only Llama 3 GGUF, building it on first use.
func Path() (string, error) {
	built.Lock()
	defer built.Unlock()
	if built.path != "" {
		return built.path, nil
	}
	if err := ensureInstalled(); err != nil {
		return "", err
	}
	path := filepath.Join(nodeDir(), "node_modules", ".loom", "llama3-vocab.gguf")
	if _, err := os.Stat(path); err == nil {
		built.path = path
		return path, nil
	}
	out, err := node("dump.mjs", nil)
	if err != nil {
		return "", err
	}
	var v struct{ Tokens, Merges []string }
	if err := json.Unmarshal(out, &v); err != nil {
		return "", fmt.Errorf("node dump.mjs: %w", err)
	}
	if len(v.Tokens) != VocabSize {
		return "", fmt.Errorf("llama3-tokenizer-js has %d tokens, want %d", len(v.Tokens), VocabSize)
	}
	types := make([]int32, len(v.Tokens))
	for i := range types {
		types[i] = int32(tokenizer.Normal)
		if i >= FirstSpecial {
			types[i] = int32(tokenizer.Control)
		}
	}
	w := gguf.NewWriter()
	for _, kv := range []struct {
		key   string
		value any
	}{
		{"general.architecture", "llama"},
		{"general.name", "Llama 3 vocabulary (llama3-tokenizer-js 1.2.0)"},
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", "llama-bpe"},
		{"tokenizer.ggml.tokens", v.Tokens},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.merges", v.Merges},
		{"tokenizer.ggml.bos_token_id", uint32(BOS)},
		{"tokenizer.ggml.eos_token_id", uint32(EOS)},
		{"tokenizer.ggml.add_bos_token", true},
	} {
		if err := w.Set(kv.key, kv.value); err != nil {
			return "", fmt.Errorf("llama3vocab: %s: %w", kv.key, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "llama3-vocab-*.gguf")
	if err != nil {
		return "", err
	}
	if _, err := w.WriteTo(tmp); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	// Packages' tests run in parallel processes; the rename makes the file appear whole.
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	built.path = path
	return path, nil
}

// Tokenizer loads the Llama 3 vocabulary, failing tb when it cannot be built.
func Tokenizer(tb testing.TB) *tokenizer.Tokenizer {
	tb.Helper()
	path, err := Path()
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := tokenizer.Load(path)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// Encode returns the ids llama3-tokenizer-js's own encoder gives each text (no BOS or EOS;
// Llama 3's special tokens written in a text are parsed as such).
func Encode(texts []string) ([][]int32, error) {
	in, err := json.Marshal(texts)
	if err != nil {
		return nil, err
	}
	out, err := node("encode.mjs", in)
	if err != nil {
		return nil, err
	}
	var ids [][]int32
	if err := json.Unmarshal(out, &ids); err != nil {
		return nil, fmt.Errorf("node encode.mjs: %w", err)
	}
	if len(ids) != len(texts) {
		return nil, fmt.Errorf("node encode.mjs: %d encodings for %d texts", len(ids), len(texts))
	}
	return ids, nil
}
