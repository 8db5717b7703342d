package core

import "time"

// Request is one generation request.
type Request struct {
	// Prompt is the text to continue. PromptTokens, when non-nil, is used instead and is not
	// re-encoded.
	Prompt       string
	PromptTokens []TokenID
	// NoSpecial stops the tokenizer from adding BOS/EOS around Prompt.
	NoSpecial bool
	// ParseSpecial recognises special tokens written in Prompt ("<|im_start|>").
	ParseSpecial bool

	// MaxNewTokens caps the tokens generated per sequence. Zero generates nothing: every
	// sequence finishes at once with reason "length".
	MaxNewTokens int
	// Seed makes the run reproducible; nil draws a random seed, reported in Result.Seed.
	Seed *uint64
	// N is the number of sequences to sample from the prompt (default 1). They share the
	// prompt's prefill.
	N int
	// IgnoreEOS keeps generating past the tokenizer's end-of-generation tokens.
	IgnoreEOS bool

	// Return says which details to compute beyond tokens and text.
	Return ReturnOptions

	// OnEvent, when set, receives every token as it is chosen (see Event). Returning an error
	// stops the request with that error.
	OnEvent func(Event) error
}

// ReturnOptions select optional details of a Result. Each costs time per token, so each is
// off unless asked for.
type ReturnOptions struct {
	// Logprobs fills Scores (log-probability of each chosen token under the processed
	// distribution) and Logprobs (its log-probability under the model's raw distribution,
	// log-softmax at temperature 1).
	Logprobs bool
	// TopLogprobs, when > 0, records the TopLogprobs most likely tokens of the raw
	// distribution at every step.
	TopLogprobs int
	// PromptLogprobs computes the raw log-probability of every prompt token given the tokens
	// before it, with the TopLogprobs most likely tokens at its position, in
	// Result.PromptLogprobs and PromptTopLogprobs (and each sequence's first Event.Prompt):
	// the likelihood of a text under the model, for scoring and perplexity. The prefill then
	// computes every prompt position, none taken from a prefix cache.
	PromptLogprobs bool
	// Trace, when > 0, records for every step the distribution after each processor: the
	// number of tokens still possible and the Trace most probable with their probabilities.
	Trace int
	// Lineage records every primitive the strategy called on the request's sequences — start,
	// fork, append, verify (speculation), truncate, finish, discard — in Result.Lineage, so
	// that a beam search can be drawn as a tree and a speculative run with its accepted and
	// rejected drafts.
	Lineage bool
}

// SeedOf returns a pointer to seed, for Request.Seed.
func SeedOf(seed uint64) *uint64 { return &seed }

// Event is one streamed step of one sequence.
type Event struct {
	// Sequence is the index of the sequence in the request (sample i, beam i).
	Sequence int
	// Token is the token chosen; Text is the text that became safe to show with it (it may
	// be empty while a multi-byte character or a possible stop string is incomplete).
	Token TokenID
	Text  string
	// Retract, when positive, withdraws the last Retract bytes of the text streamed so far for
	// this sequence before Text: a strategy truncated tokens whose text had been sent (Token
	// is then -1). Strategies that never truncate never send it.
	Retract int
	// RetractTokens, when positive, withdraws the last RetractTokens entries of Logprobs sent
	// so far for this sequence (their tokens were truncated; Token is then -1).
	RetractTokens int
	// Prompt, on each sequence's first event when Return.PromptLogprobs is set, lists the
	// prompt's tokens with their raw details (Logprob and Top; the first token, which nothing
	// predicts, has none), as Result.PromptLogprobs and PromptTopLogprobs hold them.
	Prompt []TokenLogprobs
	// Logprobs, when Return.Logprobs or Return.TopLogprobs is set, lists the sequence's
	// tokens whose details became final with this event, in order: a token's entry comes once
	// its text has been streamed (in this event's Text or an earlier one) and its raw details
	// are known (a token appended with no row waits for the Forward that fills them), and a
	// sequence's last event lists every token left. A sequence's entries over all its events,
	// less those retracted, are its SequenceResult's Tokens, Scores, Logprobs and TopLogprobs.
	Logprobs []TokenLogprobs
	// Score is the token's log-probability under the processed distribution (zero unless
	// Return.Logprobs).
	Score float32
	// Finished is set on a sequence's last event, with the reason.
	Finished     bool
	FinishReason FinishReason
	// Trace is the step's record of what every processor did (when Return.Trace is set and
	// the token was chosen from a processed row; nil otherwise).
	Trace *TraceStep
}

