// Package examples_test builds the example plugins and runs each one's pipeline.
package examples_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomlm/loom/core"
	// The examples' pipelines run on the embedded model: [model] builtin = "default".
	_ "github.com/loomlm/loom/models"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/plugins"
)

// requirePython skips the test when /usr/bin/python3 lacks the packages the Python sdk runs on
// — they are system packages, not part of the repository — except on CI (CI=true), where the
// test fails instead: there a missing package is a broken environment, not a reason to skip.
func requirePython(t *testing.T) {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", "-c", "import grpc, google.protobuf").CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("/usr/bin/python3 lacks grpc or protobuf (%v: %s); apt-get install python3-grpcio python3-protobuf (scripts/test.sh does)",
		err, strings.TrimSpace(string(out)))
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true and the Python example cannot run: " + msg)
	}
	t.Skip("skipping the Python example outside CI: " + msg)
}

// buildExample builds an example into dir and returns the path of its program.
func buildExample(t *testing.T, dir, name string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	if name == "pyrepetition" {
		out += ".pyz"
		requirePython(t)
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
		return strings.Replace(s, `type = "no_names"`, `type = "temperature"`, 1)
	}))
	banned := []string{"LORD", "God", "the king"}
	seenWithout := map[string]bool{}
	for seed := uint64(1); seed <= 6; seed++ {
		edit := func(r *core.Request) { r.Seed = core.SeedOf(seed); r.N = 3; r.IgnoreEOS = true }
		for _, s := range run(t, with, "And it came to pass", edit).Sequences {
			for _, w := range banned {
				if strings.Contains(s.Text, w) {
					t.Fatalf("seed %d: %q contains the banned %q", seed, s.Text, w)
				}
			}
		}
		for _, s := range run(t, without, "And it came to pass", edit).Sequences {
			for _, w := range banned {
				seenWithout[w] = seenWithout[w] || strings.Contains(s.Text, w)
			}
		}
	}
	for _, w := range banned {
		if !seenWithout[w] {
			t.Errorf("%q never appears without the plugin either: the test proves nothing for it", w)
		}
	}
	with.Close()
	without.Close()
	noneRunning(t, dir)
}

