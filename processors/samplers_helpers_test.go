package processors_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/strategies"
	"github.com/loomlm/loom/testmodel"
)

// Helpers and float64 references for the samplers beyond the core set (top-nσ, epsilon, eta,
// dynamic temperature, XTC, mirostat, DRY). The references follow the formulas of the doc
// comments directly, without the processors' shortcuts.

// lnProbs returns logits whose softmax is exactly (up to float32) the given probabilities.
func lnProbs(ps ...float64) []float32 {
	out := make([]float32, len(ps))
	for i, p := range ps {
		out[i] = float32(math.Log(p))
	}
	return out
}

// sequences starts a request of n sequences (indices 0…n−1) with the given seed on a test
// model of the given vocabulary, holding prompt.
func sequences(t testing.TB, vocab int, prompt []core.TokenID, seed uint64, n int) []*core.Sequence {
	t.Helper()
	m, tok := testmodel.New(testmodel.Config{Words: []string{}, VocabSize: vocab, ContextLength: 1 << 20})
	p := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{}}
	s, err := core.NewSession(context.Background(), p, core.Request{
		PromptTokens: prompt, MaxNewTokens: 1 << 15, IgnoreEOS: true, Seed: core.SeedOf(seed),
	})
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := s.Start(n)
	if err != nil {
		t.Fatal(err)
	}
	return seqs
}

// pieceTokenizer is a tokenizer over a fixed list of pieces, each token decoding to its piece
// exactly (no leading space), for tests of byte-level matching across token boundaries.
type pieceTokenizer struct{ pieces []string }

func (t pieceTokenizer) Encode(text string, _ core.EncodeOptions) ([]core.TokenID, error) {
	var out []core.TokenID
	for _, w := range strings.Fields(text) {
		out = append(out, t.id(w))
	}
	return out, nil
}

func (t pieceTokenizer) id(piece string) core.TokenID {
	return core.TokenID(slices.Index(t.pieces, piece))
}

func (t pieceTokenizer) ids(pieces ...string) []core.TokenID {
	out := make([]core.TokenID, len(pieces))
	for i, p := range pieces {
		out[i] = t.id(p)
		if out[i] < 0 {
			panic("unknown piece " + p)
		}
	}
	return out
}

func (t pieceTokenizer) Decode(ids []core.TokenID) string {
	var b strings.Builder
	for _, id := range ids {
		b.Write(t.TokenBytes(id))
	}
	return b.String()
}

func (t pieceTokenizer) TokenBytes(id core.TokenID) []byte {
	if id < 3 || int(id) >= len(t.pieces) {
		return nil
	}
	return []byte(t.pieces[id])
}

func (t pieceTokenizer) Piece(id core.TokenID) string { return t.pieces[id] }
func (t pieceTokenizer) VocabSize() int               { return len(t.pieces) }
func (t pieceTokenizer) Special() core.SpecialTokens {
	return core.SpecialTokens{BOS: 1, EOS: 2, UNK: 0, PAD: -1, EndOfGeneration: []core.TokenID{2}}
}

// ---- float64 references ----

func refTopNSigma(x []float64, n float64) []float64 {
	if n == 0 {
		return slices.Clone(x)
	}
	var sum, cnt float64
	m := math.Inf(-1)
	for _, v := range x {
		if v > math.Inf(-1) {
			sum += v
			cnt++
			m = math.Max(m, v)
		}
	}
	mean := sum / cnt
	var ss float64
	for _, v := range x {
		if v > math.Inf(-1) {
			ss += (v - mean) * (v - mean)
		}
	}
	thr := m - n*math.Sqrt(ss/cnt)
	out := slices.Clone(x)
	for i, v := range x {
		if v < thr {
			out[i] = math.Inf(-1)
		}
	}
	return out
}

// refCutoff keeps tokens with p ≥ cut or among the minKeep largest logits (ties by the lower
// id).
func refCutoff(x []float64, cut float64, minKeep int) []float64 {
	probs := softmax(x)
	top := map[int]bool{}
	for _, i := range order(negated(x))[:min(minKeep, len(x))] {
		top[i] = true
	}
	out := slices.Clone(x)
	for i, p := range probs {
		if !(p >= cut || top[i]) {
			out[i] = math.Inf(-1)
		}
	}
	return out
}

func refEntropy(x []float64) float64 {
	var h float64
	for _, p := range softmax(x) {
		if p > 0 {
			h -= p * math.Log(p)
		}
	}
	return h
}

func refEpsilon(x []float64, eps float64, minKeep int) []float64 {
	return refCutoff(x, eps, minKeep)
}

func refEta(x []float64, eps float64, minKeep int) []float64 {
	eta := math.Min(eps, math.Sqrt(eps)*math.Exp(-refEntropy(x)))
	return refCutoff(x, eta, minKeep)
}

