// Package pystop_test runs the pystop example: a stopping criterion written in Python, started
// by the plugin host as a real /usr/bin/python3 process.
package pystop_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/plugins"
)

// requirePython skips the test when /usr/bin/python3 lacks grpc or protobuf, except under CI
// (CI=true), where their absence is a failure.
func requirePython(t *testing.T) {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", "-c", "import grpc, google.protobuf").CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("/usr/bin/python3 lacks grpc or protobuf (apt-get install python3-grpcio python3-protobuf; scripts/test.sh does): %v\n%s", err, out)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip("skipping the Python plugin: " + msg)
}

// pack builds an executable zip of the Python sdk with main as its __main__.py, as build.sh
// does, and returns its path.
func pack(t *testing.T, dir, name string, main []byte) string {
	t.Helper()
	stage := t.TempDir()
	files, err := filepath.Glob("../../../sdk/python/*.py")
	if err != nil || len(files) == 0 {
		t.Fatalf("no sdk/python modules: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(stage, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(stage, "__main__.py"), main, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name+".pyz")
	if b, err := exec.Command("/usr/bin/python3", "-m", "zipapp", stage, "-p", "/usr/bin/python3", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("zipapp: %v\n%s", err, b)
	}
	if err := os.Chmod(out, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

// pipelineFile writes pipeline.toml into dir for the program bin, after edit.
func pipelineFile(t *testing.T, dir, name, bin string, edit func(string) string) string {
	t.Helper()
	src, err := os.ReadFile("pipeline.toml")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := plugins.FileSHA256(bin)
	if err != nil {
		t.Fatal(err)
	}
	// The tests run on the word model, where a stutter comes within a few seeds.
	src = []byte(strings.Replace(string(src), `builtin = "default"`, `builtin = "test"`, 1))
	s := regexp.MustCompile(`(?m)^sha256 = .*$`).ReplaceAllLiteralString(string(src), `sha256 = "`+sum+`"`)
	s = regexp.MustCompile(`(?m)^path = .*$`).ReplaceAllLiteralString(s, "path = "+strconv.Quote(bin))
	if edit != nil {
		s = edit(s)
	}
	p := filepath.Join(dir, name+".toml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// build builds a pipeline and returns it with its plugin host.
func build(t *testing.T, path string) (*pipeline.Built, *plugins.Host) {
	t.Helper()
	var host *plugins.Host
	start := func(spec *pipeline.Spec, reg *pipeline.Registry) (io.Closer, error) {
		h, err := plugins.Start(spec, reg, plugins.Options{})
		if h == nil {
			return nil, err
		}
		host = h
		return h, err
	}
	b, err := pipeline.LoadAndBuild(path, pipeline.Options{StartPlugins: start})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, host
}

func generate(t *testing.T, b *pipeline.Built, seed uint64) core.SequenceResult {
	t.Helper()
	req := b.Request("the dog")
	req.Seed = core.SeedOf(seed)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := core.Generate(ctx, b.Pipeline, req)
	if err != nil {
		t.Fatal(err)
	}
	return res.Sequences[0]
}

// stutter finds the first word said twice in a row, separated by white space only (what
// \b(\w+)\s+\1\b matches, found here without a backreference), and returns where it begins.
func stutter(text string) (int, bool) {
	type word struct{ start, end int }
	var words []word
	isWord := func(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }
	for i := 0; i < len(text); {
		if !isWord(rune(text[i])) {
			i++
			continue
		}
		j := i
		for j < len(text) && isWord(rune(text[j])) {
			j++
		}
		words = append(words, word{i, j})
		i = j
	}
	for k := 1; k < len(words); k++ {
		a, b := words[k-1], words[k]
		gap := text[a.end:b.start]
		if gap != "" && strings.TrimSpace(gap) == "" && text[a.start:a.end] == text[b.start:b.end] {
			return a.start, true
		}
	}
	return 0, false
}

// The Python criterion stops each sequence at exactly the token that completes the first
// stutter, and cuts the stutter from the text.
func TestPythonStop(t *testing.T) {
	requirePython(t)
	dir := t.TempDir()
	main, err := os.ReadFile("plugin.py")
	if err != nil {
		t.Fatal(err)
	}
	bin := pack(t, dir, "pystop", main)
	with, host := build(t, pipelineFile(t, dir, "pystop", bin, nil))
	if !host.Plugins()[0].SharedMemory() {
		t.Error("the Python plugin does not map the shared memory")
	}
	without, _ := build(t, pipelineFile(t, dir, "plain", bin, func(s string) string {
		return strings.Replace(s, "[[stopping]]\ntype = \"no_stutter\"\n", "", 1)
	}))
	stopped := 0
	for seed := uint64(1); seed <= 8; seed++ {
		plain := generate(t, without, seed)
		var text []byte
		at, cut := -1, 0
		for k, id := range plain.Tokens {
			text = append(text, without.Pipeline.Tokenizer.TokenBytes(id)...)
			if i, ok := stutter(string(text)); ok {
				at, cut = k, i
				break
			}
		}
		got := generate(t, with, seed)
		if at < 0 {
			if got.FinishReason != plain.FinishReason || !slices.Equal(got.Tokens, plain.Tokens) {
				t.Errorf("seed %d: no stutter in %q, yet it ended %s (%s) after %d tokens", seed, plain.Text, got.FinishReason, got.FinishDetail, len(got.Tokens))
			}
			continue
		}
		stopped++
		if got.FinishReason != "stop_python_regex" || !strings.HasPrefix(got.FinishDetail, "matched ") {
			t.Errorf("seed %d: finished %q (%s), want stop_python_regex", seed, got.FinishReason, got.FinishDetail)
		}
		if !slices.Equal(got.Tokens, plain.Tokens[:at+1]) {
			t.Errorf("seed %d: stopped after %d tokens, want %d (the stutter ends at token %d of %q)", seed, len(got.Tokens), at+1, at, plain.Text)
		}
		if want := string(text[:cut]); got.Text != want {
			t.Errorf("seed %d: text %q, want %q", seed, got.Text, want)
		}
	}
	if stopped == 0 {
		t.Fatal("no seed produced a stutter: the test proves nothing")
	}
	t.Logf("%d of 8 seeds stopped at a stutter", stopped)
}

// crashPlugin is a stopping criterion whose first process dies at its third check; the
// processes after it (the marker file exists then) work.
const crashPlugin = `import os
import loom_plugin


class Crashy:
    name = "crashy"

    def configure(self, cfg):
        self.marker = cfg.str("marker")

    def check(self, seq):
        if len(seq.generated()) >= 3 and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(3)
        return None


if __name__ == "__main__":
    loom_plugin.serve(Crashy())
`

// A Python criterion that crashes ends its sequence with reason "error" naming the plugin;
// the host keeps running and the next request gets a new process.
func TestPythonStopCrash(t *testing.T) {
	requirePython(t)
	dir := t.TempDir()
	bin := pack(t, dir, "crashy", []byte(crashPlugin))
	marker := filepath.Join(dir, "crashed-once")
	b, host := build(t, pipelineFile(t, dir, "crashy", bin, func(s string) string {
		s = strings.Replace(s, `name = "no_stutter"`, `name = "crashy"`, 1)
		s = strings.Replace(s, `type = "no_stutter"`, `type = "crashy"`, 1)
		return regexp.MustCompile(`(?m)^pattern = .*$`).ReplaceAllLiteralString(s, "marker = "+strconv.Quote(marker))
	}))
	got := generate(t, b, 1)
	if got.FinishReason != core.FinishError {
		t.Fatalf("finished %q (%s) after the plugin crashed, want error", got.FinishReason, got.FinishDetail)
	}
	for _, want := range []string{`plugin "crashy"`, "crashed", "exit status 3"} {
		if !strings.Contains(got.FinishDetail, want) {
			t.Errorf("detail %q lacks %q", got.FinishDetail, want)
		}
	}
	if len(got.Tokens) != 3 {
		t.Errorf("the sequence ended after %d tokens, want 3 (the crash came at the third check)", len(got.Tokens))
	}
	again := generate(t, b, 1)
	if again.FinishReason != core.FinishLength || len(again.Tokens) != 200 {
		t.Errorf("after the restart: finished %q (%s) after %d tokens, want length after 200", again.FinishReason, again.FinishDetail, len(again.Tokens))
	}
	if n := host.Plugins()[0].Starts(); n != 2 {
		t.Errorf("%d processes started, want 2", n)
	}
}