// TokenLogprobs are the recorded details of one generated token (see ReturnOptions), as an
// Event streams them.
type TokenLogprobs struct {
	Token TokenID
	// Score is the token's log-probability after processing and Logprob under the raw model
	// (both zero unless Return.Logprobs); Top the raw distribution's most likely tokens at its
	// step (Return.TopLogprobs).
	Score, Logprob float32
	Top            []TokenProb
}

// pairDetails pairs tokens[i] with the details recorded for it at index from+i of scores,
// logprobs and tops (each may be shorter, or nil: what is missing stays zero).
func pairDetails(tokens []TokenID, from int, scores, logprobs []float32, tops [][]TokenProb) []TokenLogprobs {
	out := make([]TokenLogprobs, len(tokens))
	for i, id := range tokens {
		out[i].Token = id
		if g := from + i; g < len(scores) {
			out[i].Score = scores[g]
		}
		if g := from + i; g < len(logprobs) {
			out[i].Logprob = logprobs[g]
		}
		if g := from + i; g < len(tops) {
			out[i].Top = tops[g]
		}
	}
	return out
}

// TokenLogprobs returns the sequence's tokens with their details, as its events stream them
// (Event.Logprobs): nil when the request asked for no log-probabilities (ReturnOptions.
// Logprobs, TopLogprobs), as its events carry none.
func (sq SequenceResult) TokenLogprobs() []TokenLogprobs {
	if sq.Logprobs == nil && sq.TopLogprobs == nil {
		return nil
	}
	return pairDetails(sq.Tokens, 0, sq.Scores, sq.Logprobs, sq.TopLogprobs)
}

// PromptTokenLogprobs returns the prompt's tokens with their details (ReturnOptions.
// PromptLogprobs), as each sequence's first event lists them (Event.Prompt): nil when the
// request did not ask for them, or their prefill failed.
func (r *Result) PromptTokenLogprobs() []TokenLogprobs {
	if r.PromptLogprobs == nil {
		return nil
	}
	return pairDetails(r.PromptTokens, 0, nil, r.PromptLogprobs, r.PromptTopLogprobs)
}

// PromptTexts returns the texts of the prompt's tokens (their bytes as tok has them), beside
// their details, for a reader that shows them (loom run --json, the workbench); nil when the
// request did not ask for the prompt's details.
func (r *Result) PromptTexts(tok Tokenizer) []string {
	if r.PromptLogprobs == nil {
		return nil
	}
	texts := make([]string, len(r.PromptTokens))
	for i, id := range r.PromptTokens {
		texts[i] = string(tok.TokenBytes(id))
	}
	return texts
}

// Result is the outcome of a request.
type Result struct {
	// Sequences are the returned sequences: the n samples in order, or the beams best first.
	Sequences []SequenceResult `json:"sequences"`
	// PromptTokens is the encoded prompt.
	PromptTokens []TokenID `json:"prompt_tokens"`
	// PromptLogprobs[i] is the raw log-probability of PromptTokens[i] given the tokens before
	// it, and PromptTopLogprobs[i] the most likely tokens at its position (when
	// Return.PromptLogprobs is set). The first token has nothing before it: its entries are 0
	// and nil.
	PromptLogprobs    []float32     `json:"prompt_logprobs,omitempty"`
	PromptTopLogprobs [][]TokenProb `json:"prompt_top_logprobs,omitempty"`
	// CachedPromptTokens are the prompt positions the model took from its cache of earlier
	// sequences (prefix reuse) instead of computing them; 0 for a model without such a cache.
	CachedPromptTokens int `json:"cached_prompt_tokens,omitempty"`
	// Seed is the seed the request ran with (drawn at random when the request had none).
	Seed uint64 `json:"seed"`
	// GeneratedTokens counts tokens appended over all sequences.
	GeneratedTokens int     `json:"generated_tokens"`
	Timings         Timings `json:"timings"`
	// Stats holds the strategy's counters (drafted and accepted tokens, forwards, …).
	Stats Stats `json:"stats"`
	// Lineage is every primitive the strategy called, in order (when Return.Lineage is set).
	Lineage []LineageEvent `json:"lineage,omitempty"`
}

