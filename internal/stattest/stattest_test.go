package stattest

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestChiSquareSurvivalKnownValues(t *testing.T) {
	cases := []struct {
		x    float64
		df   int
		want float64
	}{
		// Critical values from standard tables (p = 0.05, 0.01, 0.001).
		{3.841458820694124, 1, 0.05},
		{5.991464547107979, 2, 0.05},
		{18.307038053275146, 10, 0.05},
		{6.634896601021214, 1, 0.01},
		{124.34211340400407, 100, 0.05},
		{29.58829844507442, 10, 0.001},
		{0, 5, 1},
	}
	for _, c := range cases {
		if got := ChiSquareSurvival(c.x, c.df); math.Abs(got-c.want) > 1e-9*c.want+1e-12 {
			t.Errorf("ChiSquareSurvival(%v, %d) = %.12g, want %v", c.x, c.df, got, c.want)
		}
	}
	// Closed forms for even df: Q(k, y) = e^−y Σ_{j<k} y^j / j!.
	for _, df := range []int{2, 4, 6, 20} {
		for _, x := range []float64{0.1, 1, 3, 7.5, 20, 60} {
			y := x / 2
			term, sum := 1.0, 0.0
			for j := 0; j < df/2; j++ {
				if j > 0 {
					term *= y / float64(j)
				}
				sum += term
			}
			want := math.Exp(-y) * sum
			if got := ChiSquareSurvival(x, df); math.Abs(got-want) > 1e-12+1e-10*want {
				t.Errorf("df=%d x=%v: %.15g, want %.15g", df, x, got, want)
			}
		}
	}
}

func TestGammaQEdges(t *testing.T) {
	if !math.IsNaN(GammaQ(0, 1)) || !math.IsNaN(GammaQ(1, -1)) {
		t.Error("invalid arguments must give NaN")
	}
	if GammaQ(3, 0) != 1 || GammaQ(3, math.Inf(1)) != 0 {
		t.Error("Q(a, 0) = 1 and Q(a, ∞) = 0")
	}
	// Continuity across the switch between series and continued fraction at x = a + 1.
	for _, a := range []float64{0.5, 2, 17.5} {
		lo, hi := GammaQ(a, a+1-1e-9), GammaQ(a, a+1+1e-9)
		if math.Abs(lo-hi) > 1e-8 {
			t.Errorf("a=%v: Q jumps from %v to %v at x = a+1", a, lo, hi)
		}
	}
}

func TestChiSquarePooling(t *testing.T) {
	probs := []float64{0.5, 0.3, 0.1, 0.05, 0.03, 0.02, 0}
	obs := []int{50, 30, 10, 5, 3, 2, 0}
	r, err := ChiSquare(obs, probs)
	if err != nil {
		t.Fatal(err)
	}
	// Expected counts 50, 30, 10, 5, 3, 2: 2+3 = 5 pool, then 5, 10, 30, 50.
	if r.Bins != 5 || r.DF != 4 || r.Statistic != 0 || r.PValue != 1 {
		t.Fatalf("exact match: %+v", r)
	}
	obs[6] = 1
	r, err = ChiSquare(obs, probs)
	if err != nil || r.PValue != 0 || r.Impossible != 6 {
		t.Fatalf("impossible category: %+v, %v", r, err)
	}
	// A last bin short of MinExpected joins the previous one.
	r, _ = ChiSquare([]int{3, 3, 4}, []float64{0.3, 0.3, 0.4})
	if r.Bins != 1 || r.PValue != 1 {
		t.Fatalf("tiny sample: %+v", r)
	}
	if _, err := ChiSquare([]int{1}, []float64{0.5}); err == nil {
		t.Error("probabilities not summing to 1 must be an error")
	}
	if _, err := ChiSquare([]int{0, 0}, []float64{0.5, 0.5}); err == nil {
		t.Error("no observations must be an error")
	}
}

// Under the hypothesis the p-value is uniform: about 5% of samples fall below 0.05. Under a
// slightly wrong hypothesis with enough draws it is tiny.
func TestChiSquareCalibration(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	probs := make([]float64, 30)
	var sum float64
	for i := range probs {
		probs[i] = math.Exp(-float64(i) / 4)
		sum += probs[i]
	}
	for i := range probs {
		probs[i] /= sum
	}
	draw := func(n int) []int {
		obs := make([]int, len(probs))
		for range n {
			u, cum := r.Float64(), 0.0
			for i, p := range probs {
				cum += p
				if u < cum || i == len(probs)-1 {
					obs[i]++
					break
				}
			}
		}
		return obs
	}
	const trials = 400
	low := 0
	for range trials {
		res, err := ChiSquare(draw(2000), probs)
		if err != nil {
			t.Fatal(err)
		}
		if res.PValue < 0.05 {
			low++
		}
	}
	if frac := float64(low) / trials; frac < 0.02 || frac > 0.09 {
		t.Fatalf("%.3f of p-values below 0.05 under the hypothesis, want about 0.05", frac)
	}
	wrong := append([]float64(nil), probs...)
	wrong[0] -= 0.02
	wrong[1] += 0.02
	res, _ := ChiSquare(draw(20000), wrong)
	if res.PValue > 1e-6 {
		t.Fatalf("a shifted distribution passes: %v", res)
	}
}

func TestTotalVariation(t *testing.T) {
	if d := TotalVariation([]int{1, 1, 2}, []float64{0.25, 0.25, 0.5}); d != 0 {
		t.Errorf("identical: %v", d)
	}
	if d := TotalVariation([]int{1, 0}, []float64{0, 1}); d != 1 {
		t.Errorf("disjoint: %v", d)
	}
	if d := TotalVariation([]int{3, 1, 0}, []float64{0.5, 0.5}); math.Abs(d-0.25) > 1e-15 {
		t.Errorf("observed beyond probs: %v", d)
	}
}
