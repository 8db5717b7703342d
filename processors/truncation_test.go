package processors_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
)

// Hand-computed cases and float64 cross-checks of top-nσ, epsilon, eta, dynamic temperature
// and the top-p boundary switch.

func TestNewSamplerConstructionErrors(t *testing.T) {
	nanF, infF := math.NaN(), math.Inf(1)
	cases := []struct {
		name  string
		build func() error
		param string
	}{
		{"top_n_sigma negative", func() error { _, err := processors.NewTopNSigma(-1); return err }, "n"},
		{"top_n_sigma NaN", func() error { _, err := processors.NewTopNSigma(nanF); return err }, "n"},
		{"top_n_sigma Inf", func() error { _, err := processors.NewTopNSigma(infF); return err }, "n"},
		{"epsilon zero", func() error { _, err := processors.NewEpsilonCutoff(0, 1); return err }, "epsilon"},
		{"epsilon one", func() error { _, err := processors.NewEpsilonCutoff(1, 1); return err }, "epsilon"},
		{"epsilon min_keep", func() error { _, err := processors.NewEpsilonCutoff(0.1, 0); return err }, "min_keep"},
		{"eta NaN", func() error { _, err := processors.NewEtaCutoff(nanF, 1); return err }, "epsilon"},
		{"eta min_keep", func() error { _, err := processors.NewEtaCutoff(0.1, -1); return err }, "min_keep"},
		{"dynatemp t", func() error { _, err := processors.NewDynamicTemperature(-1, 0.5, 1); return err }, "t"},
		{"dynatemp delta", func() error { _, err := processors.NewDynamicTemperature(1, -0.5, 1); return err }, "delta"},
		{"dynatemp exponent", func() error { _, err := processors.NewDynamicTemperature(1, 0.5, infF); return err }, "exponent"},
		{"xtc threshold", func() error { _, err := processors.NewXTC(0, 0.5, 1); return err }, "threshold"},
		{"xtc probability", func() error { _, err := processors.NewXTC(0.1, 1.5, 1); return err }, "probability"},
		{"xtc min_keep", func() error { _, err := processors.NewXTC(0.1, 0.5, 0); return err }, "min_keep"},
		{"mirostat version", func() error {
			_, err := processors.NewMirostat(processors.MirostatConfig{Version: 3, Tau: 5})
			return err
		}, "version"},
		{"mirostat tau", func() error {
			_, err := processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: -1})
			return err
		}, "tau"},
		{"mirostat eta", func() error {
			_, err := processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: 5, Eta: nanF})
			return err
		}, "eta"},
		{"mirostat m", func() error {
			_, err := processors.NewMirostat(processors.MirostatConfig{Version: 1, Tau: 5, Eta: 0.1, M: 1, VocabSize: 100})
			return err
		}, "m"},
		{"dry multiplier", func() error {
			_, err := processors.NewDRY(processors.DRYConfig{Multiplier: -1, Base: 1.75}, nil)
			return err
		}, "multiplier"},
		{"dry base", func() error {
			_, err := processors.NewDRY(processors.DRYConfig{Multiplier: 0.8, Base: 0.5}, nil)
			return err
		}, "base"},
		{"dry allowed_length", func() error {
			_, err := processors.NewDRY(processors.DRYConfig{Multiplier: 0.8, Base: 1.75, AllowedLength: -1}, nil)
			return err
		}, "allowed_length"},
		{"dry penalty_last_n", func() error {
			_, err := processors.NewDRY(processors.DRYConfig{Multiplier: 0.8, Base: 1.75, LastN: -2}, nil)
			return err
		}, "penalty_last_n"},
		{"dry empty breaker", func() error {
			_, err := processors.NewDRY(processors.DRYConfig{Multiplier: 0.8, Base: 1.75, SequenceBreakers: []string{"\n", ""}}, testTok)
			return err
		}, "sequence_breakers[1]"},
		{"top_p boundary", func() error { _, err := processors.ParseBoundary("strict"); return err }, "boundary"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantParamError(t, c.build(), c.param) })
	}
}

