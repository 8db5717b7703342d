package server_test

import (
	"context"
	"testing"

	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
)

// TestTwoReplicasReportOwnLoad runs two servers on loopback, keeps one busy, and checks that
// each reports its own load in /metrics — what a router picking replicas reads.
func TestTwoReplicasReportOwnLoad(t *testing.T) {
	_, a := newServer(t, server.Options{MaxRunning: 1})
	_, b := newServer(t, server.Options{MaxRunning: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ca := client(a)
	stream := ca.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: "greedy",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And")}, MaxTokens: openai.Int(100000)})
	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}
	waitMetric(t, a, "loom_num_requests_running 1")
	waitMetric(t, b, "loom_num_requests_running 0")
	if v := metricValue(metricsText(t, a), "loom_kv_cache_usage_perc"); v <= 0 {
		t.Errorf("the busy replica reports KV-cache use %v, want > 0", v)
	}
	if v := metricValue(metricsText(t, b), "loom_kv_cache_usage_perc"); v != 0 {
		t.Errorf("the idle replica reports KV-cache use %v, want 0", v)
	}
	cancel()
	stream.Close()
	waitMetric(t, a, "loom_num_requests_running 0")
}