// refDynTemp returns the logits divided by the dynamic temperature and that temperature.
func refDynTemp(x []float64, t, delta, exponent float64) ([]float64, float64) {
	if len(x) <= 1 {
		return slices.Clone(x), t
	}
	norm := 0.0
	if n := finiteCount(x); n > 1 {
		norm = refEntropy(x) / math.Log(float64(n))
	}
	temp := math.Max(0, t-delta) + (t+delta-math.Max(0, t-delta))*math.Pow(norm, exponent)
	return refTemperature(x, temp), temp
}

// refXTC applies XTC's exclusion (the coin having said yes).
func refXTC(x []float64, threshold float64, minKeep int) []float64 {
	out := slices.Clone(x)
	if threshold > 0.5 {
		return out
	}
	probs := softmax(x)
	var above []int
	for i, p := range probs {
		if p >= threshold {
			above = append(above, i)
		}
	}
	if len(above) < 2 {
		return out
	}
	keep := above[0]
	for _, i := range above {
		if x[i] < x[keep] || (x[i] == x[keep] && i > keep) {
			keep = i
		}
	}
	if finiteCount(x)-(len(above)-1) < minKeep {
		return out
	}
	for _, i := range above {
		if i != keep {
			out[i] = math.Inf(-1)
		}
	}
	return out
}

func refMirostatV2(x []float64, mu float64) []float64 {
	probs := softmax(x)
	out := slices.Clone(x)
	n := 0
	for i, p := range probs {
		if p > 0 && -math.Log2(p) <= mu {
			n++
		} else {
			out[i] = math.Inf(-1)
		}
	}
	if n == 0 {
		return refTopK(x, 1)
	}
	return out
}

// refMirostatV1 returns the kept logits and k.
func refMirostatV1(x []float64, mu float64, m, vocab int) ([]float64, int) {
	probs := softmax(x)
	ids := order(negated(x))
	var num, den float64
	for j := 0; j+1 < min(m, finiteCount(x)); j++ {
		t := math.Log(float64(j+2) / float64(j+1))
		b := math.Log(probs[ids[j]] / probs[ids[j+1]])
		num += t * b
		den += t * t
	}
	s := num / den
	eps := s - 1
	kf := math.Pow(eps*math.Exp2(mu)/(1-math.Pow(float64(vocab), -eps)), 1/s)
	k := 1
	if kf >= 1 {
		k = int(math.Min(kf, float64(len(x))))
	}
	return refTopK(x, k), k
}

// refDRY applies DRY's penalties to x for the sequence toks, with breakers given as the set of
// tokens whose text contains a breaker (single-token breakers): the straightforward quadratic
// search of text-generation-webui, with the exponent clamped instead of the match capped.
func refDRY(x []float64, toks []core.TokenID, mult, base float64, allowed, lastN int, breaker func(core.TokenID) bool) []float64 {
	out := slices.Clone(x)
	if mult == 0 || lastN == 0 {
		return out
	}
	w := toks
	if lastN > 0 && len(w) > lastN {
		w = w[len(w)-lastN:]
	}
	L := len(w)
	if L == 0 || breaker(w[L-1]) {
		return out
	}
	best := map[core.TokenID]int{}
	for j := 0; j+1 < L; j++ { // match ending at j, followed by w[j+1]
		n := 0
		for n <= j && w[j-n] == w[L-1-n] && !breaker(w[L-1-n]) {
			n++
		}
		next := w[j+1]
		if n >= max(allowed, 1) && !breaker(next) && n > best[next] {
			best[next] = n
		}
	}
	maxExp := math.Inf(1)
	if base > 1 {
		maxExp = math.Floor((math.Log(math.MaxFloat32) - math.Log(mult)) / math.Log(base))
	}
	for id, n := range best {
		out[id] -= mult * math.Pow(base, math.Min(float64(n-allowed), maxExp))
	}
	return out
}

// exampleSequence returns the first sequence of a request whose prompt is toks, on a test model
// with tok's vocabulary (for examples, which have no testing.T).
func exampleSequence(tok core.Tokenizer, toks []core.TokenID) *core.Sequence {
	m, _ := testmodel.New(testmodel.Config{Words: []string{}, VocabSize: tok.VocabSize(), ContextLength: 1 << 16})
	p := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{}}
	s, err := core.NewSession(context.Background(), p, core.Request{PromptTokens: toks, MaxNewTokens: 8, Seed: core.SeedOf(1)})
	if err != nil {
		panic(err)
	}
	q, err := s.Prefill()
	if err != nil {
		panic(err)
	}
	return q
}

func randFor(n int) *rand.Rand { return rand.New(rand.NewPCG(uint64(n), 97)) }
