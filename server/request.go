package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/loomlm/loom/core"
)

// common holds the request fields /v1/completions and /v1/chat/completions share.
type common struct {
	Model string `json:"model"`
	sampling
	MaxTokens *int            `json:"max_tokens"`
	N         *int            `json:"n"`
	Stop      json.RawMessage `json:"stop"`
	Seed      *int64          `json:"seed"`
	// IgnoreEOS (vLLM's and llama-server's extension) generates past end-of-generation tokens.
	IgnoreEOS     *bool `json:"ignore_eos"`
	Stream        bool  `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
		// IncludeObfuscation is accepted and ignored: loom adds no obfuscation.
		IncludeObfuscation *bool `json:"include_obfuscation"`
	} `json:"stream_options"`
	// User identifies the end user; it is logged, nothing else.
	User string `json:"user"`
	// Pipeline is loom's extension: a whole pipeline as TOML, run instead of a loaded one
	// (Model then only names it in the response).
	Pipeline *string `json:"pipeline"`
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	common
	Prompt   json.RawMessage `json:"prompt"`
	Logprobs *int            `json:"logprobs"`
	Echo     bool            `json:"echo"`
	BestOf   *int            `json:"best_of"`
	// Suffix asks a code model to fill in the middle: the text between the prompt and the
	// suffix (see fillInTheMiddle).
	Suffix *string `json:"suffix"`
}

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	common
	Messages            []chatMessage `json:"messages"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
	Logprobs            bool          `json:"logprobs"`
	TopLogprobs         *int          `json:"top_logprobs"`
	// Tools the model may call, tool_choice ("none", "auto", "required" or a function) and
	// parallel_tool_calls: see tools.go.
	Tools             []json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	// ReasoningFormat (llama-server's extension) is how a reasoning model's thinking is
	// returned: "auto" (the default) and "deepseek" as reasoning_content, "none" in content.
	ReasoningFormat *string `json:"reasoning_format"`
	// ChatTemplateKwargs (vLLM's and llama-server's extension) are further variables for the
	// model's chat template, such as Qwen3's enable_thinking.
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
}

