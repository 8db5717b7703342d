package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loomlm/loom/server"
)

// FuzzRequest sends arbitrary bodies to the endpoints that take one (completions, chat, the
// workbench's validate and run): every answer is a 200 (JSON or an event stream) or an OpenAI
// error object with a 4xx or 5xx status, never a panic. Generations are cut short by a 20 ms
// timeout.
func FuzzRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model": "greedy", "prompt": "And God said", "max_tokens": 4}`,
		`{"model": "creative", "prompt": ["a", "b"], "n": 2, "logprobs": 2, "stop": ["\n"], "seed": 7, "max_tokens": 3}`,
		`{"model": "greedy", "prompt": "x", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 2}`,
		`{"model": "greedy", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 3, "logit_bias": {"12": -100}}`,
		`{"model": "greedy", "messages": [{"role": "system", "content": [{"type": "text", "text": "x"}]}], "response_format": {"type": "json_object"}, "max_tokens": 3}`,
		`{"model": "greedy", "prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "integer"}}}, "max_tokens": 3}`,
		`{"prompt": "x", "pipeline": "[model]\nbuiltin = \"default\"\n[strategy]\ntype = \"greedy\"\n", "max_tokens": 2}`,
		`{"model": "greedy", "prompt": "x", "temperature": 3, "top_p": -1, "presence_penalty": 9}`,
		`{"model": "greedy", "prompt": "And", "seed": 3, "max_tokens": 3, "trace": 5}`,
		`{"pipeline": "[model]\nbuiltin = \"default\"\n[[processors]]\ntype = \"top_k\"\nk = 4\n", "prompt": "x", "max_tokens": 2}`,
		`{"model": "greedy", "prompt": [[1, 2, 3], [4, 5]], "echo": true, "logprobs": 1, "max_tokens": 0}`,
		`{"model": "creative", "prompt": "x", "best_of": 3, "n": 2, "max_tokens": 2, "min_p": 0.1, "typical_p": 0.9}`,
		`{"model": "greedy", "prompt": ["a", "b"], "echo": true, "stream": true, "logprobs": 2, "max_tokens": 2, "repetition_penalty": 1.2}`,
		`{"model": "greedy", "messages": [{"role": "user", "content": "hi"}], "stream": true, "logprobs": true, "top_logprobs": 2, "min_tokens": 2, "ignore_eos": true, "stop_token_ids": [5]}`,
		`{"model": "creative", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"enum": [1, 2]}}}}}], "tool_choice": "required", "stream": true, "n": 2, "max_tokens": 4}`,
		`{"model": "greedy", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "2"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "f"}}, "parallel_tool_calls": false, "max_tokens": 3}`,
	} {
		for endpoint := range uint8(4) {
			f.Add(seed, endpoint)
		}
	}
	s := server.New(server.Options{Timeout: 20 * time.Millisecond, MaxRunning: 2, MaxQueue: 2})
	for _, n := range []string{"greedy", "creative"} {
		if err := s.Load(examplePath(n)); err != nil {
			f.Fatal(err)
		}
	}
	f.Cleanup(func() { s.Close() })
	endpoints := []string{"/v1/completions", "/v1/chat/completions", "/loom/validate", "/loom/run"}
	f.Fuzz(func(t *testing.T, body string, endpoint uint8) {
		path := endpoints[int(endpoint)%len(endpoints)]
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
		switch {
		case rec.Code == http.StatusOK:
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") && !strings.HasPrefix(ct, "text/event-stream") {
				t.Fatalf("200 with Content-Type %q", ct)
			}
		case rec.Code >= 400 && rec.Code < 600:
			var e struct {
				Error *struct {
					Message string `json:"message"`
					Type    string `json:"type"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
				t.Fatalf("status %d with body %q: not an OpenAI error object", rec.Code, rec.Body.String())
			}
		default:
			t.Fatalf("status %d", rec.Code)
		}
	})
}
