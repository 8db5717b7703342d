package processors_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
)

// mirostatStep runs p on row in form f and returns the kept ids.
func mirostatStep(t *testing.T, p *processors.Mirostat, row []float32, f form) []int {
	t.Helper()
	return keptIDs(t, p, nil, row, f)
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestMirostatV2ByHand(t *testing.T) {
	// Probabilities 1/2, 1/4, 1/8, 1/16, 1/16: surprises 1, 2, 3, 4, 4 bits.
	row := lnProbs(0.5, 0.25, 0.125, 0.0625, 0.0625)
	for _, f := range forms {
		p := must(processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: 1.6, Eta: 0.1}))
		steps := []struct {
			accept core.TokenID
			kept   []int
			mu     float64 // after Accept
		}{
			// μ = 2τ = 3.2 keeps surprises ≤ 3.2: tokens 0, 1, 2; q = 4/7, 2/7, 1/7.
			// Token 1: surprise −log₂(2/7) = 1.8074; μ = 3.2 − 0.1·(1.8074 − 1.6) = 3.1793.
			{1, []int{0, 1, 2}, 3.1792645},
			// Still 0, 1, 2. Token 2: surprise log₂ 7 = 2.8074; μ = 3.1793 − 0.1207 = 3.0585.
			{2, []int{0, 1, 2}, 3.0585290},
			// Still 0, 1, 2 (3 ≤ 3.0585). Token 2 again: μ = 3.0585 − 0.1207 = 2.9378.
			{2, []int{0, 1, 2}, 2.9377935},
			// Now 3 > 2.9378: tokens 0, 1; q = 2/3, 1/3. Token 0: surprise log₂ 1.5 = 0.5850;
			// μ = 2.9378 − 0.1·(0.5850 − 1.6) = 3.0393.
			{0, []int{0, 1}, 3.0392973},
		}
		for i, s := range steps {
			if got := mirostatStep(t, p, row, f); !slices.Equal(got, s.kept) {
				t.Fatalf("%s step %d: kept %v, want %v", f, i, got, s.kept)
			}
			p.Accept(nil, s.accept)
			if !near(p.Mu(), s.mu) {
				t.Fatalf("%s step %d: μ = %.7f, want %.7f", f, i, p.Mu(), s.mu)
			}
		}
	}
	// μ below every surprise: the most likely token alone (τ = 0.4, μ = 0.8 < 1).
	p := must(processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: 0.4, Eta: 0.1}))
	for _, f := range forms {
		if got := mirostatStep(t, p, row, f); !slices.Equal(got, []int{0}) {
			t.Errorf("μ = 0.8 %s: kept %v, want [0]", f, got)
		}
	}
	// A token the last step did not keep (forced) leaves μ alone, and so does a second Accept.
	p = must(processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: 1.6, Eta: 0.1}))
	mirostatStep(t, p, row, dense)
	p.Accept(nil, 4)
	p.Accept(nil, 0)
	if p.Mu() != 3.2 {
		t.Errorf("μ = %v after a token outside the kept set, want 3.2", p.Mu())
	}
}

