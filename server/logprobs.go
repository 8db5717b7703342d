package server

import "github.com/loomlm/loom/core"

// resultLogprobs returns a finished sequence's per-token details in the form events stream
// them, so that a response and a stream are written by the same code.
func resultLogprobs(sq core.SequenceResult) []core.TokenLogprobs {
	out := make([]core.TokenLogprobs, len(sq.Tokens))
	for k, id := range sq.Tokens {
		out[k].Token = id
		if k < len(sq.Logprobs) {
			out[k].Logprob = sq.Logprobs[k]
		}
		if k < len(sq.TopLogprobs) {
			out[k].Top = sq.TopLogprobs[k]
		}
	}
	return out
}

// completionLogprobs is the `logprobs` object of a /v1/completions choice (or of one streamed
// chunk of it) for tokens ts, whose text begins at byte off of the choice's text; top_logprobs
// is null unless the request asked for top tokens. It returns the offset after ts.
func completionLogprobs(tok core.Tokenizer, ts []core.TokenLogprobs, off int, withTop bool) (map[string]any, int) {
	tokens := make([]string, len(ts))
	values := make([]float32, len(ts))
	offsets := make([]int, len(ts))
	var tops []map[string]float32
	if withTop {
		tops = make([]map[string]float32, len(ts))
	}
	for k, e := range ts {
		tokens[k] = string(tok.TokenBytes(e.Token))
		values[k] = e.Logprob
		offsets[k] = off
		off += len(tokens[k])
		if withTop {
			tops[k] = make(map[string]float32, len(e.Top))
			for _, tp := range e.Top {
				tops[k][string(tok.TokenBytes(tp.ID))] = tp.Value
			}
		}
	}
	out := map[string]any{"tokens": tokens, "token_logprobs": values, "text_offset": offsets, "top_logprobs": nil}
	if withTop {
		out["top_logprobs"] = tops
	}
	return out, off
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
