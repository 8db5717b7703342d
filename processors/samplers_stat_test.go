package processors_test

import (
	"math/rand/v2"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/stattest"
	"github.com/loomlm/loom/processors"
)

// Seeded draws through the new samplers follow the distributions their formulas give, computed
// independently in float64 (see TestSamplingMatchesTheFormulas for the method).

func topNSigmaStep(n float64) (core.LogitsProcessor, refStep) {
	return must(processors.NewTopNSigma(n)), exact(func(x []float64) []float64 { return refTopNSigma(x, n) })
}

func epsilonStep(eps float64) (core.LogitsProcessor, refStep) {
	return must(processors.NewEpsilonCutoff(eps, 1)), exact(func(x []float64) []float64 { return refEpsilon(x, eps, 1) })
}

func etaStep(eps float64) (core.LogitsProcessor, refStep) {
	return must(processors.NewEtaCutoff(eps, 1)), exact(func(x []float64) []float64 { return refEta(x, eps, 1) })
}

func dynTempStep(cfg [3]float64) (core.LogitsProcessor, refStep) {
	return must(processors.NewDynamicTemperature(cfg[0], cfg[1], cfg[2])), exact(func(x []float64) []float64 {
		y, _ := refDynTemp(x, cfg[0], cfg[1], cfg[2])
		return y
	})
}

func mirostatV2Step(tau float64) (core.LogitsProcessor, refStep) {
	// No Accept between draws: μ stays at 2τ.
	return must(processors.NewMirostat(processors.MirostatConfig{Version: 2, Tau: tau, Eta: 0.1})),
		exact(func(x []float64) []float64 { return refMirostatV2(x, 2*tau) })
}

func mirostatV1Step(tau float64) (core.LogitsProcessor, refStep) {
	return must(processors.NewMirostat(processors.MirostatConfig{Version: 1, Tau: tau, Eta: 0.1, M: 100, VocabSize: 60})),
		exact(func(x []float64) []float64 { y, _ := refMirostatV1(x, 2*tau, 100, 60); return y })
}

func xtcAlwaysStep(threshold float64) (core.LogitsProcessor, refStep) {
	return must(processors.NewXTC(threshold, 1, 1)), exact(func(x []float64) []float64 { return refXTC(x, threshold, 1) })
}

func TestNewSamplersMatchTheFormulas(t *testing.T) {
	const vocab, draws = 60, 30000
	row := randomRow(rand.New(rand.NewPCG(31, 32)), vocab, 1.6)
	// A sequence with repeats for DRY: its end "10 11 12" occurred followed by 13 and by 14.
	seq := newSeq(t, vocab, []core.TokenID{10, 11, 12, 13, 10, 11, 12}, 14, 10, 11, 12)
	dryStep := func() (core.LogitsProcessor, refStep) {
		p := must(processors.NewDRY(processors.DRYConfig{Multiplier: 0.8, Base: 1.75, AllowedLength: 2, LastN: -1}, nil))
		return p, exact(func(x []float64) []float64 {
			return refDRY(x, seq.Tokens(), 0.8, 1.75, 2, -1, func(core.TokenID) bool { return false })
		})
	}
	type stepFn = func() (core.LogitsProcessor, refStep)
	cases := []struct {
		name  string
		steps []stepFn
	}{
		{"top_n_sigma 1", []stepFn{step(topNSigmaStep, 1.0)}},
		{"top_n_sigma 2", []stepFn{step(topNSigmaStep, 2.0)}},
		{"epsilon 0.01", []stepFn{step(epsilonStep, 0.01)}},
		{"eta 0.05", []stepFn{step(etaStep, 0.05)}},
		{"dynamic_temperature", []stepFn{step(dynTempStep, [3]float64{0.8, 0.5, 1})}},
		{"dynamic_temperature exponent 2", []stepFn{step(dynTempStep, [3]float64{1.2, 0.6, 2})}},
		{"mirostat v2", []stepFn{step(mirostatV2Step, 3.0)}},
		{"mirostat v1", []stepFn{step(mirostatV1Step, 3.0)}},
		{"xtc always", []stepFn{step(xtcAlwaysStep, 0.05)}},
		{"dry", []stepFn{dryStep}},
		{"dry→top_n_sigma→xtc→dynamic_temperature", []stepFn{
			dryStep, step(topNSigmaStep, 2.0), step(xtcAlwaysStep, 0.08), step(dynTempStep, [3]float64{0.9, 0.4, 1})}},
		{"temperature→epsilon→mirostat v2", []stepFn{
			step(temperatureStep, 1.3), step(epsilonStep, 0.002), step(mirostatV2Step, 2.5)}},
		{"penalties→dry→top_k→temperature", []stepFn{
			func() (core.LogitsProcessor, refStep) { return penaltiesStep(seq, 1.2, 0.1, 0.1, 0) },
			dryStep, step(topKStep, 20), step(temperatureStep, 0.7)}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chain, ref := chainOf(tc.steps...)
			want := expected(t, row, ref)
			counts := draw(t, seq, row, chain, draws, uint64(300+i))
			checkCounts(t, counts, want)
		})
	}
}

