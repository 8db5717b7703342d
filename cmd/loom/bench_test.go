package main

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/model/llama"
)

func TestBench(t *testing.T) {
	keep := t.TempDir()
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		want     []string // substrings of stdout
		wantErr  string   // substring of stderr
		wantFile string   // a file that must exist afterwards
	}{
		{"synthetic", []string{"bench", "--synthetic", "tiny", "--type", "f16,q8_0", "-p", "8", "-n", "4", "-r", "2"}, 0,
			[]string{"| tiny F16 ", "| tiny Q8_0 ", "| pp8 ", "| tg4 "}, "", ""},
		{"kept", []string{"bench", "--synthetic", "tinyqwen", "--type", "q4_k_m", "--keep", keep, "-p", "0", "-n", "2", "-r", "1", "--kv", "f32"}, 0,
			[]string{"| tinyqwen Q4_K_M ", "| tg2 ", "| f32 "}, "", filepath.Join(keep, "tinyqwen-q4_k_m.gguf")},
		{"no model", []string{"bench"}, 2, nil, "give model files or --synthetic", ""},
		{"both", []string{"bench", "--synthetic", "tiny", "x.gguf"}, 2, nil, "not both", ""},
		{"bad kv", []string{"bench", "--synthetic", "tiny", "--kv", "q8"}, 2, nil, "want f16, f32 or q8_0", ""},
		{"bad shape", []string{"bench", "--synthetic", "huge"}, 1, nil, "unknown shape", ""},
		{"bad type", []string{"bench", "--synthetic", "tiny", "--type", "q5_k"}, 1, nil, "q5_k", ""},
		{"bad type after a good one", []string{"bench", "--synthetic", "tiny", "--type", "f16,q5_k", "--keep", keep + "/none"}, 1, nil, `--type "q5_k": want one of f32, f16`, ""},
		{"too long", []string{"bench", "--synthetic", "tiny", "-p", "1000", "-n", "0"}, 1, nil, "context length", ""},
		{"missing file", []string{"bench", "/nonexistent/m.gguf"}, 1, nil, "no such file", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			if tc.wantErr != "" && !strings.Contains(stderr, tc.wantErr) {
				t.Errorf("stderr lacks %q:\n%s", tc.wantErr, stderr)
			}
			if tc.wantFile != "" {
				if _, err := os.Stat(tc.wantFile); err != nil {
					t.Error(err)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(keep, "none", "tiny-f16.gguf")); err == nil {
		t.Error("--type f16,q5_k wrote the F16 file before refusing q5_k")
	}
}

func TestBenchFileJSON(t *testing.T) {
	path := fixture(t, "models/stories260K-f32.gguf")
	code, stdout, stderr := runCLI(t, "bench", "--json", "-p", "16", "-n", "8", "-r", "1", path)
	if code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines of JSON, want 2:\n%s", len(lines), stdout)
	}
	for i, line := range lines {
		var r benchResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Model != "stories260K" || r.Type != "F32" || r.TokensPerS <= 0 || len(r.Samples) != 1 || r.Test != []string{"pp16", "tg8"}[i] {
			t.Errorf("result %d: %+v", i, r)
		}
	}
}

func TestBenchStrategy(t *testing.T) {
	code, stdout, stderr := runCLI(t, "bench", "strategy", "--json", "-n", "24", "-r", "2", "../../pipelines/prompt-lookup.toml")
	if code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr)
	}
	var r strategyBench
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	// The cost policy drafts by measured times: on a busy machine it may draft little, and a
	// rejected draft can cost a forward more than plain decoding, so a little over one
	// forward per token is possible.
	if r.Strategy != "prompt_lookup" || len(r.StrategyTokensPerS) != 2 || len(r.GreedyTokensPerS) != 2 || r.Speedup <= 0 ||
		r.ForwardsPerToken <= 0 || r.ForwardsPerToken > 1.25 {
		t.Errorf("result %+v", r)
	}
	// Greedy prompt lookup must not change the output.
	if r.SameAsGreedy != 2 {
		t.Errorf("output the same as greedy's in %d of 2 runs", r.SameAsGreedy)
	}
	steps := 0
	for _, n := range r.DraftK {
		steps += n
	}
	if steps == 0 || steps > 2*24 {
		t.Errorf("draft_k %v counts %d steps for 2 runs of 24 tokens", r.DraftK, steps)
	}

	code, stdout, _ = runCLI(t, "bench", "strategy", "-n", "8", "-r", "1", "../../pipelines/beam.toml")
	if code != 0 || !strings.Contains(stdout, "beam against greedy") || !strings.Contains(stdout, "speed-up") ||
		!strings.Contains(stdout, "the same as greedy's in") {
		t.Errorf("text output (exit %d):\n%s", code, stdout)
	}
	for _, c := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"bench", "strategy"}, "give one pipeline file"},
		{[]string{"bench", "strategy", "-r", "0", "x.toml"}, "must be at least 1"},
		{[]string{"bench", "strategy", "/nonexistent/p.toml"}, "no such file"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code == 0 || !strings.Contains(stderr, c.wantErr) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.wantErr)
		}
	}
}

