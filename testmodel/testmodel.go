// Package testmodel is a small deterministic language model and its word-level tokenizer, for
// testing decoding end to end without the transformer runtime. It is not a mock: it is a real
// core.Model whose next-token logits are a fixed function of the last Order tokens — a table,
// generated once from a seed, that tests can read back exactly (Row) to compute the expected
// distribution of any processor chain.
package testmodel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/loomlm/loom/core"
)

// Special ids of the test vocabulary.
const (
	UNK core.TokenID = 0
	BOS core.TokenID = 1
	EOS core.TokenID = 2
)

// Words is the default vocabulary after the three special tokens.
var Words = strings.Fields(`the a cat dog sat on mat and ran to house big small red blue
	saw it was happy sad day night sun moon tree under over then she he they we found
	looked at little old new home garden played with ball friend said hello good bad
	very slowly quickly went came back . ,`)

// Config shapes a test model.
type Config struct {
	// Words is the vocabulary after <unk>, <s>, </s>; default Words. With VocabSize set, the
	// vocabulary is padded with tokens "w<i>" up to that size.
	Words     []string
	VocabSize int
	// Order is how many previous tokens the logits depend on (default 2).
	Order int
	// Seed selects the table (default 1).
	Seed uint64
	// Scale is the spread of the logits (default 3): larger is more peaked.
	Scale float32
	// ContextLength is the model's context window (default 256).
	ContextLength int
	// RowFunc, when set, replaces the generated table: it writes the logits that follow ctx
	// into dst (hand-built examples).
	RowFunc func(dst []float32, ctx []core.TokenID)
}

// Model is the deterministic test model. It is safe for concurrent use.
type Model struct {
	cfg      Config
	vocab    []string
	forwards atomic.Int64
	tokens   atomic.Int64
}

// New builds a test model and its tokenizer.
func New(cfg Config) (*Model, *Tokenizer) {
	if cfg.Words == nil {
		cfg.Words = Words
	}
	if cfg.Order == 0 {
		cfg.Order = 2
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Scale == 0 {
		cfg.Scale = 3
	}
	if cfg.ContextLength == 0 {
		cfg.ContextLength = 256
	}
	vocab := append([]string{"<unk>", "<s>", "</s>"}, cfg.Words...)
	for i := len(vocab); i < cfg.VocabSize; i++ {
		vocab = append(vocab, fmt.Sprintf("w%d", i))
	}
	cfg.VocabSize = len(vocab)
	m := &Model{cfg: cfg, vocab: vocab}
	return m, newTokenizer(vocab)
}

// Default returns the default test model and tokenizer (seed 1, order 2, 59 tokens).
func Default() (*Model, *Tokenizer) { return New(Config{}) }

// Name is the builtin model name tests give the default test model in pipelines.
const Name = "test"

// Open opens the default test model for a pipeline's [model] table; it has the signature of
// pipeline.ModelOpener. The test model is not part of the loom program: a test that declares
// builtin = "test" registers it first,
//
//	pipeline.RegisterBuiltinModel(testmodel.Name, testmodel.Open)
//
// It takes no options: any key is an error naming it.
func Open(options map[string]any) (core.Model, core.Tokenizer, io.Closer, error) {
	for k := range options {
		return nil, nil, nil, fmt.Errorf("%s: the test model takes no options", k)
	}
	m, t := Default()
	return m, t, nil, nil
}

// Config implements core.Model.
func (m *Model) Config() core.ModelConfig {
	return core.ModelConfig{Name: "testmodel", Architecture: "testmodel", VocabSize: m.cfg.VocabSize, ContextLength: m.cfg.ContextLength}
}

// Forwards is the number of Forward calls so far; Tokens the number of token positions run.
func (m *Model) Forwards() int64 { return m.forwards.Load() }

// Tokens is the number of token positions run through Forward so far.
func (m *Model) Tokens() int64 { return m.tokens.Load() }

// Row writes into dst (len VocabSize) the logits that follow the context ctx, exactly as
// Forward produces them, and returns dst.
func (m *Model) Row(dst []float32, ctx []core.TokenID) []float32 {
	if m.cfg.RowFunc != nil {
		m.cfg.RowFunc(dst[:m.cfg.VocabSize], ctx)
		return dst
	}
	h := m.cfg.Seed * 0x9e3779b97f4a7c15
	start := max(len(ctx)-m.cfg.Order, 0)
	for i := start; i < len(ctx); i++ {
		h = (h ^ uint64(ctx[i]+1)) * 0x100000001b3
		h ^= h >> 29
	}
	h ^= uint64(len(ctx)-start) << 56
	r := rand.New(rand.NewPCG(h, m.cfg.Seed))
	for i := range dst[:m.cfg.VocabSize] {
		dst[i] = float32(r.NormFloat64()) * m.cfg.Scale
	}
	// End of sequence is unlikely early in a sequence, so outputs have some length.
	dst[EOS] -= 2 * m.cfg.Scale
	dst[UNK] = -20
	dst[BOS] = -20
	return dst
}

type state struct {
	mu     sync.Mutex
	tokens []core.TokenID
	rows   [][]float32
	closed bool
}

// NewState implements core.Model.
func (m *Model) NewState() (core.State, error) { return &state{}, nil }

func (s *state) Len() int { return len(s.tokens) }

func (s *state) Fork() (core.State, error) {
	if s.closed {
		return nil, errors.New("testmodel: fork of a closed state")
	}
	return &state{tokens: append([]core.TokenID(nil), s.tokens...)}, nil
}

func (s *state) Truncate(n int) error {
	if n < 0 || n > len(s.tokens) {
		return fmt.Errorf("testmodel: truncate to %d of %d tokens", n, len(s.tokens))
	}
	s.tokens = s.tokens[:n]
	return nil
}

func (s *state) Close() { s.closed = true }

// Forward implements core.Model.
func (m *Model) Forward(ctx context.Context, batch []core.ForwardItem) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.forwards.Add(1)
	for i := range batch {
		it := &batch[i]
		s, ok := it.State.(*state)
		if !ok || s == nil {
			return fmt.Errorf("testmodel: batch item %d: state is not a testmodel state", i)
		}
		if s.closed {
			return fmt.Errorf("testmodel: batch item %d: state is closed", i)
		}
		if len(s.tokens)+len(it.Tokens) > m.cfg.ContextLength {
			return fmt.Errorf("testmodel: %d tokens exceed the context length %d", len(s.tokens)+len(it.Tokens), m.cfg.ContextLength)
		}
		for _, id := range it.Tokens {
			if id < 0 || int(id) >= m.cfg.VocabSize {
				return fmt.Errorf("testmodel: token %d outside the vocabulary", id)
			}
		}
		m.tokens.Add(int64(len(it.Tokens)))
		nrows := 1
		if it.AllLogits {
			nrows = len(it.Tokens)
		}
		for len(s.rows) < nrows {
			s.rows = append(s.rows, make([]float32, m.cfg.VocabSize))
		}
		first := len(it.Tokens) - nrows
		s.tokens = append(s.tokens, it.Tokens...)
		base := len(s.tokens) - len(it.Tokens)
		it.Logits = s.rows[:nrows]
		for r := 0; r < nrows; r++ {
			m.Row(s.rows[r], s.tokens[:base+first+r+1])
		}
	}
	return nil
}
