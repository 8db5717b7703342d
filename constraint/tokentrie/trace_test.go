package tokentrie_test

import (
	"slices"
	"testing"

	"github.com/loomlm/loom/constraint/tokentrie"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/llama3vocab"
)

// stringRecognizer accepts the rest of a string without '"' or '\\' but for escapes \", \\
// and \n, its closing quote and then one byte of after: states 0 (in the string, where every
// other byte leaves it as it was), 1 (after an escape's '\\'), 2 (after the closing quote)
// and 3 (done). It counts the questions it is asked (CanAdvance and Advance); aliasing adds
// the reports of a parser.
type stringRecognizer struct {
	after  string
	states []int
	asked  int
}

func (r *stringRecognizer) step(b byte) int {
	switch s := r.states[len(r.states)-1]; {
	case s == 0 && b == '\\':
		return 1
	case s == 0 && b == '"':
		return 2
	case s == 0:
		return 0
	case s == 1 && (b == '"' || b == '\\' || b == 'n'):
		return 0
	case s == 2 && slices.Contains([]byte(r.after), b):
		return 3
	}
	return -1
}

func (r *stringRecognizer) CanAdvance(b byte) bool {
	r.asked++
	return r.step(b) >= 0
}

func (r *stringRecognizer) Advance(b byte) bool {
	r.asked++
	s := r.step(b)
	if s < 0 {
		return false
	}
	r.states = append(r.states, s)
	return true
}

func (r *stringRecognizer) Pop(n int) { r.states = r.states[:len(r.states)-n] }

// stays reports whether the last byte left the state as it was.
func (r *stringRecognizer) stays() bool {
	n := len(r.states)
	return n >= 2 && r.states[n-1] == r.states[n-2] && r.states[n-1] == 0
}

// aliasing is stringRecognizer reporting the bytes after which its state stays the same (an
// Aliaser and a tokentrie.StayingReporter).
type aliasing struct{ *stringRecognizer }

func (r aliasing) SameAsPreviousWithin(int) bool { return r.stays() }

func (r aliasing) StayingBytes(horizon, most int) (next, stays [4]uint64, ok bool) {
	for b := range 256 {
		c := byte(b)
		if r.step(c) < 0 {
			continue
		}
		next[b>>6] |= 1 << (b & 63)
		r.states = append(r.states, r.step(c))
		if r.stays() {
			stays[b>>6] |= 1 << (b & 63)
		}
		r.Pop(1)
	}
	return next, stays, true
}

// TestTraceReplayMatchesWalk checks walks that replay a trace against the plain walk of the
// same recogniser: the first walk of a state records its trace, the next replays it — with the
// same recogniser, and with one that reads other bytes after the closing quote (the same bytes
// and staying bytes in the string: one trace) — and each gives the plain walk's mask and step
// count, leaves nothing pushed, and asks the recogniser less than the recording did. With the
// slice of every byte but '"' and '\\', and with that of [a-z]*, where most tokens the walk
// takes at the top level are not in the slice.
func TestTraceReplayMatchesWalk(t *testing.T) {
	tok := llama3vocab.Tokenizer(t) // its tokens hold quotes and escapes at every depth
	for _, loop := range []tokentrie.Automaton{notQuote{}, classLoop{'a', 'z'}} {
		trie := tokentrie.New(tok)
		slice := trie.Slice(loop, -1)
		walk := func(after string) (mask tokentrie.Mask, steps, asked int) {
			r := &stringRecognizer{after: after, states: []int{0}}
			mask = tokentrie.NewMask(tok.VocabSize())
			steps = trie.Fill(aliasing{r}, mask, slice)
			if len(r.states) != 1 {
				t.Fatalf("%s, after %q: the walk left %d states pushed", loop.Key(), after, len(r.states)-1)
			}
			return mask, steps, r.asked
		}
		plain := func(after string) tokentrie.Mask {
			mask := tokentrie.NewMask(tok.VocabSize())
			trie.Fill(&stringRecognizer{after: after, states: []int{0}}, mask)
			return mask
		}
		_, recordSteps, recordAsked := walk(",}")
		for i, after := range []string{",}", ",}", ":", "]\n"} {
			got, steps, asked := walk(after)
			want := plain(after)
			for id := range tok.VocabSize() {
				if got.Has(core.TokenID(id)) != want.Has(core.TokenID(id)) {
					t.Fatalf("%s, walk %d, after %q: token %d %q: replayed %v, plain walk %v", loop.Key(), i, after, id, tok.TokenBytes(core.TokenID(id)), got.Has(core.TokenID(id)), want.Has(core.TokenID(id)))
				}
			}
			if after == ",}" && steps != recordSteps {
				t.Errorf("%s, walk %d: replay took %d steps, the recording %d", loop.Key(), i, steps, recordSteps)
			}
			if asked >= recordAsked {
				t.Errorf("%s, walk %d, after %q: the recogniser asked %d times replaying, %d recording: nothing replayed", loop.Key(), i, after, asked, recordAsked)
			}
		}
	}
}