// keptIDs runs p on row in form f and returns the ids kept (logit above -Inf), ascending.
func keptIDs(t *testing.T, p core.LogitsProcessor, seq *core.Sequence, row []float32, f form) []int {
	t.Helper()
	c := candidates(row, f)
	if err := p.Process(seq, c); err != nil {
		t.Fatal(err)
	}
	checkSorted(t, c)
	if f == sparseSorted && c.IsDense() {
		t.Fatal("a sorted set came back dense")
	}
	return kept(c, len(row))
}

func TestTopNSigmaByHand(t *testing.T) {
	// Logits 4, 2, 0, −2 and one banned token (left out of the moments):
	// mean = (4 + 2 + 0 − 2)/4 = 1; deviations 3, 1, −1, −3; σ² = (9 + 1 + 1 + 9)/4 = 5;
	// σ = √5 ≈ 2.236.
	row := []float32{4, 2, 0, -2, ninf}
	for _, tc := range []struct {
		n    float64
		want []int
	}{
		{0.5, []int{0}},        // 4 − 1.118 = 2.882: only 4
		{1, []int{0, 1}},       // 4 − 2.236 = 1.764: 4 and 2
		{2, []int{0, 1, 2}},    // 4 − 4.472 = −0.472: 4, 2 and 0
		{3, []int{0, 1, 2, 3}}, // 4 − 6.708 = −2.708: every token not banned
		{0, []int{0, 1, 2, 3}}, // disabled
		{1e-9, []int{0}},       // the most likely token is always kept
	} {
		p := must(processors.NewTopNSigma(tc.n))
		for _, f := range forms {
			if got := keptIDs(t, p, nil, row, f); !slices.Equal(got, tc.want) {
				t.Errorf("n=%v %s: kept %v, want %v", tc.n, f, got, tc.want)
			}
		}
	}
	// Scale invariance: dividing by a temperature first keeps the same set.
	temp := must(processors.NewTemperature(0.37))
	p := must(processors.NewTopNSigma(1))
	c := candidates(row, dense)
	if err := (core.Chain{temp, p}).Process(nil, c); err != nil {
		t.Fatal(err)
	}
	if got := kept(c, len(row)); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("after temperature 0.37: kept %v, want [0 1]", got)
	}
}

// checkAgainst compares a filter with its float64 reference on random rows in every form,
// skipping tokens within tol of the reference's cut (which float32 may decide either way).
func checkAgainst(t *testing.T, name string, p core.LogitsProcessor, ref func(x []float64) []float64, near func(x []float64, i int) bool) {
	t.Helper()
	r := rand.New(rand.NewPCG(71, 72))
	checked := 0
	for _, n := range []int{1, 2, 7, 100, 1000, 5000} {
		for _, sigma := range []float64{0.3, 1, 3} {
			row := randomRow(r, n, sigma)
			if n > 3 {
				row[2] = ninf
			}
			want := ref(toF64(row))
			for _, f := range forms {
				c := candidates(row, f)
				if err := p.Process(nil, c); err != nil {
					t.Fatalf("%s n=%d: %v", name, n, err)
				}
				checkSorted(t, c)
				got := logitsByID(c, n)
				for i := range got {
					if math.IsInf(want[i], -1) != (got[i] == ninf) && !near(toF64(row), i) {
						t.Fatalf("%s n=%d σ=%v %s: token %d kept=%v, want %v", name, n, sigma, f, i, got[i] > ninf, want[i] > math.Inf(-1))
					}
				}
				checked++
			}
		}
	}
	if checked < 50 {
		t.Fatalf("%s: only %d cases", name, checked)
	}
}

func TestTopNSigmaMatchesDefinition(t *testing.T) {
	for _, n := range []float64{0.5, 1, 2.5} {
		checkAgainst(t, fmt.Sprint("top_n_sigma ", n), must(processors.NewTopNSigma(n)),
			func(x []float64) []float64 { return refTopNSigma(x, n) },
			func(x []float64, i int) bool { return math.Abs(x[i]-nSigmaCut(x, n)) < 1e-4 })
	}
}

