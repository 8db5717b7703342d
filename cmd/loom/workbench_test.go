package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
)

// The pipelines the browser test edits.
const (
	wbBad = `[model]
builtin = "default"

[strategy]
type = "sample"

[[processors]]
type = "top_p"
p = 1.5
`
	wbCompare = `[model]
builtin = "default"

[strategy]
type = "greedy"

[[processors]]
type = "repetition_penalty"
penalty = %P%
`
	wbHeavy = `[model]
builtin = "default"

[generation]
ignore_eos = true

[strategy]
type = "sample"

[[processors]]
type = "repetition_penalty"
penalty = 1.1

[[processors]]
type = "temperature"
t = 0.9

[[processors]]
type = "top_k"
k = 40

[[processors]]
type = "top_p"
p = 0.95

[[processors]]
type = "min_p"
p = 0.02

[[processors]]
type = "typical_p"
p = 0.98
`
)

// wbReport is what testdata/browser/workbench.mjs prints.
type wbReport struct {
	Failure    string
	Console    []string
	Pipelines  []string
	Parts      []string
	TopPParams []string
	Errors     []struct {
		Line int
		Text string
	}
	GutterErrors []int
	FixedStatus  string
	Sample       struct {
		Ms, Frames     int
		DistinctCounts int
		Rows           []int
		Text           []string
		Step           wbStep
		AfterArrow     string
		Entropy, Rank  string
		// Prompt is the prompt's tokens as the page shows them.
		Prompt []struct {
			Text, Logprob, Title string
			Coloured             bool
		}
	}
	Exported       json.RawMessage
	Reopened       []int
	ReopenedPrompt []string
	Beam           struct {
		Rows         []string
		Kept, Pruned int
		Title        string
	}
	Speculative struct {
		Acceptance                    float64
		Accepted, Corrected, Rejected int
		Text                          string
	}
	Compare struct {
		Diverge int
		Banner  string
		Marked  []string
	}
	Plugin struct{ Step wbStep }
	Heavy  struct {
		Ms, Tokens, DistinctCounts, Frames int
		LongTasks                          []float64
	}
}

type wbStep struct {
	Chosen, Logprob, Score string
	Stages                 []struct {
		Processor string
		Kept      int
		Top       []struct {
			ID     int
			Value  float64
			Chosen bool
		}
	}
}

// cliRun runs `loom run --json` with every detail the workbench records and decodes it.
func cliRun(t *testing.T, pipelineFile, prompt string, seed, maxTokens, trace int) *core.Result {
	t.Helper()
	code, out, errOut := loom(t, "run", "--json", "--logprobs", "--top-logprobs", "5", "--lineage", "--prompt-logprobs",
		"--trace", strconv.Itoa(trace), "--seed", strconv.Itoa(seed), "--prompt", prompt,
		"--max-new-tokens", strconv.Itoa(maxTokens), pipelineFile)
	if code != 0 {
		t.Fatalf("loom run %s: exit %d: %s", pipelineFile, code, errOut)
	}
	var res core.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("loom run --json: %v\n%s", err, out)
	}
	return &res
}

// artifactsDir is where browser tests leave their screenshots: $LOOM_ARTIFACTS, or .artifacts/
// at the repository root (ignored by git).
func artifactsDir(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("LOOM_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", ".artifacts")
	}
	dir = filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// TestWorkbenchInBrowser loads the workbench page of `loom serve` in Debian's Chromium (driven