// TestBenchStrategyModelFlags runs a greedy speculative pipeline with its models given on the
// command line: stories260K in F32 as target, the same weights in F16 as draft, the cost
// policy choosing k. Greedy verification must leave every run's output exactly greedy's.
func TestBenchStrategyModelFlags(t *testing.T) {
	dir := t.TempDir()
	pl := filepath.Join(dir, "spec.toml")
	src := "[model]\nbuiltin = \"default\"\n\n[draft_model]\nbuiltin = \"draft\"\nkv_type = \"f16\"\n\n" +
		"[strategy]\ntype = \"speculative\"\nk = 4\nk_policy = \"cost\"\ngreedy = true\n"
	if err := os.WriteFile(pl, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	models := "../../testdata/models/"
	code, stdout, stderr := runCLI(t, "bench", "strategy", "--json", "-n", "32", "-r", "2", "--prompt", "Once upon a time",
		"--model", models+"stories260K-f32.gguf", "--draft-model", models+"stories260K-f16.gguf", "--no-mmap", pl)
	if code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr)
	}
	var r strategyBench
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if r.Strategy != "speculative" || r.SameAsGreedy != 2 || r.AcceptanceRate < 0.9 {
		t.Errorf("result %+v: want every run the same as greedy's and nearly every draft accepted (the draft is the target in F16)", r)
	}
	code, _, stderr = runCLI(t, "bench", "strategy", "--draft-model", "/nonexistent/d.gguf", pl)
	if code == 0 || !strings.Contains(stderr, "--draft-model") {
		t.Errorf("a missing draft model: exit %d, stderr %q", code, stderr)
	}
}