// SequenceResult is one generated sequence.
type SequenceResult struct {
	Index int `json:"index"`
	// Tokens are the generated ids (the prompt excluded; a final EOS included).
	Tokens []TokenID `json:"tokens"`
	// Text is the generated text, cut before a matched stop string unless it was asked to be
	// kept.
	Text string `json:"text"`
	// Scores[i] is the log-probability of Tokens[i] after processing; Logprobs[i] under the
	// raw model; TopLogprobs[i] the raw top tokens of that step (see ReturnOptions).
	Scores      []float32     `json:"scores,omitempty"`
	Logprobs    []float32     `json:"logprobs,omitempty"`
	TopLogprobs [][]TokenProb `json:"top_logprobs,omitempty"`
	// FinishReason says why the sequence ended; FinishDetail what matched.
	FinishReason FinishReason `json:"finish_reason"`
	FinishDetail string       `json:"finish_detail,omitempty"`
	// SumLogprob and Score are set by ranking strategies (beam search): summed log-probability
	// and the score used to rank (possibly length-normalised).
	SumLogprob float64 `json:"sum_logprob,omitempty"`
	Score      float64 `json:"score,omitempty"`
	// Trace is the per-step record asked for by ReturnOptions.Trace.
	Trace []TraceStep `json:"trace,omitempty"`
}

// TraceStep records what every processor did to one step's distribution.
type TraceStep struct {
	Step   int     `json:"step"`
	Chosen TokenID `json:"chosen"`
	// Text is the chosen token's text (its bytes; a token that ends inside a UTF-8 character
	// shows as U+FFFD in JSON).
	Text   string       `json:"text"`
	Stages []TraceStage `json:"stages"`
}

// TraceStage is the distribution after one processor (the first stage, "model", is the raw
// distribution).
type TraceStage struct {
	Processor string `json:"processor"`
	// Kept is the number of tokens with non-zero probability.
	Kept int `json:"kept"`
	// Top are the most probable tokens with their probabilities.
	Top []TokenProb `json:"top"`
}

// Timings of a request.
type Timings struct {
	Prefill time.Duration `json:"prefill_ns"`
	Decode  time.Duration `json:"decode_ns"`
	Total   time.Duration `json:"total_ns"`
	// PrefillTokensPerSecond and DecodeTokensPerSecond are derived rates.
	PrefillTokensPerSecond float64 `json:"prefill_tokens_per_second"`
	DecodeTokensPerSecond  float64 `json:"decode_tokens_per_second"`
}

// Stats are a strategy's counters. Forwards is maintained by the Session; the rest by the
// strategies that use them.
type Stats struct {
	// Forwards counts batched Model.Forward calls.
	Forwards int `json:"forwards"`
	// DraftForwards counts forwards of a speculative strategy's draft model.
	DraftForwards int `json:"draft_forwards,omitempty"`
	// Drafted and Accepted count speculative tokens proposed and kept.
	Drafted  int `json:"drafted,omitempty"`
	Accepted int `json:"accepted,omitempty"`
	// AcceptanceRate is Accepted / Drafted (filled in the Result).
	AcceptanceRate float64 `json:"acceptance_rate,omitempty"`
	// DraftK counts a speculative strategy's steps by the number of tokens they drafted:
	// DraftK[k] steps drafted k (0: a plain decoding step).
	DraftK []int `json:"draft_k,omitempty"`
	// ForcedTokens counts tokens a strategy appended without a model step because a
	// processor allowed only them (Session.Forced).
	ForcedTokens int `json:"forced_tokens,omitempty"`
}
