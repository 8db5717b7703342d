package processors_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
)

// testTok decodes each token to its piece exactly, so breakers can be placed inside tokens and
// across them: " x:" contains ":", and " E" "N" "D!" spell "END" over three tokens.
var testTok = pieceTokenizer{pieces: []string{
	"<unk>", "<s>", "</s>", " a", " b", " c", " y", " d", "\n", " E", "N", "D!", " x:", " z", "*",
}}

var dryBreakers = []string{"\n", ":", "\"", "*", "END"}

func newDRY(t testing.TB, mult, base float64, allowed, lastN int) *processors.DRY {
	t.Helper()
	p, err := processors.NewDRY(processors.DRYConfig{
		Multiplier: mult, Base: base, AllowedLength: allowed, LastN: lastN, SequenceBreakers: dryBreakers,
	}, testTok)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// dryPenalties runs p on a zero row for a sequence holding toks and returns −logit per token.
func dryPenalties(t *testing.T, p core.LogitsProcessor, toks []core.TokenID, f form) []float32 {
	t.Helper()
	seq := newSeq(t, testTok.VocabSize(), toks)
	c := candidates(make([]float32, testTok.VocabSize()), f)
	if err := p.Process(seq, c); err != nil {
		t.Fatal(err)
	}
	if f == sparseSorted && c.Sorted() && slices.ContainsFunc(c.Items(), func(it core.Candidate) bool { return it.Logit != 0 }) {
		t.Fatal("penalised sorted set still marked sorted")
	}
	got := logitsByID(c, testTok.VocabSize())
	for i := range got {
		got[i] = -got[i]
	}
	return got
}

func TestDRYByHand(t *testing.T) {
	tk := testTok.ids
	// multiplier 0.8, base 1.75, allowed length 2: a match of ℓ tokens costs 0.8·1.75^(ℓ−2).
	cases := []struct {
		name   string
		toks   []core.TokenID
		lastN  int
		want   map[string]float32
		reason string
	}{
		{"llama.cpp's example", tk(" a", " b", " c", " c", " b", " c", " y", " a", " b", " c"), -1,
			map[string]float32{" c": 0.8 * 1.75, " y": 0.8},
			// The end "a b c" also ends at position 2, followed by c: ℓ = 3, 0.8·1.75¹ = 1.4.
			// "b c" ends at position 5, followed by y: ℓ = 2, 0.8·1.75⁰ = 0.8.
			// "c" ends at position 3, followed by b: ℓ = 1 < 2, free.
			"c: 1.4, y: 0.8"},
		{"a breaker token limits the match", tk(" a", "\n", " b", " c", " d", " a", "\n", " b", " c"), -1,
			map[string]float32{" d": 0.8},
			// "a \n b c" repeats, but only "b c" follows the last breaker: ℓ = 2, not 4.
			"d: 0.8 instead of 0.8·1.75² = 2.45"},
		{"a breaker spread over three tokens", tk(" a", " E", "N", "D!", " b", " c", " d", " a", " E", "N", "D!", " b", " c"), -1,
			map[string]float32{" d": 0.8},
			// " E" "N" "D!" spell "END": only "b c" follows it, ℓ = 2.
			"d: 0.8"},
		{"the same tokens without the breaker", tk(" a", " E", "N", " b", " c", " d", " a", " E", "N", " b", " c"), -1,
			map[string]float32{" d": 0.8 * 1.75 * 1.75 * 1.75},
			// "a E N b c" repeats whole: ℓ = 5, 0.8·1.75³ = 4.2875.
			"d: 4.2875"},
		{"a candidate containing a breaker is free", tk(" a", " b", " c", " x:", " a", " b", " c"), -1,
			map[string]float32{},
			// " x:" would extend "a b c" (ℓ = 3) but contains ":".
			"nothing"},
		{"the last token is a breaker", tk(" a", " b", " c", "*", " a", " b", " c", "*"), -1,
			map[string]float32{}, "nothing"},
		{"window of 4", tk(" a", " b", " c", " d", " a", " b", " c"), 4,
			map[string]float32{},
			// The window "d a b c" holds no earlier "c".
			"nothing"},
		{"window of 7", tk(" a", " b", " c", " d", " a", " b", " c"), 7,
			map[string]float32{" d": 0.8 * 1.75}, "d: ℓ = 3, 1.4"},
	}
	for _, tc := range cases {
		p := newDRY(t, 0.8, 1.75, 2, tc.lastN)
		for _, f := range forms {
			got := dryPenalties(t, p, tc.toks, f)
			for id, v := range got {
				want := tc.want[testTok.pieces[id]]
				if math.Abs(float64(v-want)) > 1e-6 {
					t.Errorf("%s (%s) %s: token %q penalised %v, want %v", tc.name, tc.reason, f, testTok.pieces[id], v, want)
				}
			}
		}
	}
}

func TestDRYAllowedLengthZeroAndDisabled(t *testing.T) {
	tk := testTok.ids
	// allowed length 0: the last token "a" also ends position 0, followed by b: ℓ = 1,
	// 0.8·1.75^(1−0) = 1.4. Positions matching nothing are never penalised.
	got := dryPenalties(t, newDRY(t, 0.8, 1.75, 0, -1), tk(" a", " b", " a"), dense)
	want := make([]float32, len(got))
	want[testTok.id(" b")] = 1.4
	if !slices.Equal(got, want) {
		t.Errorf("allowed 0: %v, want %v", got, want)
	}
	for _, p := range []*processors.DRY{newDRY(t, 0, 1.75, 2, -1), newDRY(t, 0.8, 1.75, 2, 0)} {
		if got := dryPenalties(t, p, tk(" a", " b", " c", " a", " b", " c"), dense); slices.ContainsFunc(got, func(v float32) bool { return v != 0 }) {
			t.Errorf("%v: penalised %v", p, got)
		}
	}
}

// The penalty cannot overflow float32: the exponent is clamped at the largest e with
// multiplier·base^e ≤ MaxFloat32.
func TestDRYExponentClamp(t *testing.T) {
	toks := make([]core.TokenID, 300)
	for i := range toks {
		toks[i] = testTok.id(" a")
	}
	// 300 "a": the end matches 299 tokens before it, followed by "a": ℓ = 299.
	for _, tc := range []struct {
		mult float64
		want float64
	}{
		{1, math.Pow(2, 127)},     // log₂(MaxFloat32) = 127.99999991 → e_max = 127
		{3, 3 * math.Pow(2, 126)}, // (ln MaxFloat32 − ln 3)/ln 2 = 126.415 → e_max = 126
	} {
		p := newDRY(t, tc.mult, 2, 0, -1)
		if got := p.Penalty(299); float64(got) != float64(float32(tc.want)) {
			t.Errorf("multiplier %v: Penalty(299) = %v, want %v", tc.mult, got, float32(tc.want))
		}
		got := dryPenalties(t, p, toks, dense)[testTok.id(" a")]
		if math.IsInf(float64(got), 0) || float64(got) != float64(float32(tc.want)) {
			t.Errorf("multiplier %v: penalty %v, want %v (finite)", tc.mult, got, float32(tc.want))
		}
	}
}

// On random sequences over a small alphabet (many repeats), DRY matches the quadratic search.
func TestDRYMatchesQuadraticSearch(t *testing.T) {
	alphabet := testTok.ids(" a", " b", " c", " y", " d", "\n", " x:")
	weights := []int{30, 30, 20, 10, 6, 2, 2}
	breaker := func(id core.TokenID) bool { return id == testTok.id("\n") || id == testTok.id(" x:") }
	r := rand.New(rand.NewPCG(81, 82))
	for trial := range 300 {
		n := 1 + r.IntN(120)
		toks := make([]core.TokenID, n)
		for i := range toks {
			k := r.IntN(100)
			j := 0
			for ; k >= weights[j]; j++ {
				k -= weights[j]
			}
			toks[i] = alphabet[j]
		}
		allowed := r.IntN(4)
		lastN := []int{-1, 1, 8, 50}[r.IntN(4)]
		p := newDRY(t, 0.8, 1.75, allowed, lastN)
		row := randomRow(r, testTok.VocabSize(), 1)
		want := refDRY(toF64(row), toks, 0.8, 1.75, allowed, lastN, breaker)
		for _, f := range forms {
			seq := newSeq(t, testTok.VocabSize(), toks)
			c := candidates(row, f)
			if err := p.Process(seq, c); err != nil {
				t.Fatal(err)
			}
			got := logitsByID(c, len(row))
			for i := range got {
				if math.Abs(float64(got[i])-want[i]) > 1e-5*math.Max(1, math.Abs(want[i])) {
					t.Fatalf("trial %d (n=%d allowed=%d last_n=%d) %s: token %d = %v, want %v\ntokens %v",
						trial, n, allowed, lastN, f, i, got[i], want[i], toks)
				}
			}
		}
	}
}

// The matches are a Z-function: linear in the window. 200 000 equal tokens, the worst case of a
// quadratic search (2·10¹⁰ comparisons), take milliseconds.
func TestDRYIsLinearInTheWindow(t *testing.T) {
	toks := make([]core.TokenID, 200000)
	for i := range toks {
		toks[i] = testTok.id(" a")
	}
	seq := sequences(t, testTok.VocabSize(), toks, 1, 1)[0]
	p := newDRY(t, 0.8, 1.75, 2, -1)
	c := candidates(make([]float32, testTok.VocabSize()), dense)
	start := time.Now()
	if err := p.Process(seq, c); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("200 000 equal tokens took %v", d)
	}
	if got := c.Dense()[testTok.id(" a")]; got != -p.Penalty(199999) {
		t.Fatalf("penalty %v, want %v", got, -p.Penalty(199999))
	}
}

func ExampleDRY() {
	// llama.cpp's illustration: the text ends with "a b c", which also occurs earlier followed by
	// "c" (a match of 3 tokens), and "b c" occurred followed by "y" (2 tokens). With allowed
	// length 2, c is penalised 0.8·1.75^(3−2) = 1.4 and y 0.8·1.75^0 = 0.8.
	tok := pieceTokenizer{pieces: []string{"<unk>", "<s>", "</s>", " a", " b", " c", " y"}}
	p, _ := processors.NewDRY(processors.DRYConfig{
		Multiplier: 0.8, Base: 1.75, AllowedLength: 2, LastN: -1, SequenceBreakers: processors.DefaultSequenceBreakers,
	}, tok)
	seq := exampleSequence(tok, tok.ids(" a", " b", " c", " c", " b", " c", " y", " a", " b", " c"))
	c := core.NewCandidates(make([]float32, 7))
	_ = p.Process(seq, c)
	fmt.Printf("%.2f\n", c.Dense())
	// Output: [0.00 0.00 0.00 0.00 0.00 -1.40 -0.80]
}