func TestBenchServe(t *testing.T) {
	code, stdout, stderr := runCLI(t, "bench", "serve", "--concurrency", "1,3", "--requests", "6", "-n", "8", "--prompt-words", "5", "--llama-server", "none", "--json", "--kv", "float32") // reported as f32
	if code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want one per level:\n%s", len(lines), stdout)
	}
	// The requests' lengths spread over 8·(1 ± 0.5) by default.
	wantTokens := 0
	for i := range 6 {
		wantTokens += serveLoad{tokens: 8, vary: 0.5}.tokensOf(i)
	}
	for i, line := range lines {
		var r serveBench
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Engine != "loom" || r.Streams != []int{1, 3}[i] || r.Requests != 6 || r.Errors != 0 || r.Tokens != wantTokens || r.Vary != 0.5 ||
			r.TokensPerS <= 0 || r.TTFTp50Ms <= 0 || r.TTFTp99Ms < r.TTFTp50Ms || r.ITLp99Ms < r.ITLp50Ms || r.ModelFile != "default.gguf" || r.KV != "f32" {
			t.Errorf("level %d: %+v", i, r)
		}
		// Six requests on one or three streams: a window with every stream busy, within the
		// level, holding some of its tokens.
		if r.SteadySeconds <= 0 || r.SteadySeconds >= r.Seconds || r.SteadyTokensPerS <= 0 || r.SteadyTokensPerS*r.SteadySeconds > float64(r.Tokens)+1e-9 {
			t.Errorf("level %d: steady rate %.1f tok/s over %.3f s of %.3f s, %d tokens", i, r.SteadyTokensPerS, r.SteadySeconds, r.Seconds, r.Tokens)
		}
	}
	for _, c := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"bench", "serve", "--concurrency", "0"}, "--concurrency"},
		{[]string{"bench", "serve", "--vary", "1"}, "--vary 1: must be in [0, 1)"},
		{[]string{"bench", "serve", "--prompt-words", "0"}, "--prompt-words 0: must be at least 1"},
		{[]string{"bench", "serve", "--shared-words", "-1"}, "--shared-words -1: must be not negative"},
		{[]string{"bench", "serve", "--kv", "q8"}, `--kv "q8": want f16, f32 or q8_0`},
		{[]string{"bench", "serve", "--rounds", "0"}, "--rounds 0: must be at least 1"},
		{[]string{"serve", "--chunk-tokens", "0"}, "--chunk-tokens 0: must be at least 1"},
		{[]string{"serve", "--batch-window", "-1ms"}, "--batch-window -1ms: must be positive"},
		{[]string{"serve", "--batch-window", "0"}, "--batch-window 0s: must be positive"},
		{[]string{"serve", "--max-running", "0"}, "--max-running 0: must be at least 1"},
		{[]string{"serve", "--max-queue", "-1"}, "--max-queue -1: must be at least 0 (0: no queue"},
		{[]string{"serve", "--max-body-bytes", "0"}, "--max-body-bytes 0: must be at least 1"},
		{[]string{"serve", "--timeout", "-5s"}, "--timeout -5s: must be positive"},
		{[]string{"serve", "--drain-timeout", "0"}, "--drain-timeout 0s: must be positive"},
		{[]string{"serve", "--drain-delay", "-1s"}, "--drain-delay -1s: must not be negative"},
		{[]string{"serve", "--addr", "bad:addr:1"}, "--addr bad:addr:1: listen tcp: address bad:addr:1: too many colons"},
		{[]string{"bench", "serve", "--llama-server", "/nonexistent/llama-server", "--concurrency", "1"}, "--llama-server /nonexistent/llama-server"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code == 0 || !strings.Contains(stderr, c.wantErr) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.wantErr)
		}
	}
}

// TestBenchServeRounds runs two rounds of two levels: four results numbered by round, then
// each level's medians and its rate over the first level's, as the results give them.
func TestBenchServeRounds(t *testing.T) {
	code, stdout, stderr := runCLI(t, "bench", "serve", "--concurrency", "1,2", "--requests", "4", "-n", "6", "--prompt-words", "4", "--llama-server", "none", "--json", "--rounds", "2", "--no-mmap")
	if code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines, want four results and two medians:\n%s", len(lines), stdout)
	}
	var results []serveBench
	for i, line := range lines[:4] {
		var r serveBench
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Round != 1+i/2 || r.Streams != []int{1, 2}[i%2] || r.Errors != 0 || r.TokensPerS <= 0 || !r.NoMmap {
			t.Fatalf("result %d: %+v", i, r)
		}
		results = append(results, r)
	}
	for i, line := range lines[4:] {
		var m serveMedian
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		a, b := results[i], results[2+i]
		ra, rb := a.TokensPerS/results[0].TokensPerS, b.TokensPerS/results[2].TokensPerS
		sa, sb := a.SteadyTokensPerS/results[0].SteadyTokensPerS, b.SteadyTokensPerS/results[2].SteadyTokensPerS
		want := serveMedian{Engine: "loom", Streams: a.Streams, Rounds: 2, TokensPerS: (a.TokensPerS + b.TokensPerS) / 2,
			TTFTp50Ms: (a.TTFTp50Ms + b.TTFTp50Ms) / 2, ITLp50Ms: (a.ITLp50Ms + b.ITLp50Ms) / 2,
			Ratio: (ra + rb) / 2, RatioMin: min(ra, rb), RatioMax: max(ra, rb),
			SteadyTokensPerS: (a.SteadyTokensPerS + b.SteadyTokensPerS) / 2, SteadyRatio: (sa + sb) / 2, SteadyRatioMin: min(sa, sb), SteadyRatioMax: max(sa, sb)}
		if !closeMedian(m, want) {
			t.Errorf("medians at %d streams: %+v, want %+v", a.Streams, m, want)
		}
	}
}