// nSigmaCut is max − n·σ over the entries above -Inf.
func nSigmaCut(x []float64, n float64) float64 {
	var fin []float64
	for _, v := range x {
		if v > math.Inf(-1) {
			fin = append(fin, v)
		}
	}
	var mean, ss float64
	for _, v := range fin {
		mean += v / float64(len(fin))
	}
	for _, v := range fin {
		ss += (v - mean) * (v - mean)
	}
	return slices.Max(fin) - n*math.Sqrt(ss/float64(len(fin)))
}

func TestEpsilonAndEtaByHand(t *testing.T) {
	// Probabilities exactly 0.5, 0.3, 0.15, 0.04, 0.01 (logits ln p).
	row := lnProbs(0.5, 0.3, 0.15, 0.04, 0.01)
	// H = −Σ p ln p = 0.5·0.6931 + 0.3·1.2040 + 0.15·1.8971 + 0.04·3.2189 + 0.01·4.6052
	//   = 0.3466 + 0.3612 + 0.2846 + 0.1288 + 0.0461 = 1.1671 nats; e^−H = 0.3113.
	cases := []struct {
		name    string
		p       core.LogitsProcessor
		want    []int
		comment string
	}{
		{"epsilon 0.05", must(processors.NewEpsilonCutoff(0.05, 1)), []int{0, 1, 2}, "p ≥ 0.05"},
		{"epsilon 0.2", must(processors.NewEpsilonCutoff(0.2, 1)), []int{0, 1}, "p ≥ 0.2"},
		{"epsilon 0.6", must(processors.NewEpsilonCutoff(0.6, 1)), []int{0}, "nothing reaches 0.6: the most likely kept"},
		{"epsilon 0.6 min_keep 3", must(processors.NewEpsilonCutoff(0.6, 3)), []int{0, 1, 2}, "the 3 most likely kept"},
		// η = min(0.1, √0.1 · 0.3113) = min(0.1, 0.3162·0.3113 = 0.0984) = 0.0984.
		{"eta 0.1", must(processors.NewEtaCutoff(0.1, 1)), []int{0, 1, 2}, "p ≥ 0.0984"},
		// η = min(0.3, 0.5477·0.3113 = 0.1705) = 0.1705.
		{"eta 0.3", must(processors.NewEtaCutoff(0.3, 1)), []int{0, 1}, "p ≥ 0.1705"},
		// η = min(0.02, 0.1414·0.3113 = 0.0440) = 0.02: here ε itself is the cutoff.
		{"eta 0.02", must(processors.NewEtaCutoff(0.02, 1)), []int{0, 1, 2, 3}, "p ≥ 0.02"},
	}
	for _, tc := range cases {
		for _, f := range forms {
			if got := keptIDs(t, tc.p, nil, row, f); !slices.Equal(got, tc.want) {
				t.Errorf("%s (%s) %s: kept %v, want %v", tc.name, tc.comment, f, got, tc.want)
			}
		}
	}
	// Exactly min_keep tokens: among logits tied with the min_keep-th, the lower ids (transformers
	// would keep all three tied ones).
	tied := []float32{3, 1, 1, 1, -4}
	p := must(processors.NewEpsilonCutoff(0.5, 2))
	for _, f := range forms {
		if got := keptIDs(t, p, nil, tied, f); !slices.Equal(got, []int{0, 1}) {
			t.Errorf("ties %s: kept %v", f, got)
		}
	}
}

func TestEpsilonAndEtaMatchDefinition(t *testing.T) {
	nearCut := func(cut func(x []float64) float64) func(x []float64, i int) bool {
		return func(x []float64, i int) bool {
			lse := math.Log(sumExp(x))
			return math.Abs(x[i]-(lse+math.Log(cut(x)))) < 1e-4
		}
	}
	for _, eps := range []float64{3e-4, 0.01, 0.2} {
		for _, minKeep := range []int{1, 5} {
			checkAgainst(t, fmt.Sprint("epsilon ", eps, minKeep), must(processors.NewEpsilonCutoff(eps, minKeep)),
				func(x []float64) []float64 { return refEpsilon(x, eps, minKeep) },
				nearCut(func([]float64) float64 { return eps }))
			checkAgainst(t, fmt.Sprint("eta ", eps, minKeep), must(processors.NewEtaCutoff(eps, minKeep)),
				func(x []float64) []float64 { return refEta(x, eps, minKeep) },
				nearCut(func(x []float64) float64 { return math.Min(eps, math.Sqrt(eps)*math.Exp(-refEntropy(x))) }))
		}
	}
}