// by playwright-core from the committed lockfile) and checks what it shows against `loom run`:
// a line-precise pipeline error and its fix, a streamed sampling run and one step's processor
// view, the keyboard, the colour modes, export and re-open, a beam tree, a speculative run's
// drafts, a comparison of two pipelines and a 200-token run with six processors.
func TestWorkbenchInBrowser(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required (playwright-core drives the browser from it): ", err)
	}
	browser := "/usr/bin/chromium"
	if p, err := exec.LookPath("chromium"); err == nil {
		browser = p
	}
	if _, err := os.Stat(browser); err != nil {
		t.Fatal("Debian's chromium is required for the workbench test (scripts/test.sh installs it): ", err)
	}
	dir := filepath.Join("testdata", "browser")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Fatal("npm is required to install playwright-core from testdata/browser/package-lock.json: ", err)
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	artifacts := artifactsDir(t, "workbench")

	tmp := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fixed := strings.Replace(wbBad, "p = 1.5", "p = 0.9", 1)
	compareA := strings.Replace(wbCompare, "%P%", "1.0", 1)
	compareB := strings.Replace(wbCompare, "%P%", "1.2", 1)
	type runCase struct {
		Pipeline  string `json:"pipeline"`
		Prompt    string `json:"prompt"`
		Seed      int    `json:"seed"`
		MaxTokens int    `json:"maxTokens"`
		Trace     int    `json:"trace"`
		Seq       int    `json:"seq"`
		Step      int    `json:"step"`
	}
	cases := map[string]any{
		"bad":         wbBad,
		"fixed":       fixed,
		"sample":      runCase{Pipeline: "creative", Prompt: "And God said", Seed: 7, MaxTokens: 40, Trace: 10, Seq: 1, Step: 3},
		"beam":        runCase{Pipeline: "beam", Prompt: "And God said", Seed: 1, MaxTokens: 12, Trace: 5},
		"speculative": runCase{Pipeline: "speculative", Prompt: "And God said unto Moses", Seed: 3, MaxTokens: 48, Trace: 5},
		"compare":     map[string]any{"a": compareA, "b": compareB, "prompt": "The whale", "seed": 11, "maxTokens": 40, "trace": 5},
		"plugin":      runCase{Pipeline: "banwords", Prompt: "the cat sat on the mat", Seed: 4, MaxTokens: 10, Trace: 5, Step: 2},
		"heavy":       map[string]any{"pipeline": wbHeavy, "prompt": "And it came to pass", "seed": 5, "maxTokens": 200, "trace": 10},
	}
	input, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}

	// The server loads the example pipelines and one whose processor is a plugin.
	pluginPipeline, _ := banwordsPipeline(t, "")
	src, err := os.ReadFile(pluginPipeline)
	if err != nil {
		t.Fatal(err)
	}
	banwords := filepath.Join(filepath.Dir(pluginPipeline), "banwords.toml")
	if err := os.WriteFile(banwords, src, 0o644); err != nil {
		t.Fatal(err)
	}
	url, done := startServe(t, banwords, "../../pipelines/default.toml", "../../pipelines/creative.toml",
		"../../pipelines/beam.toml", "../../pipelines/speculative.toml")
	defer func() {
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
			t.Error(err)
		}
		<-done
	}()
	// The plugin pipeline, edited or not, validates: its parts are served by the running plugin.
	vbody, _ := json.Marshal(map[string]string{"pipeline": string(src)})
	resp, err := http.Post(url+"/loom/validate", "application/json", bytes.NewReader(vbody))
	if err != nil {
		t.Fatal(err)
	}
	vres, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(vres, []byte(`"ok":true`)) {
		t.Fatalf("validating the plugin pipeline's source: %s", vres)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "workbench.mjs", url, browser, artifacts)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node workbench.mjs: %v\n%s", err, stderr.String())
	}
	var got wbReport
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	t.Logf("screenshots in %s", artifacts)
	if got.Failure != "" {
		t.Fatalf("in the browser: %s (see %s/failure.png)", got.Failure, artifacts)
	}
	if len(got.Console) > 0 {
		t.Errorf("the page logged errors: %q", got.Console)
	}

	// The pickers list the loaded pipelines and every registered part.
	for _, name := range []string{"beam", "creative", "default", "speculative"} {
		if !slices.Contains(got.Pipelines, name) {
			t.Errorf("pipeline picker lacks %s: %v", name, got.Pipelines)
		}
	}
	for _, k := range []pipeline.Kind{pipeline.Processor, pipeline.Stopping, pipeline.Strategy} {
		for _, p := range pipeline.Builtins().Parts(k) {
			if !slices.Contains(got.Parts, p.Type) {
				t.Errorf("parts list lacks %s %s", k, p.Type)
			}
		}
	}
	if len(got.TopPParams) == 0 || !strings.HasPrefix(got.TopPParams[0], "p") {
		t.Errorf("top_p's parameters shown as %q", got.TopPParams)
	}

	// The error is shown at its line, with loom validate's message.
	code, _, valErr := loom(t, "validate", write("bad.toml", wbBad))
	if code == 0 || len(got.Errors) != 1 || got.Errors[0].Line != 9 || !slices.Equal(got.GutterErrors, []int{9}) {
		t.Fatalf("errors %+v (gutter %v); loom validate (exit %d): %s", got.Errors, got.GutterErrors, code, valErr)
	}
	wantMsg := strings.TrimSpace(valErr[strings.Index(valErr, ":9: ")+4:])
	if got.Errors[0].Text != "line 9: "+wantMsg {
		t.Errorf("page error %q, loom validate %q", got.Errors[0].Text, wantMsg)
	}
	if got.FixedStatus != "valid" {
		t.Errorf("after the fix the status reads %q", got.FixedStatus)
	}

	// The sampling run: streamed, two rows, and a step's numbers equal loom run's trace.
	sample := cliRun(t, "../../pipelines/creative.toml", "And God said", 7, 40, 10)
	if len(got.Sample.Rows) != 2 || got.Sample.Rows[0] != len(sample.Sequences[0].Tokens) || got.Sample.Rows[1] != len(sample.Sequences[1].Tokens) {
		t.Fatalf("rows of %v tokens; loom run: %d and %d", got.Sample.Rows, len(sample.Sequences[0].Tokens), len(sample.Sequences[1].Tokens))
	}
	// The prompt's tokens, each coloured by its log-probability as loom run --prompt-logprobs
	// gives it (the first, which nothing predicts, not coloured).
	if len(got.Sample.Prompt) != len(sample.PromptTokens) || len(sample.PromptLogprobs) != len(sample.PromptTokens) {
		t.Fatalf("the page shows %d prompt tokens; loom run: %d tokens, %d log-probabilities", len(got.Sample.Prompt), len(sample.PromptTokens), len(sample.PromptLogprobs))
	}
	for i, p := range got.Sample.Prompt {
		lp, err := strconv.ParseFloat(p.Logprob, 32)
		switch {
		case i == 0 && (p.Logprob != "" || p.Coloured || !strings.Contains(p.Title, "nothing predicts it")):
			t.Errorf("first prompt token %+v: want no colour and a title saying nothing predicts it", p)
		case i > 0 && (err != nil || float32(lp) != sample.PromptLogprobs[i] || !p.Coloured || !strings.Contains(p.Title, "likeliest: ")):
			t.Errorf("prompt token %d %+v: loom run's log-probability %v, and a colour and the likeliest tokens wanted", i, p, sample.PromptLogprobs[i])
		}
	}

	// Streaming is checked on the heavy run below, not here: the page renders once an
	// animation frame, and this run's 80 tokens of the embedded model arrive within a frame or
	// two (about 20 ms) after frames spent on the request and the other view, so that it may
	// show them in two renderings however they are streamed.
	t.Logf("sampling run: %d ms, tokens rendered in %d distinct frames of %d", got.Sample.Ms, got.Sample.DistinctCounts, got.Sample.Frames)
	checkStep(t, got.Sample.Step, sample.Sequences[1], 3)
	if got.Sample.AfterArrow == "" || !strings.HasPrefix(got.Sample.AfterArrow, "4/") || !strings.Contains(got.Sample.AfterArrow, "step 4") {
		t.Errorf("after → the focus and panel show %q, want step 4", got.Sample.AfterArrow)
	}
	if !strings.Contains(got.Sample.Entropy, "entropy") || !strings.Contains(got.Sample.Rank, "rank") {
		t.Errorf("colour modes: entropy title %q, rank title %q", got.Sample.Entropy, got.Sample.Rank)
	}

	// The exported run is loom run's JSON (timings apart), and it opens again.
	var exported core.Result
	if err := json.Unmarshal(got.Exported, &exported); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(exported.Sequences, sample.Sequences) || !reflect.DeepEqual(exported.Lineage, sample.Lineage) ||
		exported.Seed != sample.Seed || !reflect.DeepEqual(exported.Stats, sample.Stats) || !slices.Equal(exported.PromptTokens, sample.PromptTokens) {
		t.Errorf("the exported run differs from loom run --json --trace 10 --logprobs --top-logprobs 5 --lineage")
	}
	if !slices.Equal(got.Reopened, got.Sample.Rows) {
		t.Errorf("the re-opened run shows rows of %v tokens, the run %v", got.Reopened, got.Sample.Rows)
	}
	var shownPrompt []string
	for _, p := range got.Sample.Prompt {
		shownPrompt = append(shownPrompt, p.Text)
	}
	if len(shownPrompt) == 0 || !slices.Equal(got.ReopenedPrompt, shownPrompt) {
		t.Errorf("the re-opened run shows the prompt as %q, the run as %q", got.ReopenedPrompt, shownPrompt)
	}

	// The beam tree.
	beam := cliRun(t, "../../pipelines/beam.toml", "And God said", 1, 12, 5)
	var beamRows []string
	for _, sq := range beam.Sequences {
		var b strings.Builder
		for _, st := range sq.Trace {
			b.WriteString(st.Text)
		}
		beamRows = append(beamRows, b.String())
	}
	if !slices.Equal(got.Beam.Rows, beamRows) {
		t.Errorf("beam rows %q, loom run %q", got.Beam.Rows, beamRows)
	}
	if got.Beam.Kept == 0 || got.Beam.Pruned == 0 || !strings.Contains(got.Beam.Title, "2 returned") {
		t.Errorf("beam tree: %d kept nodes, %d pruned, title %q", got.Beam.Kept, got.Beam.Pruned, got.Beam.Title)
	}

	// The speculative run's drafts.
	spec := cliRun(t, "../../pipelines/speculative.toml", "And God said unto Moses", 3, 48, 5)
	if got.Speculative.Acceptance != spec.Stats.AcceptanceRate || got.Speculative.Accepted != spec.Stats.Accepted {
		t.Errorf("speculative: acceptance %v with %d accepted tokens marked; loom run %+v", got.Speculative.Acceptance, got.Speculative.Accepted, spec.Stats)
	}
	if got.Speculative.Corrected == 0 || got.Speculative.Rejected == 0 || got.Speculative.Corrected != got.Speculative.Rejected {
		t.Errorf("speculative: %d corrections and %d rejected drafts marked", got.Speculative.Corrected, got.Speculative.Rejected)
	}

	// The comparison marks the first step where the two differ.
	ra := cliRun(t, write("a.toml", compareA), "The whale", 11, 40, 5)
	rb := cliRun(t, write("b.toml", compareB), "The whale", 11, 40, 5)
	ta, tb := ra.Sequences[0].Tokens, rb.Sequences[0].Tokens
	k := 0
	for k < len(ta) && k < len(tb) && ta[k] == tb[k] {
		k++
	}
	if k == 0 || k == len(ta) {
		t.Fatalf("the compared pipelines differ at step %d of %d: choose settings that agree for a while", k, len(ta))
	}
	if got.Compare.Diverge != k || !slices.Equal(got.Compare.Marked, []string{strconv.Itoa(k), strconv.Itoa(k)}) {
		t.Errorf("compare: divergence at %d, marked %v (%q); loom run: %d", got.Compare.Diverge, got.Compare.Marked, got.Compare.Banner, k)
	}

	// The plugin's processor is traced like a built-in.
	plugin := cliRun(t, banwords, "the cat sat on the mat", 4, 10, 5)
	checkStep(t, got.Plugin.Step, plugin.Sequences[0], 2)
	if !slices.Contains(got.Parts, "no_pets") {
		t.Errorf("the parts list lacks the plugin's processor no_pets")
	}
	if n := len(got.Plugin.Step.Stages); n < 2 || got.Plugin.Step.Stages[1].Processor != "no_pets" {
		t.Errorf("plugin run stages %+v", got.Plugin.Step.Stages)
	}

	// 200 tokens with six processors traced stream without falling behind.
	maxLong := 0.0
	for _, d := range got.Heavy.LongTasks {
		maxLong = max(maxLong, d)
	}
	t.Logf("200 tokens, 6 processors, trace 10: %d ms, rendered in %d distinct frames of %d, longest main-thread task %.0f ms",
		got.Heavy.Ms, got.Heavy.DistinctCounts, got.Heavy.Frames, maxLong)
	if got.Heavy.Tokens != 200 || got.Heavy.DistinctCounts < 5 || maxLong > 250 {
		t.Errorf("heavy run: %d tokens shown over %d renderings, longest task %.0f ms", got.Heavy.Tokens, got.Heavy.DistinctCounts, maxLong)
	}
}

