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

// NewState implements core.Model: an empty sequence whose keys and values live in the model's
// cache.
func (m *Model) NewState() (core.State, error) {
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
		s.logits, s.rows = nil, nil
	}
}

// setRows makes n logits rows of vocab values, reusing the state's buffer.
func (s *state) setRows(n, vocab int) [][]float32 {
	if cap(s.logits) < n*vocab {
		s.logits = make([]float32, n*vocab)
	}
	s.logits = s.logits[:n*vocab]
	s.rows = s.rows[:0]
	for i := range n {
		s.rows = append(s.rows, s.logits[i*vocab:(i+1)*vocab:(i+1)*vocab])
	}
	return s.rows
}