func sumExp(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += math.Exp(v)
	}
	return s
}

func TestDynamicTemperatureByHand(t *testing.T) {
	// p = 0.75, 0.25 (logits ln 3, 0): H = 0.75·ln(4/3) + 0.25·ln 4 = 0.2158 + 0.3466 = 0.5623
	// nats; Ĥ = H / ln 2 = 0.8113. With T = 1, δ = 0.5: T_lo = 0.5, T_hi = 1.5.
	row := []float32{float32(math.Log(3)), 0}
	for _, tc := range []struct {
		exponent, want float64
	}{
		{1, 1.0986123 / 1.3112781}, // T' = 0.5 + 1·0.8113 = 1.3113: ln 3 / 1.3113 = 0.8378
		{2, 1.0986123 / 1.1581722}, // T' = 0.5 + 1·0.8113² = 1.1582: ln 3 / 1.1582 = 0.9486
	} {
		p := must(processors.NewDynamicTemperature(1, 0.5, tc.exponent))
		for _, f := range forms {
			c := candidates(row, f)
			if err := p.Process(nil, c); err != nil {
				t.Fatal(err)
			}
			got := logitsByID(c, 2)
			if math.Abs(float64(got[0])-tc.want) > 1e-5 || got[1] != 0 {
				t.Errorf("exponent %v %s: logits %v, want [%.6f 0]", tc.exponent, f, got, tc.want)
			}
		}
	}
	// One token left: H = 0, T' = max(0, 0.3 − 0.5) = 0, so greedy keeps only it.
	p := must(processors.NewDynamicTemperature(0.3, 0.5, 1))
	for _, f := range forms {
		if got := keptIDs(t, p, nil, []float32{ninf, 5, ninf}, f); !slices.Equal(got, []int{1}) {
			t.Errorf("zero entropy %s: kept %v", f, got)
		}
	}
	// A uniform set has Ĥ = 1 and gets T + δ: 2 / 1.5.
	p = must(processors.NewDynamicTemperature(1, 0.5, 1))
	c := candidates([]float32{2, 2, 2, 2}, dense)
	if err := p.Process(nil, c); err != nil {
		t.Fatal(err)
	}
	if got := c.Dense()[0]; math.Abs(float64(got)-2/1.5) > 1e-6 {
		t.Errorf("uniform: logit %v, want %v", got, 2/1.5)
	}
	// δ = 0 is plain temperature.
	p = must(processors.NewDynamicTemperature(2, 0, 1))
	c = candidates([]float32{2, 4}, dense)
	if err := p.Process(nil, c); err != nil {
		t.Fatal(err)
	}
	if got := c.Dense(); !slices.Equal(got, []float32{1, 2}) {
		t.Errorf("δ = 0: %v, want [1 2]", got)
	}
}

func TestDynamicTemperatureMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(73, 74))
	for _, n := range []int{3, 50, 4000} {
		row := randomRow(r, n, 2)
		row[1] = ninf
		for _, cfg := range [][3]float64{{0.8, 0.5, 1}, {1, 1, 0.5}, {0.7, 0.3, 2}} {
			p := must(processors.NewDynamicTemperature(cfg[0], cfg[1], cfg[2]))
			want, _ := refDynTemp(toF64(row), cfg[0], cfg[1], cfg[2])
			for _, f := range forms {
				c := candidates(row, f)
				if err := p.Process(nil, c); err != nil {
					t.Fatal(err)
				}
				got := logitsByID(c, n)
				for i := range got {
					if math.IsInf(want[i], -1) && got[i] == ninf {
						continue
					}
					if math.Abs(float64(got[i])-want[i]) > 1e-4*math.Max(1, math.Abs(want[i])) {
						t.Fatalf("n=%d %v %s: logit %d = %v, want %v", n, cfg, f, i, got[i], want[i])
					}
				}
			}
		}
	}
}

