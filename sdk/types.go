package sdk

import (
	"fmt"
	"math"
	"slices"
)

// TokenID identifies a token in the model's vocabulary (as core.TokenID).
type TokenID = int32

// Candidate is one token of a candidate set and its logit (as core.Candidate).
type Candidate struct {
	ID    TokenID
	Logit float32
}

// Sequence is one sequence as a part sees it: its tokens (prompt and generated) and its
// generated text. Slices it returns must not be modified nor kept after the call: they may
// live in memory shared with the host.
type Sequence struct {
	index     int
	tokens    []TokenID
	promptLen int
	text      []byte
	finish    FinishReason
	logprobs  []float32 // per generated token, as appended through the Session
	sum       float64
}

// follow brings the log-probabilities up to n generated tokens: a token just appended adds lp,
// tokens taken off (Truncate) take theirs away.
func (q *Sequence) follow(n int, appended bool, lp float32) {
	switch {
	case n < len(q.logprobs):
		q.logprobs = q.logprobs[:n]
		q.sum = 0
		for _, v := range q.logprobs {
			q.sum += float64(v)
		}
	case n > len(q.logprobs):
		for len(q.logprobs) < n-1 {
			q.logprobs = append(q.logprobs, 0) // not appended through this session
		}
		if !appended {
			lp = 0
		}
		q.logprobs = append(q.logprobs, lp)
		q.sum += float64(lp)
	}
}

// Index is the sequence's index in its request (sample i of n, or beam i).
func (q *Sequence) Index() int { return q.index }

// Tokens returns prompt and generated tokens.
func (q *Sequence) Tokens() []TokenID { return q.tokens }

// PromptLen is the number of prompt tokens at the start of Tokens.
func (q *Sequence) PromptLen() int { return q.promptLen }

// Generated returns the generated tokens.
func (q *Sequence) Generated() []TokenID { return q.tokens[min(q.promptLen, len(q.tokens)):] }

// NumGenerated is len(Generated()).
func (q *Sequence) NumGenerated() int { return len(q.Generated()) }

// Text returns the generated text so far (the last character may be incomplete).
func (q *Sequence) Text() []byte { return q.text }

// FinishReason is why the sequence ended, or "" while it runs (strategies only).
func (q *Sequence) FinishReason() FinishReason { return q.finish }

// Finished reports whether the sequence has ended (strategies only).
func (q *Sequence) Finished() bool { return q.finish != "" }

// SumLogprob is the summed log-probability of the tokens a strategy appended to the sequence
// through its Session, as given to Append or chosen by StepGreedy and StepSample (a fork
// starts with its parent's; Truncate keeps the sum over the tokens left).
func (q *Sequence) SumLogprob() float64 { return q.sum }

// Processor is a logits processor, the plugin-side counterpart of core.LogitsProcessor: it
// reshapes one sequence's next-token distribution at one step.
type Processor interface {
	// Name is the part's type name; a pipeline names it "<plugin name>.<Name>" (or just the
	// plugin's name when the plugin serves one processor).
	Name() string
	Process(seq *Sequence, c *Candidates) error
}

// BatchProcessor is a Processor that handles all rows of a step at once; the sdk calls
// ProcessBatch instead of Process for each row when it is implemented.
type BatchProcessor interface {
	Processor
	ProcessBatch(seqs []*Sequence, cands []*Candidates) error
}

// FinishReason says why a sequence ended (as core.FinishReason). A stopping criterion may use
// its own reasons.
type FinishReason string

// The finish reasons loom's built-in parts use.
const (
	FinishLength     FinishReason = "length"
	FinishEOS        FinishReason = "eos"
	FinishStopToken  FinishReason = "stop_token"
	FinishStopString FinishReason = "stop_string"
	FinishError      FinishReason = "error"
)

// Stop is a stopping criterion's verdict (as core.Stop); the zero value means "continue".
type Stop struct {
	Reason FinishReason
	Detail string
	// CutText cuts the generated text to its first TextEnd bytes.
	CutText bool
	TextEnd int
}

