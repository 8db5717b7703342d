package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"

	"github.com/loomlm/loom/core"
)

// modelObject is a pipeline as GET /v1/models lists it.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (e *entry) object() modelObject {
	return modelObject{ID: e.name, Object: "model", Created: e.created, OwnedBy: "loom"}
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	list := make([]modelObject, 0, len(s.pipelines))
	for _, e := range s.pipelines {
		list = append(list, e.object())
	}
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": list})
}

// handleModel answers GET /v1/models/{model}: one pipeline, as the list has it (OpenAI's
// "retrieve model").
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	e, err := s.lookup(r.PathValue("model"))
	if err != nil {
		s.fail(w, "models", err)
		return
	}
	writeJSON(w, http.StatusOK, e.object())
}

// tokenizeRequest is the body of POST /tokenize, in vLLM's shape (and llama-server's, whose
// content and add_special stand for prompt and add_special_tokens): a prompt, or chat
// messages rendered as a chat request renders them, its tools and the fields that decide
// what it renders or refuses (tool_choice, parallel_tool_calls, reasoning_format,
// chat_template_kwargs) included, tokenized with the pipeline's tokenizer.
type tokenizeRequest struct {
	Model             string            `json:"model"`
	Prompt            *string           `json:"prompt"`
	Content           *string           `json:"content"`
	Messages          []chatMessage     `json:"messages"`
	Tools             []json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	ReasoningFormat   *string           `json:"reasoning_format"`
	// ChatTemplateKwargs: see chatRequest.
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
	// AddSpecialTokens (AddSpecial) adds the model's BOS (and EOS where it wants one) around
	// the text: by default for a prompt, as a completion request does, and not for messages
	// rendered by the model's chat template, which writes them itself.
	AddSpecialTokens *bool `json:"add_special_tokens"`
	AddSpecial       *bool `json:"add_special"`
}

// detokenizeRequest is the body of POST /detokenize: token ids back to text.
type detokenizeRequest struct {
	Model  string         `json:"model"`
	Tokens []core.TokenID `json:"tokens"`
}

func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	var body tokenizeRequest
	res, err := s.tokenize(w, r, &body)
	if err != nil {
		s.fail(w, "tokenize", err)
		return
	}
	s.metrics.request("tokenize", http.StatusOK)
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) tokenize(w http.ResponseWriter, r *http.Request, body *tokenizeRequest) (map[string]any, error) {
	if err := s.decode(w, r, body); err != nil {
		return nil, err
	}
	e, err := s.entryOf(body.Model)
	if err != nil {
		return nil, err
	}
	if body.Content != nil {
		if body.Prompt != nil {
			return nil, badParam("content", "give either prompt or content (llama-server's name for it), not both")
		}
		body.Prompt = body.Content
	}
	if body.AddSpecial != nil {
		if body.AddSpecialTokens != nil {
			return nil, badParam("add_special", "give either add_special_tokens or add_special (llama-server's name for it), not both")
		}
		body.AddSpecialTokens = body.AddSpecial
	}
	var text string
	addSpecial, parseSpecial := true, false
	switch {
	case body.Prompt != nil && body.Messages != nil:
		return nil, badParam("messages", "give either prompt or messages, not both")
	case body.Prompt != nil:
		for _, f := range []struct {
			param string
			set   bool
		}{{"tools", body.Tools != nil}, {"tool_choice", body.ToolChoice != nil}, {"parallel_tool_calls", body.ParallelToolCalls != nil},
			{"reasoning_format", body.ReasoningFormat != nil}, {"chat_template_kwargs", body.ChatTemplateKwargs != nil}} {
			if f.set {
				return nil, badParam(f.param, "only with messages")
			}
		}
		text = *body.Prompt
	case body.Messages != nil:
		// The chat request these messages would make, rendered and refused as it would be.
		prompt, templated, _, _, err := renderChat(e, &chatRequest{Messages: body.Messages, Tools: body.Tools, ToolChoice: body.ToolChoice,
			ParallelToolCalls: body.ParallelToolCalls, ReasoningFormat: body.ReasoningFormat, ChatTemplateKwargs: body.ChatTemplateKwargs})
		if err != nil {
			return nil, err
		}
		text, addSpecial, parseSpecial = prompt, !templated, templated
	default:
		return nil, badParam("prompt", "missing: give prompt (a string) or messages")
	}
	if body.AddSpecialTokens != nil {
		addSpecial = *body.AddSpecialTokens
	}
	tok := e.model.tok
	ids, err := tok.Encode(text, core.EncodeOptions{AddSpecial: addSpecial, ParseSpecial: parseSpecial})
	if err != nil {
		return nil, badParam(map[bool]string{true: "prompt", false: "messages"}[body.Prompt != nil], "%v", err)
	}
	if ids == nil {
		ids = []core.TokenID{}
	}
	return map[string]any{"tokens": ids, "count": len(ids), "max_model_len": e.model.raw.Config().ContextLength}, nil
}

func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	var body detokenizeRequest
	err := s.decode(w, r, &body)
	var e *entry
	if err == nil {
		e, err = s.entryOf(body.Model)
	}
	if err == nil && body.Tokens == nil {
		err = badParam("tokens", "missing: give the token ids to turn into text")
	}
	if err == nil {
		n := e.model.tok.VocabSize()
		for i, id := range body.Tokens {
			if id < 0 || int(id) >= n {
				err = badParam(fmt.Sprintf("tokens[%d]", i), "%d is not a token of model %q (its vocabulary has %d)", id, e.name, n)
				break
			}
		}
	}
	if err != nil {
		s.fail(w, "detokenize", err)
		return
	}
	s.metrics.request("detokenize", http.StatusOK)
	text := e.model.tok.Decode(body.Tokens)
	writeJSON(w, http.StatusOK, map[string]any{"prompt": text, "content": text}) // vLLM's name, and llama-server's
}
