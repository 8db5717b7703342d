package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/gguf"
	_ "github.com/loomlm/loom/models" // the embedded models
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// examples are the example pipelines the tests serve.
var examples = []string{"default", "greedy", "creative"}

func examplePath(name string) string { return filepath.Join("..", "pipelines", name+".toml") }

// newServer serves the example pipelines on loopback.
func newServer(t *testing.T, opts server.Options) (*server.Server, *httptest.Server) {
	t.Helper()
	s := server.New(opts)
	for _, n := range examples {
		if err := s.Load(examplePath(n)); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.Close()
		s.Close()
	})
	return s, hs
}

// serve serves the pipeline files on loopback.
func serve(t *testing.T, paths ...string) (*server.Server, *httptest.Server) {
	t.Helper()
	s := server.New(server.Options{})
	t.Cleanup(func() { s.Close() })
	for _, p := range paths {
		if err := s.Load(p); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs
}

// controlVocab is the embedded model's vocabulary metadata with some of its last merged
// tokens (ids 4090 to 4094) become control tokens of the given texts, the merges from the
// lowest of them on dropped, so that no text makes them.
func controlVocab(t *testing.T, control map[int]string) map[string]any {
	t.Helper()
	src, err := gguf.Open("../models/default.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	pieces, _ := src.Value("tokenizer.ggml.tokens")
	types, _ := src.Value("tokenizer.ggml.token_type")
	merges, _ := src.Value("tokenizer.ggml.merges")
	p, ty, m := slices.Clone(pieces.([]string)), slices.Clone(types.([]int32)), merges.([]string)
	lowest := len(p)
	for id, text := range control {
		if id < len(p)-6 || id >= len(p)-1 {
			t.Fatalf("token %d is not among the last merged ones", id)
		}
		p[id], ty[id] = text, 3 // control
		lowest = min(lowest, id)
	}
	// the last len(p)-1-lowest merges made tokens lowest…len(p)-2
	return map[string]any{"tokenizer.ggml.tokens": p, "tokenizer.ggml.token_type": ty, "tokenizer.ggml.merges": m[:len(m)-(len(p)-1-lowest)]}
}

func client(hs *httptest.Server) openai.Client {
	return openai.NewClient(option.WithBaseURL(hs.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

// direct runs a request the way `loom run` does: the pipeline file with flag overrides, a seed
// and a length.
func direct(t *testing.T, name, prompt string, o pipeline.Overrides, seed uint64, maxNew int) *core.Result {
	t.Helper()
	b, err := pipeline.LoadAndBuild(examplePath(name), pipeline.Options{Overrides: o})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	req := b.Request(prompt)
	req.Seed, req.MaxNewTokens = core.SeedOf(seed), maxNew
	res, err := core.Generate(context.Background(), b.Pipeline, req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func ptr[T any](v T) *T { return &v }

func TestModelsHealthReady(t *testing.T) {
	s, hs := newServer(t, server.Options{})
	c := client(hs)
	page, err := c.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if got, want := strings.Join(ids, ","), "creative,default,greedy"; got != want {
		t.Errorf("models %s, want %s", got, want)
	}
	for _, tc := range []struct {
		path string
		want int
	}{{"/health", 200}, {"/ready", 200}} {
		if code := get(t, hs.URL+tc.path); code != tc.want {
			t.Errorf("GET %s: %d, want %d", tc.path, code, tc.want)
		}
	}
	s.Drain()
	if code := get(t, hs.URL+"/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("GET /ready while draining: %d, want 503", code)
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestCompletionEqualsRun checks that a completion with a seed and a temperature is exactly
// what `loom run --temperature` gives, streamed or not, with the right usage.
func TestCompletionEqualsRun(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	c := client(hs)
	const prompt = "And God said"
	want := direct(t, "default", prompt, pipeline.Overrides{Temperature: ptr(1.2), TopP: ptr(0.9)}, 7, 24)
	params := openai.CompletionNewParams{
		Model:  "default",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		Seed:   openai.Int(7), MaxTokens: openai.Int(24), Temperature: openai.Float(1.2), TopP: openai.Float(0.9),
	}
	got, err := c.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Text != want.Sequences[0].Text {
		t.Errorf("completion %q, loom run %q", got.Choices[0].Text, want.Sequences[0].Text)
	}
	if got.Usage.PromptTokens != int64(len(want.PromptTokens)) || got.Usage.CompletionTokens != int64(want.GeneratedTokens) ||
		got.Usage.TotalTokens != got.Usage.PromptTokens+got.Usage.CompletionTokens {
		t.Errorf("usage %+v, want %d prompt and %d generated tokens", got.Usage, len(want.PromptTokens), want.GeneratedTokens)
	}
	if fr, wantFR := string(got.Choices[0].FinishReason), map[core.FinishReason]string{core.FinishLength: "length"}[want.Sequences[0].FinishReason]; wantFR != "" && fr != wantFR {
		t.Errorf("finish_reason %q, want %q", fr, wantFR)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Completions.NewStreaming(context.Background(), params)
	var text strings.Builder
	var usage openai.CompletionUsage
	chunks := 0
	for stream.Next() {
		ch := stream.Current()
		chunks++
		for _, choice := range ch.Choices {
			text.WriteString(choice.Text)
		}
		if ch.Usage.TotalTokens > 0 {
			usage = ch.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != want.Sequences[0].Text || chunks < 3 {
		t.Errorf("streamed %q in %d chunks, want %q", text.String(), chunks, want.Sequences[0].Text)
	}
	if usage.CompletionTokens != int64(want.GeneratedTokens) {
		t.Errorf("streamed usage %+v, want %d generated tokens", usage, want.GeneratedTokens)
	}
}

// TestNAndLogprobs checks n > 1 against a direct run with n, and the logprobs fields.
func TestNAndLogprobs(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	c := client(hs)
	const prompt = "In the beginning"
	want := direct(t, "creative", prompt, pipeline.Overrides{N: ptr(3)}, 11, 16)
	got, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model: "creative", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		Seed: openai.Int(11), MaxTokens: openai.Int(16), N: openai.Int(3), Logprobs: openai.Int(2),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 3 {
		t.Fatalf("%d choices, want 3", len(got.Choices))
	}
	for i, ch := range got.Choices {
		if ch.Index != int64(i) || ch.Text != want.Sequences[i].Text {
			t.Errorf("choice %d (index %d) %q, want %q", i, ch.Index, ch.Text, want.Sequences[i].Text)
		}
		lp := ch.Logprobs
		if len(lp.Tokens) != len(want.Sequences[i].Tokens) || len(lp.TokenLogprobs) != len(lp.Tokens) || len(lp.TopLogprobs) != len(lp.Tokens) {
			t.Fatalf("choice %d logprobs: %d tokens, %d logprobs, %d tops; want %d each", i, len(lp.Tokens), len(lp.TokenLogprobs), len(lp.TopLogprobs), len(want.Sequences[i].Tokens))
		}
		for k, v := range lp.TokenLogprobs {
			if v > 0 || len(lp.TopLogprobs[k]) == 0 || len(lp.TopLogprobs[k]) > 2 {
				t.Errorf("choice %d token %d: logprob %v, top %v", i, k, v, lp.TopLogprobs[k])
			}
		}
	}

	chat, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "greedy", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Who made light?")},
		MaxCompletionTokens: openai.Int(8), Logprobs: openai.Bool(true), TopLogprobs: openai.Int(3),
	})
	if err != nil {
		t.Fatal(err)
	}
	content := chat.Choices[0].Logprobs.Content
	if len(content) == 0 || int64(len(content)) != chat.Usage.CompletionTokens {
		t.Fatalf("%d logprob entries for %d tokens", len(content), chat.Usage.CompletionTokens)
	}
	for _, e := range content {
		// Greedy: the chosen token is the most likely one.
		if len(e.TopLogprobs) != 3 || e.TopLogprobs[0].Token != e.Token || math.Abs(e.TopLogprobs[0].Logprob-e.Logprob) > 1e-5 {
			t.Errorf("token %q (%v): the chosen token should lead its top 3, got %d: %q %v", e.Token, e.Logprob, len(e.TopLogprobs), e.TopLogprobs[0].Token, e.TopLogprobs[0].Logprob)
		}
	}
}

// TestChatAndStop checks chat against a completion of the plain template, streaming chat, and
// stop strings.
func TestChatAndStop(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	c := client(hs)
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Speak plainly."), openai.UserMessage("Tell me of the sea.")}
	chat, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "default", Messages: msgs, Seed: openai.Int(3), MaxTokens: openai.Int(20)})
	if err != nil {
		t.Fatal(err)
	}
	rendered := server.PlainChatTemplate([]string{"system", "user"}, []string{"Speak plainly.", "Tell me of the sea."})
	comp, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "default", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(rendered)},
		Seed: openai.Int(3), MaxTokens: openai.Int(20), Stop: openai.CompletionNewParamsStopUnion{OfStringArray: server.PlainChatStops}})
	if err != nil {
		t.Fatal(err)
	}
	if chat.Choices[0].Message.Content != comp.Choices[0].Text || chat.Choices[0].Message.Role != "assistant" {
		t.Errorf("chat %q (%s), completion of the template %q", chat.Choices[0].Message.Content, chat.Choices[0].Message.Role, comp.Choices[0].Text)
	}

	stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "default", Messages: msgs, Seed: openai.Int(3), MaxTokens: openai.Int(20)})
	var text strings.Builder
	var finish string
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			text.WriteString(ch.Delta.Content)
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != chat.Choices[0].Message.Content || finish != string(chat.Choices[0].FinishReason) {
		t.Errorf("streamed chat %q (%s), want %q (%s)", text.String(), finish, chat.Choices[0].Message.Content, chat.Choices[0].FinishReason)
	}

	// A stop string taken from the middle of a greedy output cuts it there.
	full, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "greedy", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The sea")}, MaxTokens: openai.Int(30)})
	if err != nil {
		t.Fatal(err)
	}
	text0 := full.Choices[0].Text
	if len(text0) < 12 {
		t.Fatalf("greedy output %q is too short to cut", text0)
	}
	stopAt := text0[8:11]
	cut, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "greedy", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The sea")},
		MaxTokens: openai.Int(30), Stop: openai.CompletionNewParamsStopUnion{OfString: openai.String(stopAt)}})
	if err != nil {
		t.Fatal(err)
	}
	if want := text0[:strings.Index(text0, stopAt)]; cut.Choices[0].Text != want || cut.Choices[0].FinishReason != "stop" {
		t.Errorf("with stop %q: %q (%s), want %q (stop)", stopAt, cut.Choices[0].Text, cut.Choices[0].FinishReason, want)
	}
}

// TestErrors checks the status, type and param of bad requests, through the SDK and raw.
func TestErrors(t *testing.T) {
	_, hs := newServer(t, server.Options{MaxBodyBytes: 1 << 20})
	c := client(hs)
	prompt := openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")}
	for _, tc := range []struct {
		name   string
		params openai.CompletionNewParams
		status int
		param  string
	}{
		{"unknown model", openai.CompletionNewParams{Model: "nope", Prompt: prompt}, 404, "model"},
		{"temperature", openai.CompletionNewParams{Model: "default", Prompt: prompt, Temperature: openai.Float(3)}, 400, "temperature"},
		{"n", openai.CompletionNewParams{Model: "default", Prompt: prompt, N: openai.Int(100)}, 400, "n"},
		{"logit_bias key", openai.CompletionNewParams{Model: "default", Prompt: prompt, LogitBias: map[string]int64{"999999": 1}}, 400, "logit_bias"},
		{"max_tokens", openai.CompletionNewParams{Model: "default", Prompt: prompt, MaxTokens: openai.Int(-1)}, 400, "max_tokens"},
		{"token prompt", openai.CompletionNewParams{Model: "default", Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: []int64{1, 1 << 30}}}, 400, "prompt"},
		{"prompt beyond the context", openai.CompletionNewParams{Model: "default", Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: make([]int64, 20000)}}, 400, "prompt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Completions.New(context.Background(), tc.params)
			var ae *openai.Error
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want an API error", err)
			}
			if ae.StatusCode != tc.status || ae.Param != tc.param || ae.Message == "" {
				t.Errorf("status %d param %q message %q; want %d %q", ae.StatusCode, ae.Param, ae.Message, tc.status, tc.param)
			}
		})
	}
	for _, tc := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"malformed JSON", `{"model": "default", "prompt": `, 400, "not valid JSON"},
		{"unknown field", `{"model": "default", "prompt": "x", "frobnicate": 1}`, 400, "frobnicate"},
		{"wrong type", `{"model": "default", "prompt": "x", "max_tokens": "many"}`, 400, "max_tokens"},
		{"body too large", `{"model": "default", "prompt": "` + strings.Repeat("a", 20<<20) + `"}`, 413, "larger than the limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.want) || !strings.Contains(string(b), `"error"`) {
				t.Errorf("%d %s; want %d and an error mentioning %q", resp.StatusCode, b, tc.status, tc.want)
			}
		})
	}
}