// StoppingCriterion decides after each appended token whether a sequence is done (as
// core.StoppingCriterion).
type StoppingCriterion interface {
	Name() string
	Check(seq *Sequence) Stop
}

// TextHolder is implemented by criteria that match text: the host keeps back the last
// HoldBack() bytes of a running sequence's streamed text (as core.TextHolder).
type TextHolder interface {
	HoldBack() int
}

// Documented parts describe themselves for `loom plugins check`.
type Documented interface {
	Doc() string
}

// Needs says what a processor reads each step; see NeedsDeclarer.
type Needs struct {
	kind needKind
	n    int
}

type needKind int

const (
	needLogits needKind = iota
	needTop
	needHistory
)

var (
	// NeedsLogits: the processor reads the logits (dense, or the host's candidate set when it
	// is already sparse). The default.
	NeedsLogits = Needs{kind: needLogits}
	// NeedsHistory: the processor reads only the token history and text; it may only Ban and
	// AddBias. Nothing vocabulary-sized crosses the process boundary.
	NeedsHistory = Needs{kind: needHistory}
)

// NeedsTop: the processor reads only the n most likely candidates, sorted; the host drops the
// others first (as a top-k of n would).
func NeedsTop(n int) Needs { return Needs{kind: needTop, n: max(n, 1)} }

// NeedsDeclarer is implemented by processors that do not need the whole logits row.
type NeedsDeclarer interface {
	Needs() Needs
}

// Candidates is the next-token distribution of one sequence at one step, as logits, in the
// two forms of core.Candidates: dense (Dense()[id] is the logit of token id) or sparse (items,
// possibly sorted by descending logit and truncated). A logit of -Inf bans its token.
//
// Changes reach the host in the cheapest form: Ban and AddBias travel as a short list; rows
// changed through Dense or Items are read back whole.
type Candidates struct {
	dense  []float32
	items  []Candidate
	sorted bool
	buf    []Candidate // item storage; in shared memory, the host's space for this row
	noLogs bool        // NeedsHistory: the logits are not available

	denseChanged bool
	itemsChanged bool
	editIDs      []TokenID
	editDeltas   []float32
	probs        []float32
}

func (c *Candidates) reset() {
	c.dense, c.items, c.sorted, c.noLogs = nil, nil, false, false
	c.denseChanged, c.itemsChanged = false, false
	c.editIDs, c.editDeltas = c.editIDs[:0], c.editDeltas[:0]
}

// HasLogits reports whether the logits are available (false for NeedsHistory processors).
func (c *Candidates) HasLogits() bool { return !c.noLogs }

// IsDense reports whether the set is dense.
func (c *Candidates) IsDense() bool { return c.dense != nil }

// Dense returns the whole-vocabulary logits while the set is dense, nil otherwise. Writes
// change the set; calling Dense makes the host read the whole row back.
func (c *Candidates) Dense() []float32 {
	if c.dense != nil {
		c.denseChanged = true
	}
	return c.dense
}

// Len is the vocabulary size when dense, the item count when sparse.
func (c *Candidates) Len() int {
	if c.dense != nil {
		return len(c.dense)
	}
	return len(c.items)
}

// Sorted reports whether the set is sparse and sorted by descending logit.
func (c *Candidates) Sorted() bool { return c.dense == nil && c.sorted }

// Items returns the set as (id, logit) items, converting a dense set first (in id order).
// Writes to the items change the set; to drop or reorder items build the new list in the
// returned slice (or in Buffer) and call SetItems.
func (c *Candidates) Items() []Candidate {
	if c.noLogs {
		return nil
	}
	if c.dense != nil {
		buf := c.Buffer(len(c.dense))
		for i, v := range c.dense {
			buf[i] = Candidate{ID: TokenID(i), Logit: v}
		}
		c.SetItems(buf, false)
	}
	c.itemsChanged = true
	return c.items
}