func TestTopPBoundaryAtExactEquality(t *testing.T) {
	// Four equal logits: each token has probability exactly 1/4. With p = 0.5 the first two
	// sum to exactly 0.5 (ties go by id: tokens 0 and 1).
	row := []float32{0, 0, 0, 0}
	for _, tc := range []struct {
		boundary processors.Boundary
		want     []int
	}{
		{processors.Inclusive, []int{0, 1}},    // 1/4 + 1/4 = 0.5 ≥ 0.5: two are enough
		{processors.Exclusive, []int{0, 1, 2}}, // 0.5 is not > 0.5: the third is kept too
	} {
		p := must(processors.NewTopPBoundary(0.5, 1, tc.boundary))
		for _, f := range forms {
			if got := keptIDs(t, p, nil, row, f); !slices.Equal(got, tc.want) {
				t.Errorf("%s %s: kept %v, want %v", tc.boundary, f, got, tc.want)
			}
		}
	}
	// Away from equality the two agree (probabilities ≈ .644, .237, .087, .032; p = 0.7).
	row = []float32{3, 1, 2, 0}
	for _, f := range forms {
		in := keptIDs(t, must(processors.NewTopPBoundary(0.7, 1, processors.Inclusive)), nil, row, f)
		ex := keptIDs(t, must(processors.NewTopPBoundary(0.7, 1, processors.Exclusive)), nil, row, f)
		if !slices.Equal(in, []int{0, 2}) || !slices.Equal(ex, in) {
			t.Errorf("%s: inclusive %v, exclusive %v, want [0 2] for both", f, in, ex)
		}
	}
	// The histogram path on a large dense row: 1024 equal logits, p = 0.25 is reached
	// exactly after 256 tokens.
	big := make([]float32, 1024)
	for _, tc := range []struct {
		boundary processors.Boundary
		want     int
	}{{processors.Inclusive, 256}, {processors.Exclusive, 257}} {
		p := must(processors.NewTopPBoundary(0.25, 1, tc.boundary))
		if got := len(keptIDs(t, p, nil, big, dense)); got != tc.want {
			t.Errorf("%s on 1024 equal logits: kept %d, want %d", tc.boundary, got, tc.want)
		}
	}
}

func ExampleTopNSigma() {
	// Logits 3, 1, 2, −1: mean 1.25, σ² = (1.75² + 0.25² + 0.75² + 2.25²)/4 = 2.1875,
	// σ ≈ 1.479, so n = 1 keeps the logits ≥ 3 − 1.479 = 1.521.
	p, _ := processors.NewTopNSigma(1)
	c := core.NewCandidates([]float32{3, 1, 2, -1})
	_ = p.Process(nil, c)
	fmt.Println(c.Items())
	// Output: [{0 3} {2 2}]
}

func ExampleEpsilonCutoff() {
	// Probabilities 0.5, 0.3, 0.15, 0.05: ε = 0.1 removes the last.
	p, _ := processors.NewEpsilonCutoff(0.1, 1)
	c := core.NewCandidates([]float32{float32(math.Log(0.5)), float32(math.Log(0.3)), float32(math.Log(0.15)), float32(math.Log(0.05))})
	_ = p.Process(nil, c)
	for _, it := range c.Items() {
		fmt.Print(it.ID, " ")
	}
	fmt.Println()
	// Output: 0 1 2
}

func ExampleEtaCutoff() {
	// Probabilities 0.5, 0.3, 0.15, 0.04, 0.01 have entropy H ≈ 1.167 nats, so with ε = 0.3
	// the cutoff is η = min(0.3, √0.3·e^−1.167) ≈ min(0.3, 0.170) = 0.170.
	p, _ := processors.NewEtaCutoff(0.3, 1)
	c := core.NewCandidates([]float32{
		float32(math.Log(0.5)), float32(math.Log(0.3)), float32(math.Log(0.15)),
		float32(math.Log(0.04)), float32(math.Log(0.01))})
	_ = p.Process(nil, c)
	for _, it := range c.Items() {
		fmt.Print(it.ID, " ")
	}
	fmt.Println()
	// Output: 0 1
}