// closeMedian compares two summaries, the floats to within rounding.
func closeMedian(a, b serveMedian) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) <= 1e-9*(1+math.Abs(y)) }
	return a.Engine == b.Engine && a.Streams == b.Streams && a.Rounds == b.Rounds && near(a.TokensPerS, b.TokensPerS) &&
		near(a.TTFTp50Ms, b.TTFTp50Ms) && near(a.ITLp50Ms, b.ITLp50Ms) && near(a.Ratio, b.Ratio) && near(a.RatioMin, b.RatioMin) && near(a.RatioMax, b.RatioMax) &&
		near(a.SteadyTokensPerS, b.SteadyTokensPerS) && near(a.SteadyRatio, b.SteadyRatio) && near(a.SteadyRatioMin, b.SteadyRatioMin) && near(a.SteadyRatioMax, b.SteadyRatioMax)
}

// TestServeMedians checks the summary of rounds: medians of odd and even counts, ratios over
// the same round's first level, and an engine missing from a round (llama-server failing to
// start is an error, so this is the summary's own contract).
func TestServeMedians(t *testing.T) {
	res := func(eng string, round, streams int, tps float64) serveBench {
		steady := tps + 10
		if eng == "llama-server" && round == 2 {
			steady = 0 // no steady window (no more requests than streams)
		}
		return serveBench{Engine: eng, Round: round, Streams: streams, TokensPerS: tps, TTFTp50Ms: tps / 10, ITLp50Ms: 1, SteadyTokensPerS: steady}
	}
	results := []serveBench{
		res("loom", 1, 1, 100), res("llama-server", 1, 1, 50), res("loom", 1, 16, 450), res("llama-server", 1, 16, 100),
		res("loom", 2, 1, 80), res("llama-server", 2, 1, 60), res("loom", 2, 16, 400), res("llama-server", 2, 16, 90),
		res("loom", 3, 1, 120), res("loom", 3, 16, 420),
	}
	got := serveMedians(results, []int{1, 16}, 3)
	// loom's steady rates: 110, 90, 130 at one stream; 460, 410, 430 at 16 (ratios 460/110,
	// 410/90, 430/130); llama-server's round 2 has none.
	want := []serveMedian{
		{Engine: "loom", Streams: 1, Rounds: 3, TokensPerS: 100, TTFTp50Ms: 10, ITLp50Ms: 1, Ratio: 1, RatioMin: 1, RatioMax: 1,
			SteadyTokensPerS: 110, SteadyRatio: 1, SteadyRatioMin: 1, SteadyRatioMax: 1},
		{Engine: "loom", Streams: 16, Rounds: 3, TokensPerS: 420, TTFTp50Ms: 42, ITLp50Ms: 1, Ratio: 4.5, RatioMin: 3.5, RatioMax: 5,
			SteadyTokensPerS: 430, SteadyRatio: 460.0 / 110, SteadyRatioMin: 430.0 / 130, SteadyRatioMax: 410.0 / 90},
		{Engine: "llama-server", Streams: 1, Rounds: 2, TokensPerS: 55, TTFTp50Ms: 5.5, ITLp50Ms: 1, Ratio: 1, RatioMin: 1, RatioMax: 1,
			SteadyTokensPerS: 60, SteadyRatio: 1, SteadyRatioMin: 1, SteadyRatioMax: 1},
		{Engine: "llama-server", Streams: 16, Rounds: 2, TokensPerS: 95, TTFTp50Ms: 9.5, ITLp50Ms: 1, Ratio: 1.75, RatioMin: 1.5, RatioMax: 2,
			SteadyTokensPerS: 110, SteadyRatio: 110.0 / 60, SteadyRatioMin: 110.0 / 60, SteadyRatioMax: 110.0 / 60},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if !closeMedian(got[i], want[i]) {
			t.Errorf("line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestLevelStats checks a level's figures from its requests' timings: two streams, four
// requests (the first stream ending its first request at 30 ms, the second finding none left
// at 50 ms), then the same with an error, and a level with no more requests than streams.
func TestLevelStats(t *testing.T) {
	base := time.Unix(1000, 0)
	at := func(ms ...int) []time.Time {
		var ts []time.Time
		for _, m := range ms {
			ts = append(ts, base.Add(time.Duration(m)*time.Millisecond))
		}
		return ts
	}
	req := func(sent int, tokens ...int) requestTiming {
		a := at(tokens...)
		return requestTiming{sent: at(sent)[0], arrivals: a, ended: a[len(a)-1]}
	}
	four := []requestTiming{req(0, 10, 20, 30), req(0, 15, 25, 35, 45), req(30, 40, 50), req(45, 55, 65, 75)}
	failed := slices.Clone(four)
	failed[3].err = errors.New("HTTP 500: boom")
	for _, c := range []struct {
		name    string
		streams int
		results []requestTiming
		drained int // ms
		want    serveBench
	}{
		{"two streams", 2, four, 50, serveBench{Streams: 2, Requests: 4, Tokens: 12, Seconds: 0.075, TokensPerS: 160,
			SteadySeconds: 0.020, SteadyTokensPerS: 200, // 35, 45, 40, 50 ms in (30, 50]
			TTFTp50Ms: 10, TTFTp99Ms: 15, ITLp50Ms: 10, ITLp99Ms: 10}},
		{"an error", 2, failed, 50, serveBench{Streams: 2, Requests: 4, Tokens: 9, Seconds: 0.075, TokensPerS: 120,
			Errors: 1, FirstError: "HTTP 500: boom", TTFTp50Ms: 10, TTFTp99Ms: 15, ITLp50Ms: 10, ITLp99Ms: 10}},
		{"no more requests than streams", 4, four[:3], 0, serveBench{Streams: 4, Requests: 3, Tokens: 9, Seconds: 0.075, TokensPerS: 120,
			TTFTp50Ms: 10, TTFTp99Ms: 15, ITLp50Ms: 10, ITLp99Ms: 10}},
	} {
		got := levelStats(c.streams, c.results, at(c.drained)[0], 75*time.Millisecond)
		near := func(x, y float64) bool { return math.Abs(x-y) <= 1e-9*(1+math.Abs(y)) }
		if got.Streams != c.want.Streams || got.Requests != c.want.Requests || got.Tokens != c.want.Tokens || got.Errors != c.want.Errors ||
			got.FirstError != c.want.FirstError || !near(got.Seconds, c.want.Seconds) || !near(got.TokensPerS, c.want.TokensPerS) ||
			!near(got.SteadySeconds, c.want.SteadySeconds) || !near(got.SteadyTokensPerS, c.want.SteadyTokensPerS) ||
			got.TTFTp50Ms != c.want.TTFTp50Ms || got.TTFTp99Ms != c.want.TTFTp99Ms || got.ITLp50Ms != c.want.ITLp50Ms || got.ITLp99Ms != c.want.ITLp99Ms {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

// TestServeLoadLengths checks the spread of the requests' lengths: within n·(1 ± vary), with
// a mean near n, and exactly n without spread.
func TestServeLoadLengths(t *testing.T) {
	for _, c := range []struct {
		tokens int
		vary   float64
	}{{64, 0.5}, {8, 0.5}, {100, 0.25}, {64, 0}} {
		l := serveLoad{tokens: c.tokens, vary: c.vary}
		lo, hi := float64(c.tokens)*(1-c.vary), float64(c.tokens)*(1+c.vary)
		sum := 0
		const n = 256
		for i := range n {
			k := l.tokensOf(i)
			if float64(k) < math.Floor(lo) || float64(k) > math.Ceil(hi) || k > l.maxTokens() {
				t.Errorf("%+v: request %d asks for %d tokens, outside [%g, %g]", c, i, k, lo, hi)
			}
			sum += k
		}
		if mean := float64(sum) / n; math.Abs(mean-float64(c.tokens)) > 0.02*float64(c.tokens)+0.5 {
			t.Errorf("%+v: mean length %.2f", c, mean)
		}
	}
}

// TestBenchVersusLlamaBench runs `loom bench --llama-bench` with a stand-in for llama-bench
// that prints a real llama-bench run's JSON lines (testdata/llama-bench.jsonl: llama.cpp
// c392e509's llama-bench -p 16 -n 8 -r 1 -t 2 -o jsonl on the tiny Q8_0 synthetic model,
// 1 158.8 and 327.4 tokens/s), since the test cannot count on llama.cpp being installed: the
// rounds alternate, the medians and ratios are printed, the KV cache type is passed on (with
// flash attention for Q8_0), and a llama-bench that fails or prints no result is an error
// naming it.
func TestBenchVersusLlamaBench(t *testing.T) {
	rec, err := filepath.Abs("testdata/llama-bench.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	fake := filepath.Join(dir, "llama-bench")
	script := "#!/bin/sh\necho \"$@\" >> " + calls + "\ncat " + rec + "\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var want []struct {
		NPrompt int     `json:"n_prompt"`
		NGen    int     `json:"n_gen"`
		AvgTS   float64 `json:"avg_ts"`
	}
	b, _ := os.ReadFile(rec)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var w struct {
			NPrompt int     `json:"n_prompt"`
			NGen    int     `json:"n_gen"`
			AvgTS   float64 `json:"avg_ts"`
		}
		if err := json.Unmarshal([]byte(line), &w); err != nil {
			t.Fatal(err)
		}
		want = append(want, w)
	}
	code, stdout, stderr := runCLI(t, "bench", "--synthetic", "tiny", "--type", "q8_0", "-p", "16", "-n", "8", "--alternate", "3", "--llama-bench", fake, "--json")
	if code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr)
	}
	var rows []versusResult
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r versusResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		rows = append(rows, r)
	}
	if len(rows) != 2 || rows[0].Test != "pp16" || rows[1].Test != "tg8" {
		t.Fatalf("rows %+v", rows)
	}
	for i, r := range rows {
		if len(r.Loom) != 3 || len(r.LlamaCpp) != 3 || r.LlamaMed != want[i].AvgTS || r.LoomMedian <= 0 || r.Ratio != r.LoomMedian/r.LlamaMed {
			t.Errorf("%s: %+v (llama-bench recorded %v tok/s)", r.Test, r, want[i].AvgTS)
		}
	}
	c, _ := os.ReadFile(calls)
	if n := strings.Count(string(c), "\n"); n != 3 || !strings.Contains(string(c), "-p 16 -n 8 -t ") || !strings.Contains(string(c), "-ctk f16") {
		t.Errorf("llama-bench called %d times with:\n%s", n, c)
	}
	// A Q8_0 cache on both sides: llama-bench needs flash attention for it.
	os.Remove(calls)
	code, _, stderr = runCLI(t, "bench", "--synthetic", "tiny", "--type", "q8_0", "-p", "16", "-n", "8", "--alternate", "1", "--kv", "q8_0", "--llama-bench", fake)
	c, _ = os.ReadFile(calls)
	if code != 0 || !strings.Contains(string(c), "-ctk q8_0 -ctv q8_0") || !strings.Contains(string(c), "-fa 1") {
		t.Errorf("--kv q8_0: exit code %d (%s); llama-bench called with:\n%s", code, stderr, c)
	}
	// Both engines read the file into memory with --no-mmap.
	os.Remove(calls)
	code, _, stderr = runCLI(t, "bench", "--synthetic", "tiny", "--type", "f32", "-p", "16", "-n", "8", "--alternate", "1", "--no-mmap", "--llama-bench", fake)
	c, _ = os.ReadFile(calls)
	if code != 0 || !strings.HasSuffix(strings.TrimSpace(string(c)), "-mmp 0") {
		t.Errorf("--no-mmap: exit code %d (%s); llama-bench called with:\n%s", code, stderr, c)
	}

	bad := filepath.Join(dir, "broken-bench")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\necho nothing useful\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "bench", "--synthetic", "tiny", "--type", "q8_0", "-p", "16", "-n", "8", "--alternate", "1", "--llama-bench", bad)
	if code != 1 || !strings.Contains(stderr, "broken-bench") || !strings.Contains(stderr, "no pp16/tg8 result") {
		t.Errorf("exit code %d, stderr %q: want an error naming the llama-bench and the missing results", code, stderr)
	}
	code, _, stderr = runCLI(t, "bench", "--synthetic", "tiny", "--type", "q8_0", "--llama-bench", "/nonexistent/llama-bench", "--alternate", "1", "-p", "8", "-n", "2")
	if code != 1 || !strings.Contains(stderr, "/nonexistent/llama-bench") {
		t.Errorf("exit code %d, stderr %q: want an error naming the missing llama-bench", code, stderr)
	}
}

// TestBenchServeSharedPrompt runs a level whose prompts start with one system prompt: every
// request answered, the level reporting it; the prompts share exactly that prefix.
func TestBenchServeSharedPrompt(t *testing.T) {
	a, b := serveBenchPrompt(1, 4, 30), serveBenchPrompt(2, 4, 30)
	sys, _, _ := strings.Cut(a, "\n")
	if !strings.HasPrefix(b, sys+"\n") || len(strings.Fields(sys)) != 31 || a == b || serveBenchPrompt(1, 4, 0) != strings.TrimPrefix(a, sys+"\n") {
		t.Errorf("prompts %q and %q: want a 30-word system prompt line before each request's own words", a, b)
	}
	code, stdout, stderr := runCLI(t, "bench", "serve", "--concurrency", "2", "--requests", "4", "-n", "4", "--prompt-words", "3", "--shared-words", "40", "--llama-server", "none", "--json")
	if code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr)
	}
	var r serveBench
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &r); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if r.SharedWords != 40 || r.Errors != 0 || r.Requests != 4 || r.TokensPerS <= 0 {
		t.Errorf("result %+v", r)
	}
}

