package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
)

// smallBudgetPipeline writes a pipeline whose model may keep 1 MiB of KV cache (and the TOML
// extra) and loads it on a server with opts, as model "small".
func smallBudgetPipeline(t *testing.T, opts server.Options, extra string) *server.Server {
	t.Helper()
	file := filepath.Join(t.TempDir(), "small.toml")
	if err := os.WriteFile(file, []byte("[model]\nbuiltin = \"default\"\nkv_budget_mb = 1\n[strategy]\ntype = \"greedy\"\n"+extra), 0o644); err != nil {
		t.Fatal(err)
	}
	s := server.New(opts)
	t.Cleanup(func() { s.Close() })
	if err := s.Load(file); err != nil {
		t.Fatal(err)
	}
	return s
}

// overBudget serves s, checks that a short prompt runs, and returns the error of a prompt that
// needs more cache than the 1 MiB budget.
func overBudget(t *testing.T, s *server.Server) *openai.Error {
	t.Helper()
	hs := httptest.NewServer(s)
	defer hs.Close()
	c := client(hs)
	if _, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: "small",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And God said")}, MaxTokens: openai.Int(4)}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: "small",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(strings.Repeat("And God said, Let there be light. ", 30))}, MaxTokens: openai.Int(4)})
	var ae *openai.Error
	if !errors.As(err, &ae) {
		t.Fatalf("a prompt over the KV budget: err = %v, want an API error", err)
	}
	return ae
}

// TestKVBudget serves a pipeline whose model may keep 1 MiB of KV cache: a short prompt runs,
// a prompt that needs more cache than the budget gets 503 with Retry-After, code
// kv_cache_full.
func TestKVBudget(t *testing.T) {
	ae := overBudget(t, smallBudgetPipeline(t, server.Options{}, ""))
	if ae.StatusCode != http.StatusServiceUnavailable || ae.Code != "kv_cache_full" || ae.Response.Header.Get("Retry-After") == "" {
		t.Fatalf("err = %v, want 503 kv_cache_full with Retry-After", ae)
	}
}

// TestReserveKV loads a pipeline on a server with Options.ReserveKV: the model's KV cache is
// reserved at load, as far as its budget allows (MaxRunning sequences of its full context are
// more than 1 MiB), said in the log, and serving keeps the budget's limits.
func TestReserveKV(t *testing.T) {
	var logs bytes.Buffer
	s := smallBudgetPipeline(t, server.Options{ReserveKV: true, MaxRunning: 4,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true, Level: hclog.Info})}, "")
	var line struct {
		Msg       string `json:"@message"`
		Model     string `json:"model"`
		Sequences int    `json:"sequences"`
		MiB       string `json:"MiB"`
	}
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	// Four sequences of the embedded model's 512 positions take more than its 1 MiB budget:
	// the whole budget is reserved, less what is left of it below one block (under 0.1 MiB).
	mib, err := strconv.ParseFloat(line.MiB, 64)
	if line.Msg != "reserved KV cache" || line.Model != "builtin default" || line.Sequences != 4 || err != nil || mib < 0.9 || mib > 1 {
		t.Fatalf("log line %+v, want the reservation of builtin default's 1 MiB budget for 4 sequences", line)
	}
	if ae := overBudget(t, s); ae.StatusCode != http.StatusServiceUnavailable || ae.Code != "kv_cache_full" {
		t.Fatalf("err = %v, want 503 kv_cache_full: a reservation does not raise the budget", ae)
	}
}

// TestKVAdmission sends concurrent requests that each fit the 1 MiB cache (about ten blocks of
// 16 positions) but together do not: each waits for cache room instead of failing halfway, and
// each answers what it answers alone.
func TestKVAdmission(t *testing.T) {
	s := smallBudgetPipeline(t, server.Options{}, "[generation]\nignore_eos = true\n")
	hs := httptest.NewServer(s)
	defer hs.Close()
	c := client(hs)
	prompts := []string{"And God said", "In the beginning", "The whale", "Call me Ishmael"}
	ask := func(prompt string) (string, error) {
		res, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: "small",
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}, MaxTokens: openai.Int(100)})
		if err != nil {
			return "", err
		}
		if res.Usage.CompletionTokens != 100 {
			return "", fmt.Errorf("%d tokens, want 100", res.Usage.CompletionTokens)
		}
		return res.Choices[0].Text, nil
	}
	togetherThenAlone(t, prompts, 1, ask)
}

