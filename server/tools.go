package server

import (
	"cmp"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/loomlm/loom/chat"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/reasoning"
	"github.com/loomlm/loom/toolcall"
)

// toolUse is what a chat request's tools ask of its replies.
type toolUse struct {
	raw   []json.RawMessage
	tools []toolcall.Tool
	// choice is tool_choice: "none" (the tools are shown to the model, its replies are text),
	// "auto" (a reply may call them: it is read for calls, and a call it opens is held to the
	// tools by a lazy tool_calls processor), "required" (a reply is one or more calls, held
	// to that from its start) or "function" (a call of only).
	choice   string
	only     string
	parallel bool
	format   toolcall.Format
	// think is the constraint's think parameter: "none", or how the replies' thinking
	// block comes before their calls (thinkUse.mode).
	think string
}

// newToolUse reads a chat request's tools, tool_choice and parallel_tool_calls; it returns
// nil when the request has no tools.
func newToolUse(body *chatRequest) (*toolUse, error) {
	hasChoice := len(body.ToolChoice) > 0 && string(body.ToolChoice) != "null"
	if len(body.Tools) == 0 {
		switch {
		case hasChoice && strings.TrimSpace(string(body.ToolChoice)) != `"none"`:
			return nil, badParam("tool_choice", "needs tools")
		case body.ParallelToolCalls != nil:
			return nil, badParam("parallel_tool_calls", "needs tools")
		}
		return nil, nil
	}
	tools, err := toolcall.ParseTools(body.Tools)
	if err != nil {
		var fe *toolcall.FieldError
		if errors.As(err, &fe) {
			return nil, badParam(fe.Field, "%s", fe.Msg)
		}
		return nil, badParam("tools", "%v", err)
	}
	u := &toolUse{raw: body.Tools, tools: tools, choice: "auto", parallel: body.ParallelToolCalls == nil || *body.ParallelToolCalls}
	if hasChoice {
		var s string
		var named struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		switch {
		case json.Unmarshal(body.ToolChoice, &s) == nil:
			if s != "none" && s != "auto" && s != "required" {
				return nil, badParam("tool_choice", "%q: must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": …}}", s)
			}
			u.choice = s
		case json.Unmarshal(body.ToolChoice, &named) == nil && named.Type == "function" && named.Function.Name != "":
			u.choice, u.only = "function", named.Function.Name
			if !u.has(u.only) {
				return nil, badParam("tool_choice.function.name", "%q is not one of the tools", u.only)
			}
		default:
			return nil, badParam("tool_choice", "must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": …}}")
		}
	}
	return u, nil
}

