package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
)

// TestCachedTokens: a second request with the same long system prompt reuses the first one's
// KV blocks and says so in usage.prompt_tokens_details.cached_tokens, streamed or not.
func TestCachedTokens(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	c := client(hs)
	system := strings.Repeat("You are the keeper of the lighthouse, and you answer in the old tongue of the sea. ", 12)
	ask := func(question string) openai.CompletionUsage {
		res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:     "greedy",
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(question)},
			MaxTokens: openai.Int(4),
		})
		if err != nil {
			t.Fatal(err)
		}
		return res.Usage
	}
	first := ask("Where is the ship?")
	second := ask("What is the hour?")
	t.Logf("prompt tokens %d then %d; cached %d then %d", first.PromptTokens, second.PromptTokens,
		first.PromptTokensDetails.CachedTokens, second.PromptTokensDetails.CachedTokens)
	if second.PromptTokensDetails.CachedTokens < first.PromptTokens/2 || second.PromptTokensDetails.CachedTokens >= second.PromptTokens {
		t.Errorf("the second request reports %d cached of %d prompt tokens; the shared system prompt is most of it",
			second.PromptTokensDetails.CachedTokens, second.PromptTokens)
	}
	// Streamed, with include_usage: the last chunk carries the same detail.
	stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "greedy",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage("And the tide?")},
		MaxTokens:     openai.Int(4),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var cached int64 = -1
	for stream.Next() {
		if ch := stream.Current(); ch.Usage.PromptTokens > 0 {
			cached = ch.Usage.PromptTokensDetails.CachedTokens
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if cached < first.PromptTokens/2 {
		t.Errorf("streamed usage reports %d cached tokens", cached)
	}
}
