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
	// tunerWeight is the weight of a new timing in the running average of a draft's cost.
	tunerWeight = 0.2
	// lineDecay is the weight an older verification timing keeps, per step, in the line that
	// models a verification's cost by its rows.
	lineDecay = 0.95
	// verdictDecay is the weight an older draft's verdict keeps, per verdict, in the
	// acceptance rate.
	verdictDecay = 0.97
	// priorVerdicts is how many verdicts the prior acceptance rate counts for at first: few,
	// so that the first steps' drafts soon outweigh it. The prior's weight decays with every
	// verdict as the verdicts' own do; had it stayed, it would cap the estimate below the
	// true rate (at 0.977 with every draft accepted, when it counted for two), and with it
	// the k worth drafting.
	priorVerdicts = 1
	// tunerProbe is how often (in steps) the cost policy probes what its best k's steps do
	// not measure (see choose).
	tunerProbe = 16
	// tunerPrior is the acceptance rate assumed before any draft was checked.
	tunerPrior = 0.6
)

// kTuner is the cost policy's model: the cost of a drafted token, the cost of a target
// forward of m rows and the running per-token acceptance rate. With acceptance rate a,
// drafting k tokens yields 1 + a + … + a^k tokens in expectation (the drafts kept before the
// first rejection, plus the corrected or bonus token) for k·draft + verify(k+1) seconds.
//
// verify(m) is a line through the measured cost of a one-row forward, one + s·(m−1): one is
// the running cost of the steps that drafted nothing (plain decoding), and the slope s is
// fitted by least squares to every drafting step's timing against that anchor, older steps
// weighing less (lineDecay). Every step informs the slope, whatever its m, so one slow
// forward at a rarely tried m cannot make that m look expensive for good, and costs past the
// tried m follow the measured slope. A line fitted freely to the drafting steps alone was
// unstable: they cluster around the best k, and one slow forward among them could tilt it
// until a one-row forward looked nearly free and plain decoding best. The first steps try 1,
// 0 and K drafts (K = maxK/2, the configured k), so that the line is anchored at both ends
// before it is trusted, and every other probe (see choose) is a plain step that measures the
// anchor again.
type kTuner struct {
	maxK int
	// kept and judged are the decayed counts of drafts kept and of drafts judged (a draft
	// after the first rejection is never judged).
	kept, judged float64
	prior        float64 // the prior's weight in verdicts, decaying as kept and judged do
	draft        float64 // seconds per drafted token; negative until measured
	one          float64 // seconds per one-row target forward (a plain step); negative until measured
	// Decayed sums over the drafting steps' verifications of m rows taking v seconds: (m−1)²,
	// (m−1) and (m−1)·v.
	sdd, sd, sdv float64
	steps        int
}

func newKTuner(maxK int) *kTuner {
	return &kTuner{maxK: maxK, draft: -1, one: -1, prior: priorVerdicts}
}

func ewma(old, x float64) float64 {
	if old <= 0 {
		return x
	}
	return old + tunerWeight*(x-old)
}

