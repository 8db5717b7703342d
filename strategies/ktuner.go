package strategies

import (
	"fmt"
	"math"
	"time"
)

// KPolicy is how a speculative strategy chooses the number of tokens k it drafts each step.
type KPolicy int

const (
	// KFixed drafts k tokens every step.
	KFixed KPolicy = iota
	// KAcceptance grows k by one after a step whose drafts were all accepted and shrinks it by
	// one after a rejection, within [1, 2k].
	KAcceptance
	// KCost measures, while decoding, what a drafted token and a target forward of m rows
	// cost, keeps a running acceptance rate, and drafts the k in [0, 2k] that maximises the
	// expected tokens per second; k = 0 is plain decoding, so speculation that does not pay
	// turns itself off (and is probed again every few steps). Greedy verification still gives
	// exactly greedy output. With rejection sampling the output is distributed exactly as
	// sampling from the target, but which tokens a seed draws depends on the k chosen, and so
	// on the machine's timings: a seeded run is reproducible token for token only with the
	// fixed and acceptance policies.
	KCost
)

// ParseKPolicy reads a policy name: "fixed", "acceptance" or "cost".
func ParseKPolicy(s string) (KPolicy, error) {
	switch s {
	case "fixed":
		return KFixed, nil
	case "acceptance":
		return KAcceptance, nil
	case "cost":
		return KCost, nil
	}
	return 0, fmt.Errorf("%q: must be fixed, acceptance or cost", s)
}

// String is the policy's name as ParseKPolicy reads it.
func (p KPolicy) String() string {
	switch p {
	case KFixed:
		return "fixed"
	case KAcceptance:
		return "acceptance"
	case KCost:
		return "cost"
	}
	return fmt.Sprintf("KPolicy(%d)", int(p))
}

const (
	// tunerWeight is the weight of a new timing in the running averages of costs.
	tunerWeight = 0.2
	// acceptWeight is the weight of one draft's verdict in the running acceptance rate.
	acceptWeight = 0.05
	// tunerProbe is how often (in steps) the cost policy drafts one token more than it
	// estimates best, to refresh its measurements next to the best.
	tunerProbe = 16
	// tunerPrior is the acceptance rate assumed before any draft was checked.
	tunerPrior = 0.6
)

// kTuner is the cost policy's model: the cost of a drafted token, the cost of a target
// forward of m rows (measured for the m seen, interpolated for the others) and the running
// per-token acceptance rate. With acceptance rate a, drafting k tokens yields
// 1 + a + … + a^k tokens in expectation (the drafts kept before the first rejection, plus the
// corrected or bonus token) for k·draft + verify(k+1) seconds.
type kTuner struct {
	maxK   int
	alpha  float64   // running acceptance rate of a drafted token
	draft  float64   // seconds per drafted token; negative until measured
	verify []float64 // seconds per target forward of m rows, by m; 0 until measured
	steps  int
}

func newKTuner(maxK int) *kTuner {
	return &kTuner{maxK: maxK, alpha: tunerPrior, draft: -1, verify: make([]float64, maxK+2)}
}

func ewma(old, x float64) float64 {
	if old <= 0 {
		return x
	}
	return old + tunerWeight*(x-old)
}

// observe records a step: n drafts proposed, of which accepted were kept; draftForwards of the
// draft model's forwards, each proposing one token, took draftTime; and the target's forward of
// n+1 rows took verifyTime. A draft forward that first caught up with many tokens the draft
// had not seen (the prompt, or the tokens of steps that drafted nothing) is left out of
// draftTime and draftForwards: that cost is paid once per switch from plain decoding to
// drafting, not per drafted token, and charging it to the step's drafts made a memory-bound
// target with a cheap draft look like one where drafting never pays.
func (t *kTuner) observe(n, accepted int, draftTime time.Duration, draftForwards int, verifyTime time.Duration) {
	t.steps++
	if draftForwards > 0 {
		t.draft = ewma(max(t.draft, 0), draftTime.Seconds()/float64(draftForwards))
	}
	if n > 0 {
		for i := 0; i < accepted; i++ {
			t.alpha += acceptWeight * (1 - t.alpha)
		}
		if accepted < n {
			t.alpha -= acceptWeight * t.alpha
		}
	}
	if m := n + 1; m < len(t.verify) {
		t.verify[m] = ewma(t.verify[m], verifyTime.Seconds())
	}
}

// verifyCost is the measured or estimated cost of a target forward of m rows: measured values
// are interpolated linearly; past the last measured m the slope of the last two measured
// points continues (flat with one point, so that larger k are tried once).
func (t *kTuner) verifyCost(m int) float64 {
	if t.verify[m] > 0 {
		return t.verify[m]
	}
	lo, hi := 0, 0
	for i := m - 1; i >= 1; i-- {
		if t.verify[i] > 0 {
			lo = i
			break
		}
	}
	for i := m + 1; i < len(t.verify); i++ {
		if t.verify[i] > 0 {
			hi = i
			break
		}
	}
	switch {
	case lo > 0 && hi > 0:
		f := float64(m-lo) / float64(hi-lo)
		return t.verify[lo] + f*(t.verify[hi]-t.verify[lo])
	case hi > 0:
		return t.verify[hi] * float64(m) / float64(hi)
	case lo > 0:
		prev := 0
		for i := lo - 1; i >= 1; i-- {
			if t.verify[i] > 0 {
				prev = i
				break
			}
		}
		if prev == 0 {
			return t.verify[lo]
		}
		slope := max((t.verify[lo]-t.verify[prev])/float64(lo-prev), 0)
		return t.verify[lo] + slope*float64(m-lo)
	}
	return 0
}

// expected is the expected number of tokens a step drafting k tokens appends.
func (t *kTuner) expected(k int) float64 {
	a := min(t.alpha, 0.999)
	return (1 - math.Pow(a, float64(k+1))) / (1 - a)
}

// choose returns the k to draft next, at most room. The first step drafts one token, the
// second none, so that the cost of a row is measured cheaply; then the k with the best
// expected tokens per second, costs past the measured ones extrapolated from their slope.
func (t *kTuner) choose(room int) int {
	limit := min(t.maxK, max(room, 0))
	switch t.steps {
	case 0:
		return min(1, limit)
	case 1:
		return 0
	}
	best, bestRate := 0, 0.0
	for k := 0; k <= limit; k++ {
		cost := t.verifyCost(k+1) + float64(k)*max(t.draft, 0)
		if cost <= 0 {
			return k // never measured: try it
		}
		if r := t.expected(k) / cost; r > bestRate {
			best, bestRate = k, r
		}
	}
	// Every tunerProbe steps, one more token than the best is drafted, so that the costs next
	// to the best are measured again and the acceptance rate keeps being checked (also when
	// the best is plain decoding).
	if t.steps%tunerProbe == 0 && best < limit {
		return best + 1
	}
	return best
}