func TestRegexStop(t *testing.T) {
	dir := t.TempDir()
	bin := buildExample(t, dir, "regexstop")
	b := build(t, pipelineFor(t, dir, "regexstop", bin, nil))
	end := regexp.MustCompile(`[.!?](\s|$)`)
	for seed := uint64(1); seed <= 4; seed++ {
		res := run(t, b, "And it came to pass", func(r *core.Request) {
			r.IgnoreEOS = true
			r.MaxNewTokens = 200
			r.Seed = core.SeedOf(seed)
		})
		s := res.Sequences[0]
		if s.FinishReason != "stop_regex" || !strings.HasPrefix(s.FinishDetail, "matched ") {
			t.Fatalf("seed %d: finish %q (%s): %q", seed, s.FinishReason, s.FinishDetail, s.Text)
		}
		if m, err := strconv.Unquote(strings.TrimPrefix(s.FinishDetail, "matched ")); err != nil || !end.MatchString(m) {
			t.Errorf("seed %d: the stop reports %q, not the end of a sentence", seed, s.FinishDetail)
		}
		t.Logf("seed %d: %q", seed, s.Text)
		if end.MatchString(s.Text) {
			t.Fatalf("seed %d: the match was not cut: %q", seed, s.Text)
		}
	}
	b.Close()

	// A bad pattern is reported on its line.
	_, err := pipeline.LoadAndBuild(pipelineFor(t, dir, "regexstop", bin, func(s string) string {
		return strings.Replace(s, `pattern = '[.!?](\s|$)'`, `pattern = '(unclosed'`, 1)
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
	first := run(t, b, "And God said", nil)
	again := run(t, b, "And God said", nil)
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

// TestPythonRepetitionPenalty checks the Python example against loom's built-in
// repetition_penalty with the same penalty and window: at every step of a session both see the
// same raw logits and must return the same processed logits, bit for bit, and whole seeded
// generations must agree token for token and score for score.
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
	src := pipelineFor(t, dir, "pyrepetition", bin, nil)
	py, err := pipeline.LoadAndBuild(src, pipeline.Options{StartPlugins: start})
	if err != nil {
		t.Fatal(err)
	}
	if !host.Plugins()[0].SharedMemory() {
		t.Error("the Python plugin does not map the shared memory")
	}
	// The built-in processor with the plugin's configuration.
	text, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	penalty := regexp.MustCompile(`(?m)^penalty = (\S+)$`).FindSubmatch(text)
	lastN := regexp.MustCompile(`(?m)^last_n = (\S+)$`).FindSubmatch(text)
	if penalty == nil || lastN == nil {
		t.Fatalf("%s: no penalty or last_n in [plugins.config]", src)
	}
	builtin := build(t, pipelineFor(t, dir, "pyrepetition", bin, func(s string) string {
		return strings.Replace(s, `type = "no_repeats"`, fmt.Sprintf("type = \"repetition_penalty\"\npenalty = %s\nlast_n = %s\nscope = \"all\"", penalty[1], lastN[1]), 1)
	}))

	// Step by step: same logits in, same logits out.
	ctx := context.Background()
	req := py.Request("And God said unto Moses, And God said")
	req.N, req.IgnoreEOS, req.MaxNewTokens = 2, true, 40
	var sessions [2]*core.Session
	var seqs [2][]*core.Sequence
	for i, b := range []*pipeline.Built{py, builtin} {
		if sessions[i], err = core.NewSession(ctx, b.Pipeline, req); err != nil {
			t.Fatal(err)
		}
		if seqs[i], err = sessions[i].Start(req.N); err != nil {
			t.Fatal(err)
		}
	}
	changed := 0
	for step := range req.MaxNewTokens {
		var raw [2][][]float32
		var cands [2][]*core.Candidates
		for i, s := range sessions {
			for _, q := range seqs[i] {
				raw[i] = append(raw[i], slices.Clone(q.Logits()))
			}
			if cands[i], err = s.ProcessBatch(seqs[i]); err != nil {
				t.Fatal(err)
			}
		}
		for j := range seqs[0] {
			if !slices.Equal(raw[0][j], raw[1][j]) {
				t.Fatalf("step %d, sequence %d: the two pipelines' models gave different logits", step, j)
			}
			got, want := cands[0][j].Logits(), cands[1][j].Logits()
			if len(got) != len(want) {
				t.Fatalf("step %d, sequence %d: %d logits from Python, %d built in", step, j, len(got), len(want))
			}
			for id := range want {
				if math.Float32bits(got[id]) != math.Float32bits(want[id]) {
					t.Fatalf("step %d, sequence %d, token %d: raw logit %v, Python gives %v, loom's repetition_penalty %v",
						step, j, id, raw[0][j][id], got[id], want[id])
				}
				if want[id] != raw[1][j][id] {
					changed++
				}
			}
		}
		for i, s := range sessions {
			for j, q := range seqs[i] {
				ch, err := s.Sample(q, cands[i][j])
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Append(q, ch); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Forward(seqs[i]...); err != nil {
				t.Fatal(err)
			}
		}
		for j := range seqs[0] {
			if seqs[0][j].Tokens()[len(seqs[0][j].Tokens())-1] != seqs[1][j].Tokens()[len(seqs[1][j].Tokens())-1] {
				t.Fatalf("step %d, sequence %d: the same seed sampled different tokens", step, j)
			}
		}
	}
	if changed == 0 {
		t.Fatal("the penalty changed no logit: the comparison proves nothing")
	}
	t.Logf("%d penalised logits over %d steps, all equal bit for bit", changed, req.MaxNewTokens)

	// Whole generations: the same tokens and scores with the same seed.
	edit := func(r *core.Request) { r.IgnoreEOS = true; r.N = 2; r.Return.Logprobs = true }
	first := run(t, py, "And God said", edit)
	again := run(t, py, "And God said", edit)
	ref := run(t, builtin, "And God said", edit)
	without := build(t, pipelineFor(t, dir, "pyrepetition", bin, func(s string) string {
		return strings.Replace(s, `type = "no_repeats"`, "type = \"temperature\"\nt = 1.0", 1)
	}))
	plain := run(t, without, "And God said", edit)
	for i := range first.Sequences {
		f, a, w := first.Sequences[i], again.Sequences[i], ref.Sequences[i]
		if !slices.Equal(f.Tokens, a.Tokens) {
			t.Fatal("same seed, different output")
		}
		if !slices.Equal(f.Tokens, w.Tokens) || !slices.Equal(f.Scores, w.Scores) {
			t.Errorf("sequence %d: Python %q %v, built in %q %v", i, f.Text, f.Scores, w.Text, w.Scores)
		}
	}
	if first.Sequences[0].Text == plain.Sequences[0].Text {
		t.Fatal("the penalty changed nothing")
	}

	// After a top-k the row is sparse: the plugin answers with biases, still exact.
	topK := func(s string) string {
		return strings.Replace(s, "[[processors]]\n", "[[processors]]\ntype = \"top_k\"\nk = 40\n\n[[processors]]\n", 1)
	}
	pySparse := build(t, pipelineFor(t, dir, "pyrepetition", bin, topK))
	builtinSparse := build(t, pipelineFor(t, dir, "pyrepetition", bin, func(s string) string {
		return topK(strings.Replace(s, `type = "no_repeats"`, fmt.Sprintf("type = \"repetition_penalty\"\npenalty = %s\nlast_n = %s", penalty[1], lastN[1]), 1))
	}))
	got, want := run(t, pySparse, "And God said", edit), run(t, builtinSparse, "And God said", edit)
	for i := range got.Sequences {
		g, w := got.Sequences[i], want.Sequences[i]
		if !slices.Equal(g.Tokens, w.Tokens) || !slices.Equal(g.Scores, w.Scores) {
			t.Errorf("after top_k, sequence %d: Python %q %v, built in %q %v", i, g.Text, g.Scores, w.Text, w.Scores)
		}
	}
	pySparse.Close()
	builtinSparse.Close()
	// The plugin honours go-plugin's Shutdown: closing does not wait for the 2s kill.
	begin := time.Now()
	py.Close()
	if d := time.Since(begin); d > 1500*time.Millisecond {
		t.Errorf("closing the Python plugin took %v", d)
	}
	builtin.Close()
	without.Close()
	noneRunning(t, dir)
}