// TestKVAdmissionDraft is TestKVAdmission for a speculative pipeline whose draft model has the
// small cache (1 MiB of F32 keys and values of the embedded draft: 2 032 positions, where ten
// requests of 400 tokens need 4 000): requests wait for the draft's room too.
func TestKVAdmissionDraft(t *testing.T) {
	file := filepath.Join(t.TempDir(), "spec.toml")
	src := "[model]\nbuiltin = \"default\"\nkv_type = \"f16\"\n[draft_model]\nbuiltin = \"draft\"\nkv_type = \"f32\"\nkv_budget_mb = 1\n" +
		"[generation]\nignore_eos = true\n[strategy]\ntype = \"speculative\"\nk = 4\nk_policy = \"fixed\"\ngreedy = true\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	s := server.New(server.Options{})
	defer s.Close()
	if err := s.Load(file); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	c := client(hs)
	ask := func(prompt string) (string, error) {
		res, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: "spec",
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}, MaxTokens: openai.Int(400)})
		if err != nil {
			return "", err
		}
		return res.Choices[0].Text, nil
	}
	var prompts []string
	for i := range 10 {
		prompts = append(prompts, fmt.Sprintf("Request %d: And God said", i))
	}
	togetherThenAlone(t, prompts, 4, ask) // three of them alone are enough to compare
}

// TestKVAdmissionSelfDraft serves a speculative pipeline whose draft is the target model
// itself, one cache of ten blocks for both. A request of 60 tokens may fill six blocks for its
// target's sequence and six for its draft's: it is admitted once for both, when it has the
// cache to itself (admitted for each in turn, its second wait waited for the room its first
// held, until the client gave up), and requests that together outgrow the cache wait.
func TestKVAdmissionSelfDraft(t *testing.T) {
	file := filepath.Join(t.TempDir(), "self.toml")
	src := "[model]\nbuiltin = \"default\"\nkv_budget_mb = 1\n[draft_model]\nbuiltin = \"default\"\nkv_budget_mb = 1\n" +
		"[generation]\nignore_eos = true\n[strategy]\ntype = \"speculative\"\nk = 2\nk_policy = \"fixed\"\ngreedy = true\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	s := server.New(server.Options{Timeout: 30 * time.Second})
	defer s.Close()
	if err := s.Load(file); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	c := client(hs)
	ask := func(prompt string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "self",
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}, MaxTokens: openai.Int(60)})
		if err != nil {
			return "", err
		}
		if res.Usage.CompletionTokens != 60 {
			return "", fmt.Errorf("%d tokens, want 60", res.Usage.CompletionTokens)
		}
		return res.Choices[0].Text, nil
	}
	togetherThenAlone(t, []string{"And God said", "In the beginning", "The whale"}, 2, ask)
}

// togetherThenAlone sends every prompt at once through ask, then every every-th one alone, and
// checks that each succeeded and gave the same text both ways.
func togetherThenAlone(t *testing.T, prompts []string, every int, ask func(string) (string, error)) {
	t.Helper()
	texts := make([]string, len(prompts))
	errs := make([]error, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Go(func() { texts[i], errs[i] = ask(p) })
	}
	wg.Wait()
	for i, p := range prompts {
		if errs[i] != nil {
			t.Errorf("%q among others: %v", p, errs[i])
			continue
		}
		if i%every != 0 {
			continue
		}
		alone, err := ask(p)
		if err != nil {
			t.Fatalf("%q alone: %v", p, err)
		}
		if texts[i] != alone {
			t.Errorf("%q: among others %q, alone %q", p, texts[i], alone)
		}
	}
}
