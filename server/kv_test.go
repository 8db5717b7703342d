package server_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
)

// TestKVBudget serves a pipeline whose model may keep 1 MiB of KV cache: a short prompt runs,
// a prompt that needs more cache than the budget gets 503 with Retry-After, code
// kv_cache_full.
func TestKVBudget(t *testing.T) {
	file := filepath.Join(t.TempDir(), "small.toml")
	if err := os.WriteFile(file, []byte("[model]\nbuiltin = \"default\"\nkv_budget_mb = 1\n[strategy]\ntype = \"greedy\"\n"), 0o644); err != nil {
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
	if _, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: "small",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And God said")}, MaxTokens: openai.Int(4)}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: "small",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(strings.Repeat("And God said, Let there be light. ", 30))}, MaxTokens: openai.Int(4)})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusServiceUnavailable || ae.Code != "kv_cache_full" || ae.Response.Header.Get("Retry-After") == "" {
		t.Fatalf("err = %v, want 503 kv_cache_full with Retry-After", err)
	}
}
