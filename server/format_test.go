package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/loomlm/loom/constraint/earley"
	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
	santhosh "github.com/santhosh-tekuri/jsonschema/v6"
)

// TestResponseFormatJSONObject: with response_format json_object every reply is a JSON object
// (or, cut by max_tokens, the start of one), through the official Go SDK.
func TestResponseFormatJSONObject(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	c := client(hs)
	complete := 0
	for seed := int64(1); seed <= 8; seed++ {
		res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:     "creative",
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Describe a whale as JSON.")},
			MaxTokens: openai.Int(120),
			Seed:      openai.Int(seed),
			ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{
				OfJSONObject: &openai.ResponseFormatJSONObjectParam{},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		text, reason := res.Choices[0].Message.Content, res.Choices[0].FinishReason
		m := earley.New(grammar.MustCompile(server.JSONObjectGrammar))
		for i := 0; i < len(text); i++ {
			if !m.Advance(text[i]) {
				t.Fatalf("seed %d: %q leaves the JSON object grammar at byte %d", seed, text, i)
			}
		}
		if !strings.HasPrefix(text, "{") || (reason == "stop") != m.IsAccepting() {
			t.Fatalf("seed %d (%s): %q (complete: %v)", seed, reason, text, m.IsAccepting())
		}
		if reason == "stop" {
			var v map[string]any
			if err := json.Unmarshal([]byte(text), &v); err != nil {
				t.Errorf("seed %d: finished reply %q is not a JSON object: %v", seed, text, err)
			}
			complete++
		}
	}
	t.Logf("%d of 8 replies closed their object within 120 tokens", complete)
}

func TestResponseFormatErrors(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	for _, tc := range []struct {
		name, format, want string
	}{
		{"no type", `{}`, "response_format.type"},
		{"unknown type", `{"type": "yaml"}`, "must be text, json_object or json_schema"},
		{"schema missing", `{"type": "json_schema"}`, "response_format.json_schema"},
		{"schema not JSON", `{"type": "json_schema", "json_schema": {"name": "x", "schema": "{"}}`, "response_format.json_schema.schema"},
		{"schema on json_object", `{"type": "json_object", "json_schema": {"name": "x", "schema": {}}}`, "only for type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model": "default", "messages": [{"role": "user", "content": "hi"}], "response_format": ` + tc.format + `}`
			resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(b), tc.want) {
				t.Errorf("%d %s; want 400 mentioning %q", resp.StatusCode, b, tc.want)
			}
		})
	}
	// The text format changes nothing.
	c := client(hs)
	plain, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: "greedy", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The whale")}, MaxTokens: openai.Int(8)})
	if err != nil {
		t.Fatal(err)
	}
	var ae *openai.Error
	text, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "greedy", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxTokens: openai.Int(8),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfText: &openai.ResponseFormatTextParam{}},
	})
	if errors.As(err, &ae) || err != nil || text.Choices[0].Message.Content == "" || plain.Choices[0].Text == "" {
		t.Errorf("text format: %v", err)
	}
}

// TestResponseFormatJSONSchema: a json_schema response format gives JSON valid against the
// schema (checked by santhosh-tekuri/jsonschema), and a schema loom cannot enforce is a 400
// naming the keyword.
func TestResponseFormatJSONSchema(t *testing.T) {
	_, hs := newServer(t, server.Options{})
	c := client(hs)
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"city":  map[string]any{"type": "string", "maxLength": 16},
			"stars": map[string]any{"type": "integer", "minimum": 1, "maximum": 5},
		},
		"required":             []any{"city", "stars"},
		"additionalProperties": false,
	}
	comp := santhosh.NewCompiler()
	if err := comp.AddResource("s.json", schema); err != nil {
		t.Fatal(err)
	}
	validator, err := comp.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	for seed := int64(1); seed <= 5; seed++ {
		res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:     "creative",
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Rate a city.")},
			MaxTokens: openai.Int(200),
			Seed:      openai.Int(seed),
			ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{
				OfJSONSchema: &openai.ResponseFormatJSONSchemaParam{JSONSchema: openai.ResponseFormatJSONSchemaJSONSchemaParam{
					Name: "rating", Schema: schema, Strict: openai.Bool(true)}},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		text := res.Choices[0].Message.Content
		if res.Choices[0].FinishReason != "stop" {
			t.Errorf("seed %d: %q ended by %s", seed, text, res.Choices[0].FinishReason)
			continue
		}
		v, err := santhosh.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			t.Fatalf("seed %d: %q: %v", seed, text, err)
		}
		if err := validator.Validate(v); err != nil {
			t.Errorf("seed %d: %s: %v", seed, text, err)
		}
	}
	body := `{"model": "default", "messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": true}}}}`
	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), `uniqueItems true is not supported`) {
		t.Errorf("%d %s; want 400 naming uniqueItems", resp.StatusCode, b)
	}
}
