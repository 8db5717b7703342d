package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
)

// TestLateReaderLosesNothing: a streaming client that reads nothing until its generation has
// finished gets every event, in order, and then [DONE] — the events that queued while their
// writer waited go out together — and its text is the same request's without streaming.
func TestLateReaderLosesNothing(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	const prompt, maxTokens = "The king", 300
	c := client(hs)
	want, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: "greedy",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}, MaxTokens: openai.Int(maxTokens)})
	if err != nil {
		t.Fatal(err)
	}

	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := fmt.Sprintf(`{"model":"greedy","prompt":%q,"max_tokens":%d,"stream":true}`, prompt, maxTokens)
	if _, err := fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: loom\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, hs, `loom_requests_total{code="200",endpoint="completions"} 2`) // generated without a read

	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var text strings.Builder
	events, done := 0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if done {
			t.Fatalf("data after [DONE]: %q", data)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var chunk struct {
			Choices []struct {
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("event %d: %v: %q", events, err, data)
		}
		for _, c := range chunk.Choices {
			text.WriteString(c.Text)
		}
		events++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !done {
		t.Errorf("no [DONE] after %d events", events)
	}
	if got := text.String(); got != want.Choices[0].Text {
		t.Errorf("streamed text (%d events):\n%q\nwant the same request's without streaming:\n%q", events, got, want.Choices[0].Text)
	}
	if events < maxTokens/4 {
		t.Errorf("%d events for %d tokens", events, maxTokens)
	}
}
