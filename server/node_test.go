package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// nodeReport is what testdata/node/client.mjs prints.
type nodeReport struct {
	Completion struct {
		Text   string
		Usage  openai.CompletionUsage
		Finish string
	}
	Stream struct {
		Text  string
		Usage *openai.CompletionUsage
	}
	Chat struct {
		Text, Role, Finish string
	}
	ChatStream struct{ Text string }
	N          []string
	Logprobs   []struct {
		Token   string
		Logprob float64
		Top     int
	}
	LogprobsUsage openai.CompletionUsage
	// LogprobsStream holds each choice of a chat request with n = 2 and logprobs, whole and
	// put together from its streamed chunks.
	LogprobsStream struct {
		Whole, Streamed []struct {
			Text    string
			Content []openai.ChatCompletionTokenLogprob
		}
	}
	// Echo is a text scored with echo, max_tokens 0 and logprobs.
	Echo struct {
		Text     string
		Tokens   []string
		Logprobs []*float64
	}
	// Tools: what the SDK's tool runner ran (the arguments it parsed), its conversation, the
	// reply to the conversation, and a required call streamed through the SDK's helper.
	Tools struct {
		Ran      []map[string]any
		Messages []json.RawMessage
		Answer   struct {
			Finish       string
			PromptTokens int `json:"prompt_tokens"`
		}
		Streamed struct {
			Finish string
			Calls  []struct{ Name, Arguments string }
		}
	}
	Errors map[string]struct {
		Status                     int
		Type, Param, Code, Message string
	}
	// Retrieved is models.retrieve("greedy").
	Retrieved struct{ ID, Object string }
	// Reasoning is a reasoning model's scripted reply, whole and streamed.
	Reasoning struct {
		Whole struct {
			Reasoning, Content string
			Tokens             int
		}
		Streamed struct{ Reasoning, Content string }
	}
}

