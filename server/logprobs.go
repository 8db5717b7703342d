package server

import "github.com/loomlm/loom/core"

// completionLogprobs is the `logprobs` object of a /v1/completions choice, or of one streamed
// chunk of it. TopLogprobs stays nil (null) unless the request asked for top tokens. Where
// nothing predicts a token (an echoed prompt's first) its log-probability is null and its top
// tokens empty.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float32           `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

func newCompletionLogprobs() *completionLogprobs {
	return &completionLogprobs{Tokens: []string{}, TokenLogprobs: []*float32{}, TextOffset: []int{}}
}

// add appends tokens ts, whose text begins at byte off of the choice's text, and returns the
// offset after them. unpredicted says that the first of ts has no details (an echoed
// prompt's first token).
func (l *completionLogprobs) add(tok core.Tokenizer, ts []core.TokenLogprobs, off int, withTop, unpredicted bool) int {
	if withTop && l.TopLogprobs == nil {
		l.TopLogprobs = []map[string]float32{}
	}
	for k, e := range ts {
		text := string(tok.TokenBytes(e.Token))
		l.Tokens = append(l.Tokens, text)
		l.TextOffset = append(l.TextOffset, off)
		off += len(text)
		if k == 0 && unpredicted {
			l.TokenLogprobs = append(l.TokenLogprobs, nil)
			if withTop { // {}, not null: typed clients (the Go SDK) read a list of objects
				l.TopLogprobs = append(l.TopLogprobs, map[string]float32{})
			}
			continue
		}
		v := e.Logprob
		l.TokenLogprobs = append(l.TokenLogprobs, &v)
		if withTop {
			top := make(map[string]float32, len(e.Top))
			for _, tp := range e.Top {
				top[string(tok.TokenBytes(tp.ID))] = tp.Value
			}
			l.TopLogprobs = append(l.TopLogprobs, top)
		}
	}
	return off
}

// chatTokenLogprob is one token of a chat choice's `logprobs.content`.
type chatTokenLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// chatLogprobsEntry is a token of `logprobs.content` with the top tokens of its step.
type chatLogprobsEntry struct {
	chatTokenLogprob
	TopLogprobs []chatTokenLogprob `json:"top_logprobs"`
}

// chatLogprobs is the `logprobs` object of a /v1/chat/completions choice (or of one streamed
// chunk of it) for tokens ts.
func chatLogprobs(tok core.Tokenizer, ts []core.TokenLogprobs) map[string]any {
	mk := func(id core.TokenID, v float32) chatTokenLogprob {
		b := tok.TokenBytes(id)
		ints := make([]int, len(b))
		for k, c := range b {
			ints[k] = int(c)
		}
		return chatTokenLogprob{Token: string(b), Logprob: v, Bytes: ints}
	}
	content := make([]chatLogprobsEntry, len(ts))
	for k, e := range ts {
		content[k] = chatLogprobsEntry{chatTokenLogprob: mk(e.Token, e.Logprob), TopLogprobs: []chatTokenLogprob{}}
		for _, tp := range e.Top {
			content[k].TopLogprobs = append(content[k].TopLogprobs, mk(tp.ID, tp.Value))
		}
	}
	return map[string]any{"content": content}
}