// chatMessage is one message of a chat; Content is a string, an array of text parts, or null
// (an assistant message that only calls tools).
type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  []toolCallParam `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	// Refusal is accepted on assistant messages (OpenAI's SDKs send back what they got), and
	// Parsed ignored (the openai npm package's tool runner leaves it in its messages).
	Refusal *string         `json:"refusal"`
	Parsed  json.RawMessage `json:"parsed"`
	// ReasoningContent is an assistant message's thinking, as a reasoning model's reply
	// returned it; the template decides whether to show it again (Qwen3's does, in the turns
	// after the last user message).
	ReasoningContent *string `json:"reasoning_content"`
}

// toolCallParam is a call of a tool in an assistant message.
type toolCallParam struct {
	// Index is accepted and ignored: a call put together from a stream may keep it.
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		// ParsedArguments is accepted and ignored: the openai npm package's tool runner
		// leaves it in the messages it sends back.
		ParsedArguments json.RawMessage `json:"parsed_arguments"`
	} `json:"function"`
}

// Limits on request fields.
const (
	maxN           = 16
	maxStops       = 8
	maxTopLogprobs = 20
)

// decode reads a JSON body into v, refusing unknown fields, trailing data and bodies over the
// server's limit.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && te.Field != "":
			return badParam(te.Field, "must be %s, not a JSON %s", jsonKind(te.Type.String()), te.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return badParam(f, "unknown field")
		}
		return &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "request body is not valid JSON: " + err.Error()}
	}
	if dec.More() {
		return &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "request body has data after its JSON object"}
	}
	return nil
}

func jsonKind(goType string) string {
	switch {
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}

// stringOrList decodes a field that is a string or an array of strings.
func stringOrList(field string, raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badParam(field, "must be a string or an array of strings")
	}
	return list, nil
}

// toRequest checks the shared fields and fills req; maxTokens is max_tokens or its chat
// replacement.
func (c *common) toRequest(e *entry, maxTokens *int, req *core.Request) ([]string, error) {
	if err := c.sampling.validate(e.model.raw.Config().VocabSize); err != nil {
		return nil, err
	}
	if maxTokens != nil {
		if *maxTokens < 0 {
			return nil, badParam("max_tokens", "%d must not be negative", *maxTokens)
		}
		req.MaxNewTokens = *maxTokens
	}
	if c.IgnoreEOS != nil {
		req.IgnoreEOS = *c.IgnoreEOS
	}
	if c.N != nil {
		if *c.N < 1 || *c.N > maxN {
			return nil, badParam("n", "%d is outside [1, %d]", *c.N, maxN)
		}
		req.N = *c.N
	}
	if c.Seed != nil {
		if *c.Seed < 0 {
			return nil, badParam("seed", "%d must not be negative", *c.Seed)
		}
		req.Seed = core.SeedOf(uint64(*c.Seed))
	}
	stop, err := stringOrList("stop", c.Stop)
	if err != nil {
		return nil, err
	}
	if len(stop) > maxStops {
		return nil, badParam("stop", "%d strings: at most %d", len(stop), maxStops)
	}
	for i, st := range stop {
		if st == "" {
			return nil, badParam("stop", "string %d is empty", i)
		}
	}
	if c.StreamOptions != nil && !c.Stream {
		return nil, badParam("stream_options", "only allowed when stream is true")
	}
	return stop, nil
}

// maxPrompts is the most prompts one completion request may batch.
const maxPrompts = 64

// promptInput is one prompt of a completion request: a text, or token ids.
type promptInput struct {
	text   string
	tokens []core.TokenID
}

// completionPrompts reads a completion request's prompt field: a string, an array of strings,
// an array of token ids, or an array of arrays of token ids (a batch of prompts, each answered
// with its own choices).
func completionPrompts(raw json.RawMessage, vocab int) ([]promptInput, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badParam("prompt", "missing")
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return []promptInput{{text: text}}, nil
	}
	tokensOf := func(where string, ids []int) ([]core.TokenID, error) {
		if len(ids) == 0 {
			return nil, badParam("prompt", "%san empty array of token ids", where)
		}
		out := make([]core.TokenID, len(ids))
		for i, id := range ids {
			if id < 0 || id >= vocab {
				return nil, badParam("prompt", "%stoken %d = %d is outside the vocabulary [0, %d)", where, i, id, vocab)
			}
			out[i] = core.TokenID(id)
		}
		return out, nil
	}
	var texts []string
	var ids []int
	var batches [][]int
	var out []promptInput
	switch {
	case json.Unmarshal(raw, &texts) == nil:
		for _, t := range texts {
			out = append(out, promptInput{text: t})
		}
	case json.Unmarshal(raw, &ids) == nil && len(ids) > 0:
		toks, err := tokensOf("", ids)
		if err != nil {
			return nil, err
		}
		return []promptInput{{tokens: toks}}, nil
	case json.Unmarshal(raw, &batches) == nil:
		for i, b := range batches {
			toks, err := tokensOf(fmt.Sprintf("prompt %d: ", i), b)
			if err != nil {
				return nil, err
			}
			out = append(out, promptInput{tokens: toks})
		}
	default:
		return nil, badParam("prompt", "must be a string, an array of strings, an array of token ids or an array of arrays of token ids")
	}
	if len(out) == 0 || len(out) > maxPrompts {
		return nil, badParam("prompt", "%d prompts: from 1 to %d in one request", len(out), maxPrompts)
	}
	return out, nil
}

// messageText returns a message's text: its content string, or its text parts joined.
func messageText(i int, m chatMessage) (string, error) {
	field := fmt.Sprintf("messages[%d].content", i)
	var text string
	if err := json.Unmarshal(m.Content, &text); err == nil {
		return text, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", badParam(field, "must be a string or an array of text parts")
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "text" {
			return "", badParam(fmt.Sprintf("%s[%d].type", field, j), "%q: only text parts are supported", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}
