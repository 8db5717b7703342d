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

// tokenizeRequest is the body of POST /tokenize (vLLM's and llama-server's extension): a
// prompt, or chat messages (with tools and chat_template_kwargs) rendered as a chat request
// renders them, tokenized with the pipeline's tokenizer.
type tokenizeRequest struct {
	Model              string                     `json:"model"`
	Prompt             *string                    `json:"prompt"`
	Messages           []chatMessage              `json:"messages"`
	Tools              []json.RawMessage          `json:"tools"`
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
	// AddSpecialTokens adds the model's BOS (and EOS where it wants one) around the text: by
	// default for a prompt, as a completion request does, and not for messages rendered by
	// the model's chat template, which writes them itself.
	AddSpecialTokens *bool `json:"add_special_tokens"`
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
	var text string
	addSpecial, parseSpecial := true, false
	switch {
	case body.Prompt != nil && body.Messages != nil:
		return nil, badParam("messages", "give either prompt or messages, not both")
	case body.Prompt != nil:
		if body.Tools != nil || body.ChatTemplateKwargs != nil {
			return nil, badParam(map[bool]string{true: "tools", false: "chat_template_kwargs"}[body.Tools != nil], "only with messages")
		}
		text = *body.Prompt
	case body.Messages != nil:
		var tu *toolUse
		if len(body.Tools) > 0 { // shown to the model, as with tool_choice "none"
			if tu, err = newToolUse(&chatRequest{Tools: body.Tools, ToolChoice: json.RawMessage(`"none"`)}); err != nil {
				return nil, err
			}
		}
		vars, err := templateVars(body.ChatTemplateKwargs)
		if err != nil {
			return nil, err
		}
		prompt, templated, err := chatPrompt(e, body.Messages, tu, vars)
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
	writeJSON(w, http.StatusOK, map[string]any{"prompt": e.model.tok.Decode(body.Tokens)})
}
