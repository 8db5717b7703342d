package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestConcurrentStreamsEqualAlone runs 64 streaming clients at once against 16 generation slots
// (the others wait in the queue), each with its own prompt and seed, and checks that every
// request completes with exactly the output of the same request run alone, that steps were
// batched across requests, and that no goroutine outlives the requests.
func TestConcurrentStreamsEqualAlone(t *testing.T) {
	const clients, slots = 64, 16
	prompts := []string{"And God said", "Call me Ishmael.", "Mr. Speaker,", "The light", "In the beginning", "Whale", "Of colours", "Now"}
	b, err := pipeline.LoadAndBuild(examplePath("default"), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, clients)
	for i := range clients {
		req := b.Request(prompts[i%len(prompts)])
		req.Seed, req.MaxNewTokens = core.SeedOf(uint64(100+i)), 12+i%5
		res, err := core.Generate(context.Background(), b.Pipeline, req)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = res.Sequences[0].Text
	}
	b.Close()

	_, hs := newServer(t, server.Options{MaxRunning: slots, MaxQueue: clients})
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := openai.NewClient(option.WithBaseURL(hs.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: tr}))
	before := runtime.NumGoroutine()

	got := make([]string, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stream := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: "default",
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompts[i%len(prompts)])},
				Seed:   openai.Int(int64(100 + i)), MaxTokens: openai.Int(int64(12 + i%5))})
			var sb strings.Builder
			for stream.Next() {
				for _, ch := range stream.Current().Choices {
					sb.WriteString(ch.Text)
				}
			}
			if err := stream.Err(); err != nil {
				t.Errorf("client %d: %v", i, err)
			}
			got[i] = sb.String()
		}()
	}
	wg.Wait()
	for i := range clients {
		if got[i] != want[i] {
			t.Errorf("client %d: streamed %q, alone %q", i, got[i], want[i])
		}
	}

	m := metricsText(t, hs)
	if one, all := metricValue(m, `loom_batch_sessions_bucket{le="1"}`), metricValue(m, "loom_batch_sessions_count"); one >= all {
		t.Errorf("no forward merged two requests (%v of %v steps had one call)", one, all)
	}
	tr.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after the requests, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

func metricsText(t *testing.T, hs *httptest.Server) string {
	t.Helper()
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func metricValue(text, name string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}
