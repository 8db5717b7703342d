package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/loomlm/loom/chat"
	"github.com/loomlm/loom/server"
	"github.com/loomlm/loom/toolcall"
)

// curlRE matches the curl commands of docs/serving.md: a URL path and an optional JSON body.
var curlRE = regexp.MustCompile(`^curl -s (?:-N )?http://127\.0\.0\.1:8080(/\S+)(?: -H '[^']*')*(?: -d '([^']*)')?$`)

// TestServingDocCommands runs every curl command of docs/serving.md against a server with the
// example pipelines: each must succeed, except the documented error, which must give the
// documented answer.
func TestServingDocCommands(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "serving.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, hs := newServer(t, server.Options{})
	n := 0
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "curl ") {
			continue
		}
		m := curlRE.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("docs/serving.md: a curl command this test cannot run: %s", line)
			continue
		}
		n++
		var resp *http.Response
		if m[2] == "" {
			resp, err = http.Get(hs.URL + m[1])
		} else {
			resp, err = http.Post(hs.URL+m[1], "application/json", strings.NewReader(m[2]))
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantStatus, wantText := http.StatusOK, `"model"`
		if strings.Contains(m[2], `"temperature": 3`) {
			wantStatus, wantText = http.StatusBadRequest, `"message":"temperature: 3 is outside [0, 2]","type":"invalid_request_error","param":"temperature"`
		} else if strings.Contains(m[2], `"stream": true`) {
			wantText = "data: [DONE]"
		} else if m[1] == "/tokenize" {
			wantText = `"count":`
		} else if m[1] == "/detokenize" {
			wantText = `"prompt":"user: Who made the light?\nassistant:"` // the ids the tokenize line gives
		}
		if resp.StatusCode != wantStatus || !strings.Contains(string(body), wantText) {
			t.Errorf("%s\n→ %d %s\nwant %d with %s", line, resp.StatusCode, body, wantStatus, wantText)
		}
	}
	if n < 5 {
		t.Errorf("found %d curl commands in docs/serving.md, want at least 5", n)
	}
}

// The plain chat template shown in docs/serving.md is what PlainChatTemplate renders.
func TestServingDocChatTemplate(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "serving.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```text\n(system: .*?)\n```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/serving.md shows no rendered chat template")
	}
	want := server.PlainChatTemplate([]string{"system", "user"}, []string{"Speak plainly.", "Tell me of the sea."})
	if string(m[1]) != want {
		t.Fatalf("docs/serving.md shows\n%s\nPlainChatTemplate renders\n%s", m[1], want)
	}
}

// The plain template with tools shown in docs/serving.md is what PlainChatPrompt renders.
func TestServingDocToolTemplate(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "serving.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```text\n(tools: .*?)\n```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/serving.md shows no plain template with tools")
	}
	tools, err := toolcall.ParseTools([]json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["C", "F"]}}, "required": ["city"]}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := server.PlainChatPrompt([]chat.Message{
		{Role: "user", Content: "Weather in Oslo?"},
		{Role: "assistant", NoContent: true, ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Oslo"}`}}},
		{Role: "tool", Content: "rain, 4 °C", ToolCallID: "call_1"},
	}, tools)
	if string(m[1]) != want {
		t.Fatalf("docs/serving.md shows\n%s\nPlainChatPrompt renders\n%s", m[1], want)
	}
}