func checkCounts(t *testing.T, counts []int, want []float64) {
	t.Helper()
	res, err := stattest.ChiSquare(counts, want)
	if err != nil {
		t.Fatal(err)
	}
	if res.Impossible >= 0 {
		t.Fatalf("drew token %d, which the chain removes", res.Impossible)
	}
	if res.PValue <= 1e-3 {
		t.Fatalf("counts do not follow the formula: %v; total variation %.4f", res, stattest.TotalVariation(counts, want))
	}
	t.Logf("%v, kept %d tokens, total variation %.4f", res, nonzero(want), stattest.TotalVariation(counts, want))
}

// XTC with probability q: the draws follow the mixture (1 − q)·p + q·p_XTC, its coins coming
// from the sequence's own stream, one per step.
func TestXTCMixture(t *testing.T) {
	const vocab, draws = 60, 30000
	row := randomRow(rand.New(rand.NewPCG(33, 34)), vocab, 1.6)
	seq := newSeq(t, vocab, []core.TokenID{5})
	for i, tc := range []struct{ threshold, probability float64 }{{0.05, 0.5}, {0.04, 0.3}, {0.02, 0.9}} {
		p := must(processors.NewXTC(tc.threshold, tc.probability, 1))
		x := toF64(row)
		plain, cut := softmax(x), softmax(refXTC(x, tc.threshold, 1))
		want := make([]float64, vocab)
		for j := range want {
			want[j] = (1-tc.probability)*plain[j] + tc.probability*cut[j]
		}
		if finiteCount(refXTC(x, tc.threshold, 1)) == vocab {
			t.Fatalf("threshold %v removes nothing from the test row", tc.threshold)
		}
		counts := draw(t, seq, row, core.Chain{p}, draws, uint64(400+i))
		checkCounts(t, counts, want)
	}
}

// A negative control for the mixture: the same draws fail against the other probability.
func TestXTCMixtureTestHasPower(t *testing.T) {
	row := randomRow(rand.New(rand.NewPCG(33, 34)), 60, 1.6)
	seq := newSeq(t, 60, []core.TokenID{5})
	x := toF64(row)
	plain, cut := softmax(x), softmax(refXTC(x, 0.05, 1))
	counts := draw(t, seq, row, core.Chain{must(processors.NewXTC(0.05, 0.5, 1))}, 30000, 400)
	wrong := make([]float64, 60)
	for j := range wrong {
		wrong[j] = 0.6*plain[j] + 0.4*cut[j]
	}
	res, err := stattest.ChiSquare(counts, wrong)
	if err != nil {
		t.Fatal(err)
	}
	if res.PValue > 1e-6 {
		t.Fatalf("probability 0.5 draws pass as 0.4: %v", res)
	}
}
