// Package stattest holds the statistics loom's tests use to check that sampling follows the
// distribution it should: Pearson's chi-square goodness-of-fit test (with pooling of small
// expected counts) and the total-variation distance between an empirical and an exact
// distribution.
package stattest

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// MinExpected is the smallest expected count a chi-square bin may have; categories below it
// are pooled (the usual rule of thumb for the chi-square approximation).
const MinExpected = 5.0

// Result is the outcome of ChiSquare.
type Result struct {
	// Statistic is Pearson's Σ (O − E)² / E over the bins; DF = bins − 1.
	Statistic float64
	DF        int
	// PValue is the probability of a statistic at least as large under the hypothesis. It is
	// 0 when a category of probability 0 was observed (Impossible says which, the first).
	PValue     float64
	Bins       int
	Impossible int
}

// String summarises the result for test failure messages.
func (r Result) String() string {
	if r.Impossible >= 0 {
		return fmt.Sprintf("category %d observed but has probability 0", r.Impossible)
	}
	return fmt.Sprintf("chi² = %.2f, df = %d, p = %.3g (%d bins)", r.Statistic, r.DF, r.PValue, r.Bins)
}

// ChiSquare tests whether observed counts could come from the category probabilities probs
// (which must sum to about 1). Categories with probability 0 must not be observed; the others
// are pooled, smallest expected counts first, into bins of expected count ≥ MinExpected. With
// fewer than two bins there is nothing to test and the p-value is 1.
func ChiSquare(observed []int, probs []float64) (Result, error) {
	if len(observed) != len(probs) {
		return Result{}, fmt.Errorf("stattest: %d observed counts for %d probabilities", len(observed), len(probs))
	}
	var n int
	var total float64
	for i, p := range probs {
		if p < 0 || math.IsNaN(p) || math.IsInf(p, 0) {
			return Result{}, fmt.Errorf("stattest: probability %d is %v", i, p)
		}
		if observed[i] < 0 {
			return Result{}, fmt.Errorf("stattest: observed count %d is negative", i)
		}
		n += observed[i]
		total += p
	}
	if n == 0 {
		return Result{}, errors.New("stattest: no observations")
	}
	if math.Abs(total-1) > 1e-6 {
		return Result{}, fmt.Errorf("stattest: probabilities sum to %v, not 1", total)
	}
	res := Result{Impossible: -1}
	type cat struct{ obs, exp float64 }
	var cats []cat
	for i, p := range probs {
		if p == 0 {
			if observed[i] > 0 {
				res.Impossible = i
				return res, nil
			}
			continue
		}
		cats = append(cats, cat{float64(observed[i]), p * float64(n)})
	}
	slices.SortFunc(cats, func(a, b cat) int {
		switch {
		case a.exp < b.exp:
			return -1
		case a.exp > b.exp:
			return 1
		}
		return 0
	})
	// Pool greedily from the smallest: a bin closes once its expected count reaches
	// MinExpected; a last bin short of it joins the one before.
	var bins []cat
	var cur cat
	for _, c := range cats {
		cur.obs += c.obs
		cur.exp += c.exp
		if cur.exp >= MinExpected {
			bins = append(bins, cur)
			cur = cat{}
		}
	}
	if cur.exp > 0 {
		if len(bins) > 0 {
			bins[len(bins)-1].obs += cur.obs
			bins[len(bins)-1].exp += cur.exp
		} else {
			bins = append(bins, cur)
		}
	}
	res.Bins = len(bins)
	for _, b := range bins {
		d := b.obs - b.exp
		res.Statistic += d * d / b.exp
	}
	res.DF = len(bins) - 1
	if res.DF < 1 {
		res.PValue = 1
		return res, nil
	}
	res.PValue = ChiSquareSurvival(res.Statistic, res.DF)
	return res, nil
}

// ChiSquareSurvival returns P(X ≥ x) for X chi-square distributed with df degrees of freedom:
// the regularised upper incomplete gamma function Q(df/2, x/2).
func ChiSquareSurvival(x float64, df int) float64 {
	if x <= 0 {
		return 1
	}
	return GammaQ(float64(df)/2, x/2)
}

// GammaQ is the regularised upper incomplete gamma function Q(a, x) = Γ(a, x) / Γ(a), for
// a > 0 and x ≥ 0: by its power series (through P = 1 − Q) for x < a + 1, by its continued
// fraction otherwise, each to about 1e-14.
func GammaQ(a, x float64) float64 {
	switch {
	case !(a > 0) || x < 0 || math.IsNaN(x):
		return math.NaN()
	case x == 0:
		return 1
	case math.IsInf(x, 1):
		return 0
	case x < a+1:
		return 1 - gammaPSeries(a, x)
	}
	return gammaQFraction(a, x)
}

// prefactor is x^a e^−x / Γ(a), in logs to avoid overflow.
func prefactor(a, x float64) float64 {
	lg, _ := math.Lgamma(a)
	return math.Exp(a*math.Log(x) - x - lg)
}

// gammaPSeries: P(a, x) = x^a e^−x / Γ(a) · Σ_{n≥0} x^n / (a (a+1) … (a+n)).
func gammaPSeries(a, x float64) float64 {
	term := 1 / a
	sum := term
	for n := 1; n < 10000; n++ {
		term *= x / (a + float64(n))
		sum += term
		if math.Abs(term) < math.Abs(sum)*1e-16 {
			break
		}
	}
	return sum * prefactor(a, x)
}

// gammaQFraction evaluates Q(a, x) = x^a e^−x / Γ(a) · 1/(x+1−a − 1(1−a)/(x+3−a − 2(2−a)/(x+5−a
// − …))) with the modified Lentz method.
func gammaQFraction(a, x float64) float64 {
	const tiny = 1e-300
	b := x + 1 - a
	c := 1 / tiny
	d := 1 / b
	h := d
	for i := 1; i < 10000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-16 {
			break
		}
	}
	return h * prefactor(a, x)
}

// TotalVariation returns the total-variation distance ½ Σ |observed(i)/N − probs(i)| between
// the empirical distribution of the counts and probs.
func TotalVariation(observed []int, probs []float64) float64 {
	var n int
	for _, o := range observed {
		n += o
	}
	if n == 0 {
		return math.NaN()
	}
	var d float64
	for i, p := range probs {
		o := 0
		if i < len(observed) {
			o = observed[i]
		}
		d += math.Abs(float64(o)/float64(n) - p)
	}
	for i := len(probs); i < len(observed); i++ {
		d += float64(observed[i]) / float64(n)
	}
	return d / 2
}