func TestMirostatV1ByHand(t *testing.T) {
	// Zipf logits −1.5·ln(i+1) over a vocabulary of 100: b_j = ln(p_j/p_{j+1}) = 1.5·t_j, so
	// ŝ = 1.5 exactly and ε̂ = 0.5. τ = 3, μ = 6, N = 100:
	// k = (0.5·2⁶ / (1 − 100^−0.5))^(1/1.5) = (32/0.9)^(2/3) = 35.556^(2/3) = 10.81 → 10.
	row := make([]float32, 100)
	for i := range row {
		row[i] = float32(-1.5 * math.Log(float64(i+1)))
	}
	first10 := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	for _, m := range []int{100, 5} { // ŝ is 1.5 whatever m
		for _, f := range forms {
			p := must(processors.NewMirostat(processors.MirostatConfig{Version: 1, Tau: 3, Eta: 0.1, M: m, VocabSize: 100}))
			if got := mirostatStep(t, p, row, f); !slices.Equal(got, first10) {
				t.Fatalf("m=%d %s: kept %v, want the first 10", m, f, got)
			}
			// q(0) = 1 / Σ_{i=1..10} i^−1.5 = 1/1.99534 = 0.50117: surprise 0.99663 bits;
			// μ = 6 − 0.1·(0.99663 − 3) = 6.20034.
			p.Accept(nil, 0)
			if !near(p.Mu(), 6.2003368) {
				t.Fatalf("m=%d %s: μ = %.7f, want 6.2003368", m, f, p.Mu())
			}
			// k = (0.5·2^6.20034 / 0.9)^(2/3) = 11.86 → 11.
			if got := mirostatStep(t, p, row, f); len(got) != 11 {
				t.Fatalf("m=%d %s: kept %d, want 11", m, f, len(got))
			}
		}
	}
}

// The float64 references agree with the processor on random rows over several μ.
func TestMirostatMatchesDefinition(t *testing.T) {
	for _, n := range []int{3, 60, 3000} {
		row := randomRow(randFor(n), n, 2)
		for _, tau := range []float64{0.7, 2, 4} {
			p2 := must(processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: tau, Eta: 0.1}))
			want := refMirostatV2(toF64(row), 2*tau)
			p1 := must(processors.NewMirostat(processors.MirostatConfig{Version: 1, Tau: tau, Eta: 0.1, M: 100, VocabSize: n}))
			want1, k := refMirostatV1(toF64(row), 2*tau, 100, n)
			for _, f := range forms {
				for _, tc := range []struct {
					p    *processors.Mirostat
					want []float64
				}{{p2, want}, {p1, want1}} {
					c := candidates(row, f)
					if err := tc.p.Process(nil, c); err != nil {
						t.Fatal(err)
					}
					if got, w := kept(c, n), keptOf(tc.want); !slices.Equal(got, w) {
						t.Fatalf("n=%d τ=%v %s %s: kept %d, want %d (k=%d)", n, tau, f, tc.p, len(got), len(w), k)
					}
				}
			}
		}
	}
}

func keptOf(x []float64) []int {
	var ids []int
	for i, v := range x {
		if v > math.Inf(-1) {
			ids = append(ids, i)
		}
	}
	return ids
}

// Clones are independent: μ follows each one's own tokens.
func TestMirostatClone(t *testing.T) {
	row := lnProbs(0.5, 0.25, 0.125, 0.0625, 0.0625)
	a := must(processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: 1.6, Eta: 0.1}))
	mirostatStep(t, a, row, dense)
	b := a.Clone().(*processors.Mirostat)
	a.Accept(nil, 1)
	b.Accept(nil, 2)
	if !near(a.Mu(), 3.1792645) || !near(b.Mu(), 3.2-0.1*(math.Log2(7)-1.6)) {
		t.Fatalf("μ after different tokens: %v and %v", a.Mu(), b.Mu())
	}
}

func ExampleMirostat() {
	// Version 2 with τ = 1.6 starts at μ = 3.2 bits: of probabilities 1/2, 1/4, 1/8, 1/16,
	// 1/16 (surprises 1, 2, 3, 4, 4 bits) it keeps the first three. Choosing token 1 (2/7 of the
	// kept mass, surprise 1.807) moves μ by −η·(1.807 − 1.6).
	p, _ := processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: 1.6, Eta: 0.1})
	c := core.NewCandidates(lnProbs(0.5, 0.25, 0.125, 0.0625, 0.0625))
	_ = p.Process(nil, c)
	fmt.Println(c.Len())
	p.Accept(nil, 1)
	fmt.Printf("%.4f\n", p.Mu())
	// Output:
	// 3
	// 3.1793
}