// TestNodeClient drives the server with the official openai npm package (installed from the
// committed lockfile with npm ci when missing) and checks its results against loom run and the
// Go SDK.
func TestNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required for this test (the official openai npm package runs on it): ", err)
	}
	dir := filepath.Join("testdata", "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Fatal("npm is required to install the openai package from testdata/node/package-lock.json: ", err)
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}

	s, hs := newServer(t, server.Options{})
	thinking := thinkingModel(t)
	if err := s.Load(thinking); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", hs.URL+"/v1", filepath.Join(filepath.Dir(thinking), "m.gguf"))
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\n%s", err, stderr.String())
	}
	var got nodeReport
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}

	if got.Retrieved.ID != "greedy" || got.Retrieved.Object != "model" {
		t.Errorf("models.retrieve: %+v", got.Retrieved)
	}
	if r := got.Reasoning; r.Whole.Reasoning != "The sea is wide." || r.Whole.Content != "It is wide." || r.Whole.Tokens < 3 ||
		r.Streamed.Reasoning != r.Whole.Reasoning || r.Streamed.Content != r.Whole.Content {
		t.Errorf("reasoning model: %+v", r)
	}

	want := direct(t, "default", "And God said", pipeline.Overrides{Temperature: ptr(1.2)}, 7, 20)
	if got.Completion.Text != want.Sequences[0].Text || got.Completion.Usage.CompletionTokens != int64(want.GeneratedTokens) {
		t.Errorf("completion %q (%+v), loom run %q (%d tokens)", got.Completion.Text, got.Completion.Usage, want.Sequences[0].Text, want.GeneratedTokens)
	}
	if got.Stream.Text != want.Sequences[0].Text || got.Stream.Usage == nil || got.Stream.Usage.TotalTokens != got.Completion.Usage.TotalTokens {
		t.Errorf("stream %q (usage %+v), want %q (%+v)", got.Stream.Text, got.Stream.Usage, want.Sequences[0].Text, got.Completion.Usage)
	}

	c := client(hs)
	chat, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "default", Seed: openai.Int(3), MaxTokens: openai.Int(20),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Speak plainly."), openai.UserMessage("Tell me of the sea.")}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Chat.Text != chat.Choices[0].Message.Content || got.Chat.Role != "assistant" || got.Chat.Finish != string(chat.Choices[0].FinishReason) || got.ChatStream.Text != got.Chat.Text {
		t.Errorf("node chat %+v, stream %q; Go SDK %q (%s)", got.Chat, got.ChatStream.Text, chat.Choices[0].Message.Content, chat.Choices[0].FinishReason)
	}

	wantN := direct(t, "creative", "In the beginning", pipeline.Overrides{N: ptr(3)}, 11, 16)
	if len(got.N) != 3 {
		t.Fatalf("n = 3 gave %d choices", len(got.N))
	}
	for i := range got.N {
		if got.N[i] != wantN.Sequences[i].Text {
			t.Errorf("choice %d %q, loom run %q", i, got.N[i], wantN.Sequences[i].Text)
		}
	}

	if len(got.Logprobs) == 0 || int64(len(got.Logprobs)) != got.LogprobsUsage.CompletionTokens {
		t.Errorf("%d logprob entries for %d tokens", len(got.Logprobs), got.LogprobsUsage.CompletionTokens)
	}
	for _, e := range got.Logprobs {
		if e.Logprob > 0 || e.Top != 2 {
			t.Errorf("logprob entry %+v", e)
		}
	}

	// Streamed with n = 2, each choice's chunks hold the whole response's text and logprobs.
	whole, streamed := got.LogprobsStream.Whole, got.LogprobsStream.Streamed
	if len(whole) != 2 || len(streamed) != 2 {
		t.Fatalf("logprobs with n = 2: %d choices whole, %d streamed", len(whole), len(streamed))
	}
	flat := func(es []openai.ChatCompletionTokenLogprob) string {
		var b strings.Builder
		for _, e := range es {
			fmt.Fprintf(&b, "%q %v %v [", e.Token, e.Logprob, e.Bytes)
			for _, tp := range e.TopLogprobs {
				fmt.Fprintf(&b, "%q %v %v ", tp.Token, tp.Logprob, tp.Bytes)
			}
			b.WriteString("]\n")
		}
		return b.String()
	}
	for i := range whole {
		if len(whole[i].Content) == 0 || streamed[i].Text != whole[i].Text || flat(streamed[i].Content) != flat(whole[i].Content) {
			t.Errorf("choice %d streamed %q with logprobs\n%s\nwhole %q with\n%s", i, streamed[i].Text, flat(streamed[i].Content), whole[i].Text, flat(whole[i].Content))
		}
	}

	// The scored text: the prompt, its first token's log-probability null, the others the
	// Go SDK's.
	scored, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: "greedy",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("And God saw the light")},
		MaxTokens: openai.Int(0), Echo: openai.Bool(true), Logprobs: openai.Int(1)})
	if err != nil {
		t.Fatal(err)
	}
	e := got.Echo
	if e.Text != "And God saw the light" || len(e.Logprobs) != len(e.Tokens) || len(e.Tokens) != len(scored.Choices[0].Logprobs.Tokens) || len(e.Tokens) < 2 || e.Logprobs[0] != nil {
		t.Fatalf("node echo %+v; Go SDK %d tokens", e, len(scored.Choices[0].Logprobs.Tokens))
	}
	for i := 1; i < len(e.Tokens); i++ {
		if e.Logprobs[i] == nil || *e.Logprobs[i] != scored.Choices[0].Logprobs.TokenLogprobs[i] {
			t.Errorf("node echo token %d %q: %v, Go SDK %v", i, e.Tokens[i], e.Logprobs[i], scored.Choices[0].Logprobs.TokenLogprobs[i])
		}
	}

	// The tool runner ran get_weather once with arguments the schema holds, its conversation
	// (user, the assistant's call, the tool's result) is answered, and the streamed required
	// call is the one the Go SDK gets without stream.
	tools := got.Tools
	if len(tools.Ran) != 1 || len(tools.Messages) != 3 || tools.Answer.Finish == "" || tools.Answer.PromptTokens == 0 {
		t.Errorf("tool runner: ran %v, %d messages, answer %+v", tools.Ran, len(tools.Messages), tools.Answer)
	} else if unit := tools.Ran[0]["unit"]; (unit != "C" && unit != "F") || len(tools.Ran[0]) != 2 {
		t.Errorf("tool runner ran get_weather(%v)", tools.Ran[0])
	}
	required, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "creative", Seed: openai.Int(5), MaxTokens: openai.Int(120),
		ParallelToolCalls: openai.Bool(false), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Oslo?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather",
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "maxLength": 20}, "unit": map[string]any{"enum": []any{"C", "F"}}}, "required": []any{"city", "unit"}, "additionalProperties": false}})},
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}})
	if err != nil {
		t.Fatal(err)
	}
	if s := tools.Streamed; s.Finish != "tool_calls" || len(s.Calls) != 1 || len(required.Choices[0].Message.ToolCalls) != 1 ||
		s.Calls[0].Name != required.Choices[0].Message.ToolCalls[0].Function.Name || s.Calls[0].Arguments != required.Choices[0].Message.ToolCalls[0].Function.Arguments {
		t.Errorf("node streamed %+v; Go SDK %+v", s, required.Choices[0].Message.ToolCalls)
	}

	for name, wantErr := range map[string]struct {
		status      int
		param, text string
	}{
		"unknownModel":   {404, "model", "no such pipeline"},
		"badTemperature": {400, "temperature", "outside [0, 2]"},
	} {
		e := got.Errors[name]
		if e.Status != wantErr.status || e.Param != wantErr.param || !strings.Contains(e.Message, wantErr.text) {
			t.Errorf("%s: %+v; want status %d, param %s, a message with %q", name, e, wantErr.status, wantErr.param, wantErr.text)
		}
	}
}