// observe records a step: n drafts proposed, of which accepted were kept; draftForwards of the
// draft model's forwards, each proposing one token, took draftTime; and what the step did after
// the drafts (the target's forward of n+1 rows, their processing and selection, the rollback)
// took verifyTime. A draft forward that first caught up with many tokens the draft
// had not seen (the prompt, or the tokens of steps that drafted nothing) is left out of
// draftTime and draftForwards: that cost is paid once per switch from plain decoding to
// drafting, not per drafted token, and charging it to the step's drafts made a memory-bound
// target with a cheap draft look like one where drafting never pays.
func (t *kTuner) observe(n, accepted int, draftTime time.Duration, draftForwards int, verifyTime time.Duration) {
	t.steps++
	if draftForwards > 0 {
		t.draft = running(t.draft, draftTime.Seconds()/float64(draftForwards))
	}
	if n > 0 {
		for i := 0; i < accepted; i++ {
			t.kept, t.judged = verdictDecay*t.kept+1, verdictDecay*t.judged+1
			t.prior *= verdictDecay
		}
		if accepted < n {
			t.kept, t.judged = verdictDecay*t.kept, verdictDecay*t.judged+1
			t.prior *= verdictDecay
		}
	}
	v := verifyTime.Seconds()
	if t.steps > 3 {
		// Past the first steps, a timing is counted as at most twice the model's cost: a
		// busy machine slows a forward by two or three times now and then, and one such
		// step among drafting steps of a few rows tilted the line so far that drafting
		// looked worthless for the rest of a short run. A lasting change still comes through,
		// doubling the model's cost each step.
		v = min(v, 2*t.verifyCost(n+1))
	}
	t.sdd, t.sd, t.sdv = lineDecay*t.sdd, lineDecay*t.sd, lineDecay*t.sdv
	if n == 0 {
		t.one = running(t.one, v)
		return
	}
	d := float64(n)
	t.sdd += d * d
	t.sd += d
	t.sdv += d * v
}

// running is the running average old (negative: none yet) with the new timing x.
func running(old, x float64) float64 {
	if x < old/2 {
		// Under half the running cost: not noise (a busy machine slows a forward, it does
		// not halve it) but the cost as it is again after a slow moment, which the running
		// average would take many probes to learn.
		return x
	}
	return ewma(max(old, 0), x)
}

// verifyCost is the modelled cost of a target forward of m rows: the line through the
// one-row cost, its slope kept at zero or above (a row never makes a forward cheaper); 0
// before any timing.
func (t *kTuner) verifyCost(m int) float64 {
	one := t.one
	if one < 0 {
		if t.sd == 0 {
			return 0
		}
		one = 0 // only drafting steps measured: the line through the origin
	}
	slope := 0.0
	if t.sdd > 1e-12 {
		slope = max((t.sdv-one*t.sd)/t.sdd, 0)
	}
	return max(one+slope*float64(m-1), 1e-9)
}

// acceptance is the running acceptance rate of a drafted token: the decayed share of kept
// drafts, with the prior counting for priorVerdicts verdicts at first and less with every
// verdict after.
func (t *kTuner) acceptance() float64 {
	return (t.kept + t.prior*tunerPrior) / (t.judged + t.prior)
}

// expected is the expected number of tokens a step drafting k tokens appends.
func (t *kTuner) expected(k int) float64 {
	a := min(t.acceptance(), 0.999)
	return (1 - math.Pow(a, float64(k+1))) / (1 - a)
}

// choose returns the k to draft next, at most room. The first step drafts one token, the
// second none and the third K (half the largest k), so that the line of verification costs
// is measured at both ends; then the k with the best expected tokens per second.
func (t *kTuner) choose(room int) int {
	limit := min(t.maxK, max(room, 0))
	switch t.steps {
	case 0:
		return min(1, limit)
	case 1:
		return 0
	case 2:
		return min(max(t.maxK/2, 1), limit)
	}
	best, bestRate := 0, 0.0
	for k := 0; k <= limit; k++ {
		cost := t.verifyCost(k+1) + float64(k)*max(t.draft, 0)
		if r := t.expected(k) / cost; r > bestRate {
			best, bestRate = k, r
		}
	}
	// Every tunerProbe steps a probe measures what the best k's steps do not: when the best is
	// plain decoding, a draft of two tokens checks the draft's cost and the acceptance rate
	// again; otherwise, in turn, a plain step measures the one-row cost the line goes through
	// and a draft of one token more than the best measures the costs next to it.
	if t.steps%tunerProbe == 0 {
		switch {
		case best == 0:
			// After plain steps a probe's first draft forward catches up with their tokens and
			// is not measured (see observe): a probe of one token would never measure the
			// draft again, and a draft cost raised by one slow moment would keep plain
			// decoding for good. The second draft forward measures it.
			return min(2, limit)
		case t.steps/tunerProbe%2 == 1:
			return 0
		case best < limit:
			return best + 1
		}
	}
	return best
}
