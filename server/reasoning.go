package server

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/reasoning"
)

// thinkUse is how a chat request's replies think: the model's template thinks in a block
// (reasoning.Detect), which the reply begins with or, open, begins inside (the prompt opened
// it). With separate (reasoning_format other than "none") their thinking is returned as
// reasoning_content, apart from the content; either way the request's constraints leave it
// free (mode).
type thinkUse struct {
	tags     reasoning.Tags
	open     bool
	separate bool
}

// mode is the think parameter of the request's constraints (see pipeline's think).
func (t *thinkUse) mode() string {
	switch {
	case t == nil:
		return "none"
	case t.open:
		return "open"
	}
	return "start"
}

// split separates a whole reply; without thinking, or not separate, the reply is all
// answer.
func (t *thinkUse) split(reply string) (thinking, answer string) {
	if !t.separates() {
		return "", reply
	}
	return t.tags.Split(reply, t.open)
}

// separates reports whether replies' thinking is returned apart from their content.
func (t *thinkUse) separates() bool { return t != nil && t.separate }

// tokens counts the tokens of a reply that think: those written inside its thinking block,
// its tags included.
func (t *thinkUse) tokens(tok core.Tokenizer, ids []core.TokenID) int {
	s := t.tags.NewSplitter(t.open)
	n := 0
	for _, id := range ids {
		was := s.Thinking()
		thinking, _ := s.Write(string(tok.TokenBytes(id)))
		if was || s.Thinking() || thinking != "" {
			n++
		}
	}
	return n
}

// usage is usageOf(results…) with, for a chat whose replies think, the tokens of their
// thinking (OpenAI's completion_tokens_details.reasoning_tokens).
func (j *job) usage(results ...*core.Result) usage {
	u := usageOf(results...)
	if j.think == nil {
		return u
	}
	u.CompletionTokensDetails = &completionDetails{}
	for _, res := range results {
		for _, sq := range res.Sequences {
			u.CompletionTokensDetails.ReasoningTokens += j.think.tokens(j.pipe.Tokenizer, sq.Tokens)
		}
	}
	return u
}

// reservedVars are the template variables loom sets itself, which chat_template_kwargs may
// not replace.
var reservedVars = []string{"messages", "tools", "add_generation_prompt", "bos_token", "eos_token", "raise_exception", "strftime_now"}

// templateVars reads chat_template_kwargs: further variables for the model's chat template
// (enable_thinking, …), as vLLM's and llama-server's APIs take them.
func templateVars(raw map[string]json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	vars := make(map[string]any, len(raw))
	for _, k := range slices.Sorted(maps.Keys(raw)) { // the first fault by name
		if slices.Contains(reservedVars, k) {
			return nil, badParam("chat_template_kwargs."+k, "is set by the server and cannot be replaced")
		}
		var x any
		if err := json.Unmarshal(raw[k], &x); err != nil {
			return nil, badParam("chat_template_kwargs."+k, "is not JSON: %v", err)
		}
		vars[k] = x
	}
	return vars, nil
}

// thinkOf finds how a chat request's replies think: with the model's own template, one that
// thinks (reasoning.Detect), and reasoning_format other than "none".
func thinkOf(e *entry, format *string, prompt string, templated bool) (*thinkUse, error) {
	f := "auto"
	if format != nil {
		f = *format
	}
	switch f {
	case "auto", "deepseek", "none":
	default:
		return nil, badParam("reasoning_format", "%q: must be auto, deepseek (both return a reasoning model's thinking as reasoning_content) or none (the thinking stays in content)", f)
	}
	if !templated {
		return nil, nil
	}
	tpl, err := e.model.template()
	if err != nil || tpl == nil {
		return nil, err
	}
	tags, ok := reasoning.Detect(tpl.Source())
	if !ok {
		return nil, nil
	}
	return &thinkUse{tags: tags, open: tags.OpenIn(prompt), separate: f != "none"}, nil
}

// thinkEvent streams the thinking of ev, a chat choice's event whose reply thinks, as a chunk
// of reasoning_content (with ev's logprobs), and returns ev with the rest: its answer text,
// for the content's stream.
func (st *streamer) thinkEvent(ev core.Event) (core.Event, error) {
	sp := st.splitters[ev.Sequence]
	if sp == nil {
		sp = st.j.think.tags.NewSplitter(st.j.think.open)
		st.splitters[ev.Sequence] = sp
	}
	thinking, answer := sp.Write(ev.Text)
	if ev.Finished {
		t, a := sp.Flush()
		thinking, answer = thinking+t, answer+a
	}
	ev.Text = answer
	if thinking == "" {
		return ev, nil
	}
	lp := ev.Logprobs
	ev.Logprobs = nil
	return ev, st.sendDelta(ev.Sequence, map[string]any{"reasoning_content": thinking}, lp, nil)
}
