// Package examples_test builds the example plugins and runs each one's pipeline.
package examples_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/plugins"
)

// buildExample builds an example into dir and returns the path of its program.
func buildExample(t *testing.T, dir, name string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	if name == "pyrepetition" {
		out += ".pyz"
		if err := exec.Command("/usr/bin/python3", "-c", "import grpc, google.protobuf").Run(); err != nil {
			t.Skip("skipping the Python example: /usr/bin/python3 lacks grpc or protobuf (apt-get install python3-grpcio python3-protobuf; scripts/test.sh does)")
		}
		stage := t.TempDir()
		files, _ := filepath.Glob("../../sdk/python/*.py")
		files = append(files, "pyrepetition/plugin.py")
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Base(f)
			if dst == "plugin.py" {
				dst = "__main__.py"
			}
			if err := os.WriteFile(filepath.Join(stage, dst), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if b, err := exec.Command("/usr/bin/python3", "-m", "zipapp", stage, "-p", "/usr/bin/python3", "-o", out).CombinedOutput(); err != nil {
			t.Fatalf("zipapp: %v\n%s", err, b)
		}
	} else if b, err := exec.Command("go", "build", "-o", out, "./"+name).CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, b)
	}
	if err := os.Chmod(out, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

// pipelineFor writes the example's pipeline.toml into dir with the program's path and sha256,
// after edit.
func pipelineFor(t *testing.T, dir, name, bin string, edit func(string) string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(name, "pipeline.toml"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := plugins.FileSHA256(bin)
	if err != nil {
		t.Fatal(err)
	}
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

func build(t *testing.T, path string) *pipeline.Built {
	t.Helper()
	b, err := pipeline.LoadAndBuild(path, pipeline.Options{StartPlugins: plugins.Starter(plugins.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func run(t *testing.T, b *pipeline.Built, prompt string, edit func(*core.Request)) *core.Result {
	t.Helper()
	req := b.Request(prompt)
	if edit != nil {
		edit(&req)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := core.Generate(ctx, b.Pipeline, req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// noneRunning fails if a program of dir still runs.
func noneRunning(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []string
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			if _, err := strconv.Atoi(e.Name()); err != nil {
				continue
			}
			cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if strings.Contains(string(cmd), dir+"/") {
				left = append(left, e.Name())
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin processes still running: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBanWords(t *testing.T) {
	dir := t.TempDir()
	bin := buildExample(t, dir, "banwords")
	with := build(t, pipelineFor(t, dir, "banwords", bin, nil))
	without := build(t, pipelineFor(t, dir, "banwords", bin, func(s string) string {
		return strings.Replace(s, `type = "no_pets"`, `type = "temperature"`, 1)
	}))
	banned := []string{"cat", "dog", "the ball"}
	seenWithout := false
	for seed := uint64(1); seed <= 6; seed++ {
		edit := func(r *core.Request) { r.Seed = core.SeedOf(seed); r.N = 3; r.IgnoreEOS = true }
		for _, s := range run(t, with, "the cat", edit).Sequences {
			for _, w := range banned {
				if strings.Contains(s.Text, w) {
					t.Fatalf("seed %d: %q contains the banned %q", seed, s.Text, w)
				}
			}
		}
		for _, s := range run(t, without, "the cat", edit).Sequences {
			for _, w := range banned {
				seenWithout = seenWithout || strings.Contains(s.Text, w)
			}
		}
	}
	if !seenWithout {
		t.Fatal("the banned words never appear without the plugin either: the test proves nothing")
	}
	with.Close()
	without.Close()
	noneRunning(t, dir)
}

func TestRegexStop(t *testing.T) {
	dir := t.TempDir()
	bin := buildExample(t, dir, "regexstop")
	b := build(t, pipelineFor(t, dir, "regexstop", bin, nil))
	res := run(t, b, "the dog", func(r *core.Request) { r.IgnoreEOS = true; r.MaxNewTokens = 200 })
	s := res.Sequences[0]
	if s.FinishReason != "stop_regex" || !strings.HasPrefix(s.FinishDetail, "matched ") {
		t.Fatalf("finish %q (%s): %q", s.FinishReason, s.FinishDetail, s.Text)
	}
	if regexp.MustCompile(`\b(sad|bad)\b`).MatchString(s.Text) {
		t.Fatalf("the match was not cut: %q", s.Text)
	}
	b.Close()

	// A bad pattern is reported on its line.
	_, err := pipeline.LoadAndBuild(pipelineFor(t, dir, "regexstop", bin, func(s string) string {
		return strings.Replace(s, `pattern = '\b(sad|bad)\b'`, `pattern = '(unclosed'`, 1)
	}), pipeline.Options{StartPlugins: plugins.Starter(plugins.Options{})})
	if err == nil || !regexp.MustCompile(`regexstop.toml:\d+: plugins\[0\]\.config\.pattern = "\(unclosed": error parsing regexp`).MatchString(err.Error()) {
		t.Fatalf("bad pattern: %v", err)
	}
	noneRunning(t, dir)
}

func TestNBest(t *testing.T) {
	dir := t.TempDir()
	bin := buildExample(t, dir, "nbest")
	b := build(t, pipelineFor(t, dir, "nbest", bin, nil))
	first := run(t, b, "the cat", nil)
	again := run(t, b, "the cat", nil)
	if len(first.Sequences) != 2 || first.GeneratedTokens != 8*24 {
		t.Fatalf("%d sequences, %d tokens generated", len(first.Sequences), first.GeneratedTokens)
	}
	if first.Sequences[0].Score < first.Sequences[1].Score || first.Sequences[0].Score >= 0 {
		t.Fatalf("scores %v, %v", first.Sequences[0].Score, first.Sequences[1].Score)
	}
	for i := range first.Sequences {
		if first.Sequences[i].Text != again.Sequences[i].Text {
			t.Fatal("same seed, different output")
		}
	}
	b.Close()
	noneRunning(t, dir)
}

func TestPythonRepetitionPenalty(t *testing.T) {
	dir := t.TempDir()
	bin := buildExample(t, dir, "pyrepetition")
	var host *plugins.Host
	start := func(spec *pipeline.Spec, reg *pipeline.Registry) (io.Closer, error) {
		h, err := plugins.Start(spec, reg, plugins.Options{})
		if h == nil {
			return nil, err
		}
		host = h
		return h, err
	}
	b, err := pipeline.LoadAndBuild(pipelineFor(t, dir, "pyrepetition", bin, nil), pipeline.Options{StartPlugins: start})
	if err != nil {
		t.Fatal(err)
	}
	if !host.Plugins()[0].SharedMemory() {
		t.Error("the Python plugin does not map the shared memory")
	}
	edit := func(r *core.Request) { r.IgnoreEOS = true; r.N = 2 }
	first := run(t, b, "the cat", edit)
	again := run(t, b, "the cat", edit)
	without := build(t, pipelineFor(t, dir, "pyrepetition", bin, func(s string) string {
		return strings.Replace(s, `type = "no_repeats"`, "type = \"temperature\"\nt = 1.0", 1)
	}))
	plain := run(t, without, "the cat", edit)
	for i := range first.Sequences {
		if first.Sequences[i].Text != again.Sequences[i].Text {
			t.Fatal("same seed, different output")
		}
	}
	if first.Sequences[0].Text == plain.Sequences[0].Text {
		t.Fatal("the penalty changed nothing")
	}
	// The plugin honours go-plugin's Shutdown: closing does not wait for the 2s kill.
	begin := time.Now()
	b.Close()
	if d := time.Since(begin); d > 1500*time.Millisecond {
		t.Errorf("closing the Python plugin took %v", d)
	}
	without.Close()
	noneRunning(t, dir)
}