// TestLoomKVBudget checks that the KV budget bench serve gives loom holds each stream's slot,
// as llama-server's context does, and not a block of slots more.
func TestLoomKVBudget(t *testing.T) {
	for _, load := range []serveLoad{
		{streams: 1, words: 5, tokens: 8, vary: 0.5, kv: "f32"},
		{streams: 16, words: 8, tokens: 128, vary: 0.5, kv: "q8_0"},
		{streams: 64, words: 32, shared: 50, tokens: 64, vary: 0.5, kv: "f16"},
	} {
		blocks, err := kvBlocksOf("../../models/default.gguf", load.kv)
		if err != nil {
			t.Fatal(err)
		}
		mb := loomKVBudgetMB(blocks, load)
		kv, _ := cache.ParseDType(load.kv)
		m, err := llama.Open("../../models/default.gguf", llama.Options{KVType: kv, KVBudget: int64(mb) << 20, NoPrefetch: true})
		if err != nil {
			t.Fatal(err)
		}
		st, bs := m.Cache().Stats(), m.Cache().Config().BlockSize
		m.Close()
		need := load.streams * ((load.perSlot() + bs - 1) / bs)
		if st.MaxBlocks < need || int64(st.MaxBlocks-need)*st.BlockBytes >= 1<<20 {
			t.Errorf("%+v: %d MiB hold %d blocks, want %d and less than a MiB more", load, mb, st.MaxBlocks, need)
		}
	}
}
