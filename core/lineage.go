package core

// LineageOp names a primitive recorded in a Result's lineage.
type LineageOp string

// The primitives a lineage records.
const (
	// LineageStart: the first sequence, after the prompt's prefill.
	LineageStart LineageOp = "start"
	// LineageFork: Seq was forked from Parent.
	LineageFork LineageOp = "fork"
	// LineageAppend: Tokens[0] was appended to Seq, with its processed log-probability.
	LineageAppend LineageOp = "append"
	// LineageVerify: Tokens were run through Seq's model state ahead of its tokens
	// (speculative verification); the Appends that follow say how many were kept.
	LineageVerify LineageOp = "verify"
	// LineageTruncate: Seq was cut back to Len generated tokens.
	LineageTruncate LineageOp = "truncate"
	// LineageFinish: Seq ended, with Reason.
	LineageFinish LineageOp = "finish"
	// LineageDiscard: Seq was dropped (a pruned beam).
	LineageDiscard LineageOp = "discard"
	// LineageOutput: Seq is returned as Result.Sequences[Index].
	LineageOutput LineageOp = "output"
)

// LineageEvent is one primitive a strategy called on one sequence. Sequences are named by
// their index in the session (Sequence.Index), which for a beam search differs from the
// position of the returned sequences: the "output" events map one to the other.
type LineageEvent struct {
	Op  LineageOp `json:"op"`
	Seq int       `json:"seq"`
	// Parent is the sequence a fork was made from (JSON omits it when 0, as it omits every
	// zero field here).
	Parent int `json:"parent,omitempty"`
	// Tokens is the appended token, or the tokens a verification ran ahead.
	Tokens []TokenID `json:"tokens,omitempty"`
	// Texts are the texts of Tokens.
	Texts []string `json:"texts,omitempty"`
	// Logprob is an appended token's log-probability under the processed distribution (zero
	// when the strategy chose it without one).
	Logprob float32 `json:"logprob,omitempty"`
	// Len is the number of tokens Seq has generated after the primitive.
	Len int `json:"len"`
	// Reason is why a sequence finished.
	Reason FinishReason `json:"reason,omitempty"`
	// Index is an output's position in Result.Sequences.
	Index int `json:"index,omitempty"`
}

// note records a lineage event when the request asked for the lineage.
func (s *Session) note(ev LineageEvent) {
	if !s.req.Return.Lineage || s.closing {
		return
	}
	for _, id := range ev.Tokens {
		ev.Texts = append(ev.Texts, string(s.pipe.Tokenizer.TokenBytes(id)))
	}
	s.lineage = append(s.lineage, ev)
}