func (u *toolUse) has(name string) bool {
	for _, t := range u.tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// reads reports whether replies are read for calls (tool_choice other than none).
func (u *toolUse) reads() bool { return u != nil && u.choice != "none" }

// holds reports whether the replies must be calls (tool_choice required or a function).
func (u *toolUse) holds() bool { return u != nil && (u.choice == "required" || u.choice == "function") }

// constraint is the processor that holds the replies' calls to the tools' schemas: the whole
// reply with tool_choice required or a function, the calls a reply opens (lazily) with auto;
// nil with none.
func (u *toolUse) constraint() *pipeline.PartSpec {
	if !u.reads() {
		return nil
	}
	tools, _ := json.Marshal(u.raw)
	return &pipeline.PartSpec{Type: "tool_calls", Path: "request field tools",
		Params: map[string]any{"tools": string(tools), "format": u.format.String(), "tool": u.only, "parallel": u.parallel, "lazy": !u.holds(), "think": cmp.Or(u.think, "none")}}
}

// check compiles the constraint's grammar, so that a schema loom cannot enforce is a 400
// naming the tool's parameters (the pipeline's build takes the same grammar from
// toolcall's cache).
func (u *toolUse) check() error {
	_, err := u.format.Compile(u.tools, u.only, u.parallel)
	var fe *toolcall.FieldError
	if errors.As(err, &fe) {
		return badParam(fe.Field, "%s", fe.Msg)
	}
	return err
}

// reply reads a reply: its content (nil when the reply is only calls) and its calls as
// OpenAI's tool_calls, none when the reply is not read for calls or makes none.
func (u *toolUse) reply(text string) (content any, calls []map[string]any) {
	if !u.reads() {
		return text, nil
	}
	c, found := u.format.Parse(text, u.tools)
	if len(found) == 0 {
		return text, nil
	}
	if c != "" {
		content = c
	}
	for _, call := range found {
		// A fresh id, never the one a reply wrote (a model may copy one from the conversation).
		id := newCallID()
		if u.format == toolcall.Mistral {
			id = newMistralCallID() // Mistral's templates take ids of nine letters and digits only
		}
		calls = append(calls, map[string]any{"id": id, "type": "function",
			"function": map[string]any{"name": call.Name, "arguments": call.Arguments}})
	}
	return content, calls
}

// replyIn is reply for a reply whose thinking block stays in its text (t not separating,
// reasoning_format "none"): calls are read from the answer after the block only, and the
// block is content before them.
func (u *toolUse) replyIn(text string, t *thinkUse) (content any, calls []map[string]any) {
	block := ""
	if t != nil && !t.separate {
		_, answer := t.tags.Split(text, t.open)
		block, text = text[:len(text)-len(answer)], answer // the answer ends the text
	}
	content, calls = u.reply(text)
	if len(calls) > 0 && block != "" {
		c, _ := content.(string)
		content = block + c
	}
	return content, calls
}

// newCallID returns a new tool call id.
func newCallID() string { return "call_" + strings.ToLower(rand.Text()[:24]) }

// newMistralCallID returns a new tool call id of nine letters and digits, as Mistral's chat
// templates require of the calls they are sent back.
func newMistralCallID() string { return rand.Text()[:9] }

// chatMessages checks a request's messages and returns them as the chat package takes them.
func chatMessages(msgs []chatMessage) ([]chat.Message, error) {
	if len(msgs) == 0 {
		return nil, badParam("messages", "must not be empty")
	}
	out := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		at := fmt.Sprintf("messages[%d]", i)
		cm := chat.Message{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID}
		switch m.Role {
		case "system", "user", "assistant":
		case "developer":
			cm.Role = "system"
		case "tool":
			if m.ToolCallID == "" {
				return nil, badParam(at+".tool_call_id", "required in a tool message: the id of the call it answers")
			}
		default:
			return nil, badParam(at+".role", "%q: must be system, developer, user, assistant or tool", m.Role)
		}
		if len(m.ToolCalls) > 0 && m.Role != "assistant" {
			return nil, badParam(at+".tool_calls", "only an assistant message calls tools")
		}
		if m.ReasoningContent != nil {
			if m.Role != "assistant" {
				return nil, badParam(at+".reasoning_content", "only an assistant message has reasoning")
			}
			cm.ReasoningContent = *m.ReasoningContent
		}
		if m.ToolCallID != "" && m.Role != "tool" {
			return nil, badParam(at+".tool_call_id", "only a tool message answers a call")
		}
		for j, c := range m.ToolCalls {
			switch {
			case c.Type != "" && c.Type != "function":
				return nil, badParam(fmt.Sprintf("%s.tool_calls[%d].type", at, j), "%q: must be function", c.Type)
			case c.Function.Name == "":
				return nil, badParam(fmt.Sprintf("%s.tool_calls[%d].function.name", at, j), "missing")
			}
			cm.ToolCalls = append(cm.ToolCalls, chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		if len(m.Content) == 0 || string(m.Content) == "null" {
			if m.Role != "assistant" || len(m.ToolCalls) == 0 && m.Refusal == nil {
				return nil, badParam(at+".content", "missing (only an assistant message that calls tools may have none)")
			}
			cm.NoContent = true
		} else {
			text, err := messageText(i, m)
			if err != nil {
				return nil, err
			}
			cm.Content = text
		}
		out[i] = cm
	}
	return out, nil
}

// heldReply is a streamed chat choice whose reply is read for tool calls: text that may be
// the start of a call is held back until it is known not to be, and the calls are sent once
// the choice has finished and its reply parses (as the response without stream would have
// them). The choice's streamed content and calls are those of the response without stream.
type heldReply struct {
	text     strings.Builder // the whole reply so far
	sent     int             // bytes of it sent as content
	logprobs []core.TokenLogprobs
	// opensAt is where the reply's first call opens (-1 until found), searched how much of
	// the reply has been looked through for it: each event looks only at what it added.
	opensAt, searched int
}

// releasable is how much of the reply may be sent as content before it is finished: text
// that cannot be part of a call, nor the whitespace before one.
func (h *heldReply) releasable(f toolcall.Format) int {
	all := h.text.String()
	open := f.Opener()
	if f == toolcall.Llama3 {
		if t := strings.TrimLeft(all, reasoning.Blanks); t == "" || strings.HasPrefix(t, open) {
			return h.sent // the reply may be the call: hold it all
		}
		return len(all)
	}
	if h.opensAt < 0 {
		from := max(0, h.searched-len(open)+1)
		if i := strings.Index(all[from:], open); i >= 0 {
			h.opensAt = from + i
		}
		h.searched = len(all)
	}
	end := len(all)
	if h.opensAt >= 0 {
		end = h.opensAt
	} else {
		for k := min(len(open)-1, len(all)); k > 0; k-- {
			if strings.HasSuffix(all, open[:k]) {
				end = len(all) - k
				break
			}
		}
	}
	return max(h.sent, len(strings.TrimRight(all[:end], reasoning.Blanks)))
}

// sendDelta sends a chunk of chat choice i: delta (with the role on the choice's first
// chunk), the logprobs of the tokens it completes, and finish (nil until the last).
func (st *streamer) sendDelta(i int, delta map[string]any, logprobs []core.TokenLogprobs, finish any) error {
	if !st.roleSet[i] {
		st.roleSet[i] = true
		delta["role"] = "assistant"
	}
	var lp any
	if len(logprobs) > 0 {
		lp = chatLogprobs(st.j.pipe.Tokenizer, logprobs)
	}
	return st.send(st.chunk([]map[string]any{{"index": i, "delta": delta, "logprobs": lp, "finish_reason": finish}}, nil))
}

// toolEvent streams ev of a chat choice read for tool calls.
func (st *streamer) toolEvent(ev core.Event) error {
	h := st.held[ev.Sequence]
	if h == nil {
		h = &heldReply{opensAt: -1}
		st.held[ev.Sequence] = h
	}
	h.text.WriteString(ev.Text)
	h.logprobs = append(h.logprobs, ev.Logprobs...)
	send := func(delta map[string]any, finish any) error {
		lp := h.logprobs
		h.logprobs = nil
		return st.sendDelta(ev.Sequence, delta, lp, finish)
	}
	all := h.text.String()
	if !ev.Finished {
		if end := h.releasable(st.j.tools.format); end > h.sent {
			text := all[h.sent:end]
			h.sent = end
			return send(map[string]any{"content": text}, nil)
		}
		if !st.roleSet[ev.Sequence] {
			return send(map[string]any{"content": ""}, nil)
		}
		return nil
	}
	fr := finishReason(ev.FinishReason)
	content, calls := st.j.tools.replyIn(all, st.j.think)
	if len(calls) == 0 {
		rest := all[h.sent:]
		h.sent = len(all)
		return send(map[string]any{"content": rest}, fr)
	}
	if c, _ := content.(string); len(c) > h.sent {
		if err := send(map[string]any{"content": c[h.sent:]}, nil); err != nil {
			return err
		}
		h.sent = len(c)
	}
	for i, call := range calls {
		call["index"] = i // a streamed call's place among the choice's calls
	}
	if err := send(map[string]any{"tool_calls": calls}, nil); err != nil {
		return err
	}
	if fr == "stop" {
		fr = "tool_calls"
	}
	return send(map[string]any{}, fr)
}
