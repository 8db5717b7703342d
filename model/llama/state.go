package llama

import (
	"errors"

	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/core"
)

// state is one sequence of a Model: its cache sequence and the logits rows of its last
// forward pass.
type state struct {
	m      *Model
	seq    *cache.Sequence
	logits []float32
	rows   [][]float32
	closed bool
	reused int // positions taken from the prefix cache
}

// CachedTokens implements core.PrefixCached.
func (s *state) CachedTokens() int { return s.reused }

// CachedPrefix returns how many of tokens, following the state's own, the prefix cache holds
// now: the positions a Forward of them (all but the last, as Forward matches) would take
// from cached blocks instead of computing. server/batch sends those with a prompt's chunk.
func (s *state) CachedPrefix(tokens []core.TokenID) int { return s.seq.CachedPrefix(tokens) }

// NewState implements core.Model: an empty sequence whose keys and values live in the model's
// cache.
func (m *Model) NewState() (core.State, error) {
	m.life.RLock()
	defer m.life.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	return &state{m: m, seq: m.pool.NewSequence()}, nil
}

func (s *state) Len() int { return s.seq.Len() }

// Fork shares the sequence's cache blocks copy-on-write.
func (s *state) Fork() (core.State, error) {
	if s.closed {
		return nil, errors.New("llama: fork of a closed state")
	}
	return &state{m: s.m, seq: s.seq.Fork()}, nil
}

// Copy implements core.StateCopier: a fork whose cache blocks are all copied at once.
func (s *state) Copy() (core.State, error) {
	if s.closed {
		return nil, errors.New("llama: copy of a closed state")
	}
	c, err := s.seq.Copy()
	if err != nil {
		return nil, err
	}
	return &state{m: s.m, seq: c}, nil
}

func (s *state) Truncate(n int) error {
	if s.closed {
		return errors.New("llama: truncate of a closed state")
	}
	return s.seq.Truncate(n)
}

func (s *state) Close() {
	if !s.closed {
		s.seq.Close()
		s.closed = true
		s.m.putLogits(s.logits)
		s.logits, s.rows = nil, nil
	}
}

// setRows makes n logits rows of vocab values, reusing the state's buffer, else a closed
// state's.
func (s *state) setRows(n, vocab int) [][]float32 {
	if cap(s.logits) < n*vocab {
		s.m.putLogits(s.logits)
		s.logits = s.m.takeLogits(n * vocab)
	}
	s.logits = s.logits[:n*vocab]
	s.rows = s.rows[:0]
	for i := range n {
		s.rows = append(s.rows, s.logits[i*vocab:(i+1)*vocab:(i+1)*vocab])
	}
	return s.rows
}

// maxSpareLogits bounds the closed states' logits buffers a model keeps, and
// maxSpareLogitRows the rows of each: a state that asked for every row of a long prompt
// (a perplexity run's) leaves its buffer to the collector rather than to a one-row state.
const (
	maxSpareLogits    = 16
	maxSpareLogitRows = 16
)

// putLogits keeps a closed state's logits buffer for a new state. Beam search forks and
// closes states at every step, and a fresh vocabulary-sized buffer for each fork cost page
// faults and garbage collection: 0.5–0.6 ms a step of four beams on a 32 000-token
// vocabulary (docs/BENCHMARKS.md).
func (m *Model) putLogits(buf []float32) {
	if cap(buf) == 0 || cap(buf) > maxSpareLogitRows*m.p.VocabSize {
		return
	}
	m.spareLogits.Lock()
	if len(m.spareLogits.bufs) < maxSpareLogits {
		m.spareLogits.bufs = append(m.spareLogits.bufs, buf[:0])
	}
	m.spareLogits.Unlock()
}

// takeLogits returns a buffer of n values: a kept one that holds them, else a new one. Its
// contents are undefined; a forward writes every value of the rows it returns.
func (m *Model) takeLogits(n int) []float32 {
	m.spareLogits.Lock()
	defer m.spareLogits.Unlock()
	bufs := m.spareLogits.bufs
	for i := len(bufs) - 1; i >= 0; i-- {
		if cap(bufs[i]) >= n {
			b := bufs[i][:n]
			bufs[i] = bufs[len(bufs)-1]
			bufs[len(bufs)-1] = nil
			m.spareLogits.bufs = bufs[:len(bufs)-1]
			return b
		}
	}
	return make([]float32, n)
}