// Buffer returns scratch space for n items, backed by the set's own storage (see
// core.Candidates.Buffer).
func (c *Candidates) Buffer(n int) []Candidate {
	if cap(c.buf) < n {
		nb := make([]Candidate, n)
		copy(nb, c.items)
		c.buf = nb
		if c.items != nil {
			c.items = nb[:len(c.items)]
		}
	}
	return c.buf[:n]
}

// SetItems makes the set sparse with the given items; sorted states whether they are in
// descending logit order.
func (c *Candidates) SetItems(items []Candidate, sorted bool) {
	if c.noLogs {
		return
	}
	c.dense = nil
	c.items = items
	c.sorted = sorted
	c.itemsChanged = true
}

// MarkUnsorted records that logits of a sparse set changed in a way that may break its order.
func (c *Candidates) MarkUnsorted() { c.sorted = false }

// Sort makes the set sparse and sorted by descending logit (ties by ascending id).
func (c *Candidates) Sort() {
	items := c.Items()
	if c.sorted {
		return
	}
	slices.SortFunc(items, func(a, b Candidate) int {
		switch {
		case a.Logit > b.Logit:
			return -1
		case a.Logit < b.Logit:
			return 1
		}
		return int(a.ID) - int(b.ID)
	})
	c.sorted = true
}

// Logit returns the logit of token id and whether the set contains it.
func (c *Candidates) Logit(id TokenID) (float32, bool) {
	if c.dense != nil {
		if id < 0 || int(id) >= len(c.dense) {
			return 0, false
		}
		return c.dense[id], true
	}
	for _, it := range c.items {
		if it.ID == id {
			return it.Logit, true
		}
	}
	return 0, false
}

// ID returns the token id of entry i (i itself when dense).
func (c *Candidates) ID(i int) TokenID {
	if c.dense != nil {
		return TokenID(i)
	}
	return c.items[i].ID
}

// Ban gives token id a logit of -Inf. It is the way a NeedsHistory processor changes the
// distribution, and the cheapest way for any processor.
func (c *Candidates) Ban(id TokenID) { c.AddBias(id, float32(math.Inf(-1))) }

// AddBias adds delta to the logit of token id.
func (c *Candidates) AddBias(id TokenID, delta float32) {
	c.editIDs = append(c.editIDs, id)
	c.editDeltas = append(c.editDeltas, delta)
	if c.dense != nil {
		if id >= 0 && int(id) < len(c.dense) {
			c.dense[id] += delta
		}
		return
	}
	for i := range c.items {
		if c.items[i].ID == id {
			c.items[i].Logit += delta
			c.sorted = false
		}
	}
}

// Probs computes the softmax of the set aligned with Dense or Items, and the log of its
// normaliser. It fails on NaN or +Inf and when every token is banned.
func (c *Candidates) Probs() (probs []float32, logZ float32, err error) {
	var logits []float32
	if c.dense != nil {
		logits = c.dense
	} else {
		if cap(c.probs) < len(c.items) {
			c.probs = make([]float32, len(c.items))
		}
		logits = c.probs[:len(c.items)]
		for i, it := range c.items {
			logits[i] = it.Logit
		}
	}
	if len(logits) == 0 {
		return nil, 0, fmt.Errorf("no candidates")
	}
	m := float32(math.Inf(-1))
	for i, v := range logits {
		if v != v || math.IsInf(float64(v), 1) {
			return nil, 0, fmt.Errorf("invalid logit %v at entry %d", v, i)
		}
		m = max(m, v)
	}
	if math.IsInf(float64(m), -1) {
		return nil, 0, fmt.Errorf("every candidate is banned")
	}
	if cap(c.probs) < len(logits) {
		c.probs = make([]float32, len(logits))
	}
	probs = c.probs[:len(logits)]
	var sum float64
	for i, v := range logits {
		e := math.Exp(float64(v - m))
		probs[i] = float32(e)
		sum += e
	}
	for i := range probs {
		probs[i] = float32(float64(probs[i]) / sum)
	}
	return probs, m + float32(math.Log(sum)), nil
}