// checkStep compares the step panel's numbers with step k of a sequence of `loom run --json`.
func checkStep(t *testing.T, shown wbStep, sq core.SequenceResult, k int) {
	t.Helper()
	tr := sq.Trace[k]
	checkNum := func(what, text string, want float32) {
		v, err := strconv.ParseFloat(text, 64)
		if err != nil || math.Abs(v-float64(want)) > 0.0005+1e-9 {
			t.Errorf("step %d: %s shown %q, loom run %.5f", k, what, text, want)
		}
	}
	checkNum("raw logprob", shown.Logprob, sq.Logprobs[k])
	checkNum("final score", shown.Score, sq.Scores[k])
	if !strings.Contains(shown.Chosen, "id "+strconv.Itoa(int(tr.Chosen))) {
		t.Errorf("step %d: chosen shown %q, loom run %d %q", k, shown.Chosen, tr.Chosen, tr.Text)
	}
	if len(shown.Stages) != len(tr.Stages) {
		t.Fatalf("step %d: %d stages shown, loom run traced %d", k, len(shown.Stages), len(tr.Stages))
	}
	for i, st := range tr.Stages {
		s := shown.Stages[i]
		if s.Processor != st.Processor || s.Kept != st.Kept || len(s.Top) != len(st.Top) {
			t.Fatalf("step %d: stage %d shown %+v, loom run %+v", k, i, s, st)
		}
		for j, tp := range st.Top {
			b := s.Top[j]
			if b.ID != int(tp.ID) || float32(b.Value) != tp.Value || b.Chosen != (tp.ID == tr.Chosen) {
				t.Errorf("step %d: stage %s bar %d shown %+v, loom run %+v", k, st.Processor, j, b, tp)
			}
		}
	}
}

// TestWorkbenchDocServe runs the `loom serve` command of docs/workbench.md (on a free port) and
// checks that the page is at / on its default address's path.
func TestWorkbenchDocServe(t *testing.T) {
	doc, err := os.ReadFile("../../docs/workbench.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "http://127.0.0.1:8080/") {
		t.Error("docs/workbench.md does not say where the page is")
	}
	n := 0
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "loom serve") {
			continue
		}
		n++
		url, done := startServe(t, strings.Fields(line)[2:]...)
		resp, err := http.Get(url + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<title>loom workbench</title>") {
			t.Errorf("%s: GET / answered %d %.200s", line, resp.StatusCode, body)
		}
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n != 1 {
		t.Errorf("docs/workbench.md has %d loom serve commands, want 1", n)
	}
}