// TestQueueFullAndDisconnect fills the one slot and the one queue place, checks the 429 with
// Retry-After, then disconnects the clients and checks that their generations stop.
func TestQueueFullAndDisconnect(t *testing.T) {
	s, hs := newServer(t, server.Options{MaxRunning: 1, MaxQueue: 1})
	c := client(hs)
	long := openai.CompletionNewParams{Model: "greedy", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And")}, MaxTokens: openai.Int(100000)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	running := c.Completions.NewStreaming(ctx, long)
	if !running.Next() {
		t.Fatalf("no first chunk: %v", running.Err())
	}
	queued := make(chan error, 1)
	go func() {
		_, err := c.Completions.New(ctx, long)
		queued <- err
	}()
	waitMetric(t, hs, "loom_num_requests_waiting 1")
	resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(`{"model":"greedy","prompt":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "queue_full") {
		t.Errorf("third request: %d Retry-After %q %s; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	cancel()
	running.Close()
	<-queued
	waitMetric(t, hs, "loom_num_requests_running 0")
	waitMetric(t, hs, `loom_requests_total{code="499",endpoint="completions"} 2`)
	_ = s
}

// TestNoQueue runs a server without a queue (MaxQueue negative, loom serve --max-queue 0): a
// request finding its one slot busy gets 429 at once.
func TestNoQueue(t *testing.T) {
	_, hs := newServer(t, server.Options{MaxRunning: 1, MaxQueue: -1})
	c := client(hs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	running := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: "greedy",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And")}, MaxTokens: openai.Int(100000)})
	defer running.Close()
	if !running.Next() {
		t.Fatalf("no first chunk: %v", running.Err())
	}
	resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(`{"model":"greedy","prompt":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "queue_full") {
		t.Errorf("second request: %d %s; want 429 queue_full at once", resp.StatusCode, b)
	}
}

// waitMetric polls /metrics until it has a line (for at most 10 s).
func waitMetric(t *testing.T, hs *httptest.Server, line string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get(hs.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = string(b)
		for _, l := range strings.Split(last, "\n") {
			if l == line {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("/metrics never showed %q; last:\n%s", line, grepLoom(last))
}

func grepLoom(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "loom_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestTimeout checks that a request past the per-request timeout fails with 504.
func TestTimeout(t *testing.T) {
	_, hs := newServer(t, server.Options{Timeout: 50 * time.Millisecond})
	c := client(hs)
	_, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: "greedy",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And")}, MaxTokens: openai.Int(100000)})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("err = %v, want a 504", err)
	}
}

// TestMetrics checks that a request shows in the counters and latency histograms.
func TestMetrics(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	c := client(hs)
	res, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: "greedy",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And")}, MaxTokens: openai.Int(5)})
	if err != nil {
		t.Fatal(err)
	}
	waitMetric(t, hs, `loom_requests_total{code="200",endpoint="completions"} 1`)
	waitMetric(t, hs, fmt.Sprintf("loom_generation_tokens_total %d", res.Usage.CompletionTokens))
	waitMetric(t, hs, fmt.Sprintf("loom_prompt_tokens_total %d", res.Usage.PromptTokens))
	waitMetric(t, hs, "loom_time_to_first_token_seconds_count 1")
	waitMetric(t, hs, fmt.Sprintf("loom_inter_token_latency_seconds_count %d", res.Usage.CompletionTokens-1))
	waitMetric(t, hs, "loom_kv_cache_usage_perc 0")

	// The same long prompt again: its blocks come from the prefix cache.
	long := strings.Repeat("And God saw the light, that it was good. ", 12)
	for range 2 {
		if _, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: "greedy",
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(long)}, MaxTokens: openai.Int(2)}); err != nil {
			t.Fatal(err)
		}
	}
	if v := metricValue(metricsText(t, hs), "loom_prefix_cache_reused_tokens_total"); v < 64 {
		t.Errorf("a repeated 100-token prompt reused %v cached positions, want at least 64", v)
	}
}
