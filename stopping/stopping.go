// Package stopping holds loom's built-in stopping criteria. Each looks at a sequence after a
// token is appended and says whether it is done; every sequence of a batch stops on its own.
package stopping

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	"github.com/loomlm/loom/core"
)

// MaxNewTokens stops a sequence once it has generated N tokens (reason "length"). The request's
// own max_new_tokens applies as well; this criterion lets a pipeline set a tighter cap.
type MaxNewTokens struct{ n int }

// NewMaxNewTokens returns the criterion; n must be at least 1.
func NewMaxNewTokens(n int) (*MaxNewTokens, error) {
	if n < 1 {
		return nil, &core.ParamError{Param: "n", Value: n, Reason: "must be at least 1"}
	}
	return &MaxNewTokens{n: n}, nil
}

// Name implements core.StoppingCriterion.
func (*MaxNewTokens) Name() string { return "max_new_tokens" }

// Check implements core.StoppingCriterion.
func (c *MaxNewTokens) Check(seq *core.Sequence) core.Stop {
	if seq.NumGenerated() >= c.n {
		return core.Stop{Reason: core.FinishLength, Detail: "max_new_tokens = " + strconv.Itoa(c.n)}
	}
	return core.Stop{}
}

// TokenSet stops a sequence when its last token is one of a set of ids. It serves two types:
// "eos" (end-of-generation ids, reason "eos") and "stop_tokens" (reason "stop_token").
type TokenSet struct {
	name   string
	reason core.FinishReason
	ids    map[core.TokenID]bool
}

// NewEOS stops on any of ids, reason "eos". The session already stops on the tokenizer's
// end-of-generation tokens unless the request ignores EOS; this adds ids (a chat model's
// "<|im_end|>", say).
func NewEOS(ids []int, vocab int) (*TokenSet, error) {
	return newTokenSet("eos", core.FinishEOS, ids, vocab)
}

// NewStopTokens stops on any of ids, reason "stop_token".
func NewStopTokens(ids []int, vocab int) (*TokenSet, error) {
	return newTokenSet("stop_tokens", core.FinishStopToken, ids, vocab)
}

func newTokenSet(name string, reason core.FinishReason, ids []int, vocab int) (*TokenSet, error) {
	if len(ids) == 0 {
		return nil, &core.ParamError{Param: "ids", Value: "[]", Reason: "must list at least one token id"}
	}
	set := make(map[core.TokenID]bool, len(ids))
	for _, id := range ids {
		if id < 0 || id >= vocab {
			return nil, &core.ParamError{Param: "ids", Value: id, Reason: fmt.Sprintf("token id outside the vocabulary [0, %d)", vocab)}
		}
		set[core.TokenID(id)] = true
	}
	return &TokenSet{name: name, reason: reason, ids: set}, nil
}

// Name implements core.StoppingCriterion.
func (c *TokenSet) Name() string { return c.name }

// Check implements core.StoppingCriterion.
func (c *TokenSet) Check(seq *core.Sequence) core.Stop {
	gen := seq.Generated()
	if len(gen) == 0 {
		return core.Stop{}
	}
	if last := gen[len(gen)-1]; c.ids[last] {
		return core.Stop{Reason: c.reason, Detail: "token " + strconv.Itoa(int(last))}
	}
	return core.Stop{}
}

// StopStrings stops a sequence when its generated text contains one of a set of strings, even
// when the string spans several tokens. The returned text ends before the stop string, or
// after it with Include. While a sequence runs, streamed text keeps back len(longest)−1 bytes so
// that the start of a stop string is never shown before it is recognised.
type StopStrings struct {
	stops   [][]byte
	include bool
	longest int
}

// NewStopStrings returns the criterion; strings must be non-empty.
func NewStopStrings(stops []string, include bool) (*StopStrings, error) {
	if len(stops) == 0 {
		return nil, &core.ParamError{Param: "strings", Value: "[]", Reason: "must list at least one string"}
	}
	c := &StopStrings{include: include}
	for _, s := range stops {
		if s == "" {
			return nil, &core.ParamError{Param: "strings", Value: s, Reason: "stop strings must not be empty"}
		}
		c.stops = append(c.stops, []byte(s))
		c.longest = max(c.longest, len(s))
	}
	return c, nil
}

// Name implements core.StoppingCriterion.
func (*StopStrings) Name() string { return "stop_strings" }

// HoldBack implements core.TextHolder.
func (c *StopStrings) HoldBack() int {
	if c.include {
		return 0
	}
	return c.longest - 1
}

// Check implements core.StoppingCriterion. Only the window where a match can newly end is
// searched: the last token's bytes and the len(stop)−1 bytes before them (an earlier match
// would have stopped the sequence before).
func (c *StopStrings) Check(seq *core.Sequence) core.Stop {
	gen := seq.Generated()
	if len(gen) == 0 {
		return core.Stop{}
	}
	text := seq.Text()
	added := len(seq.Tokenizer().TokenBytes(gen[len(gen)-1]))
	best, bestLen := -1, 0
	for _, s := range c.stops {
		from := max(len(text)-added-len(s)+1, 0)
		if i := bytes.Index(text[from:], s); i >= 0 && (best < 0 || from+i < best) {
			best, bestLen = from+i, len(s)
		}
	}
	if best < 0 {
		return core.Stop{}
	}
	end := best
	if c.include {
		end = best + bestLen
	}
	return core.Stop{Reason: core.FinishStopString, Detail: strconv.Quote(string(text[best : best+bestLen])), CutText: true, TextEnd: end}
}

// MaxTime stops a sequence once the request has run for a wall-clock duration (reason "time").
// It is checked after each token, so a step already under way finishes first.
type MaxTime struct{ limit time.Duration }

// NewMaxTime returns the criterion; seconds must be positive.
func NewMaxTime(seconds float64) (*MaxTime, error) {
	if !(seconds > 0) {
		return nil, &core.ParamError{Param: "seconds", Value: seconds, Reason: "must be positive"}
	}
	return &MaxTime{limit: time.Duration(seconds * float64(time.Second))}, nil
}

// Name implements core.StoppingCriterion.
func (*MaxTime) Name() string { return "max_time" }

// Check implements core.StoppingCriterion.
func (c *MaxTime) Check(seq *core.Sequence) core.Stop {
	if seq.Elapsed() >= c.limit {
		return core.Stop{Reason: core.FinishTime, Detail: "max_time = " + c.limit.String()}
	}
	return core.Stop{}
}