func ExampleDynamicTemperature() {
	// p = 0.75, 0.25: normalised entropy 0.811, so T = 1 ± 0.5 gives T' = 0.5 + 0.811 = 1.311
	// and the logits ln 3, 0 become 0.838, 0.
	p, _ := processors.NewDynamicTemperature(1, 0.5, 1)
	c := core.NewCandidates([]float32{float32(math.Log(3)), 0})
	_ = p.Process(nil, c)
	fmt.Printf("%.3f\n", c.Dense())
	// Output: [0.838 0.000]
}

func ExampleNewTopPBoundary() {
	// Four equal logits, p = 0.5: two tokens sum to exactly 0.5.
	for _, b := range []processors.Boundary{processors.Inclusive, processors.Exclusive} {
		p, _ := processors.NewTopPBoundary(0.5, 1, b)
		c := core.NewCandidates([]float32{0, 0, 0, 0})
		_ = p.Process(nil, c)
		fmt.Println(b, c.Len())
	}
	// Output:
	// inclusive 2
	// exclusive 3
}

// The new samplers report what the set cannot be sampled from, in every form, and never panic.
func TestNewSamplersOnInvalidRows(t *testing.T) {
	procs := []core.LogitsProcessor{
		must(processors.NewTopNSigma(1)),
		must(processors.NewEpsilonCutoff(0.01, 1)),
		must(processors.NewEtaCutoff(0.01, 2)),
		must(processors.NewDynamicTemperature(0.8, 0.5, 1)),
		must(processors.NewXTC(0.1, 1, 1)),
		must(processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: 3, Eta: 0.1})),
		must(processors.NewMirostat(processors.MirostatConfig{Version: 1, Tau: 3, Eta: 0.1, M: 100, VocabSize: 5})),
	}
	rows := []struct {
		name string
		row  []float32
		want error
	}{
		{"NaN", []float32{1, 2, nan, 0, 3}, core.ErrInvalidLogits},
		{"+Inf", []float32{1, inf, 2, 0, 3}, core.ErrInvalidLogits},
		{"all banned", []float32{ninf, ninf, ninf, ninf, ninf}, core.ErrNoCandidates},
	}
	for _, p := range procs {
		for _, r := range rows {
			for _, f := range forms {
				if f == sparseSorted && r.name == "NaN" {
					continue // sorting a NaN row gives no meaningful order
				}
				if err := p.Process(nil, candidates(r.row, f)); !errors.Is(err, r.want) {
					t.Errorf("%s on %s row (%s): err = %v, want %v", p.Name(), r.name, f, err, r.want)
				}
			}
		}
		c := core.NewCandidates(nil)
		c.SetItems(c.Buffer(0), false)
		if err := p.Process(nil, c); err == nil {
			if _, err := core.SampleFrom(c, 0.5); !errors.Is(err, core.ErrNoCandidates) {
				t.Errorf("%s on an empty set: then sampling gives %v", p.Name(), err)
			}
		}
	}
	// DRY shifts a few logits and passes NaN and ±Inf through.
	seq := newSeq(t, 5, []core.TokenID{3, 4, 3})
	dry := must(processors.NewDRY(processors.DRYConfig{Multiplier: 1, Base: 2, AllowedLength: 1, LastN: -1}, nil))
	c := candidates([]float32{nan, inf, ninf, 0, 1}, dense)
	if err := dry.Process(seq, c); err != nil {
		t.Fatal(err)
	}
	if got := c.Dense(); got[0] == got[0] || got[1] != inf || got[2] != ninf || got[4] != 0 {
		t.Fatalf("dry on NaN/Inf: %v (token 4 follows the earlier 3: 1 − 2^0 = 0)", got)
	}
}
