package strategies

import (
	"math/rand/v2"
	"testing"
	"time"
)

// simulate runs the cost policy for steps steps against a synthetic machine: a drafted token
// costs draft, a target forward of m rows costs verify(m), and each draft is accepted with
// probability alpha. The draft model also has to catch up with the tokens it has not seen
// before it drafts: the prompt (prompt tokens) and every token of the steps that drafted
// nothing, at catchUp a token, as the strategy's draft forwards do; like the strategy, the
// simulation reports to the tuner only the draft forwards that proposed one token after at
// most catchUpRows new ones. It returns the tokens per second achieved, all costs counted, and
// the steps by k.
func simulate(maxK int, draft time.Duration, verify func(m int) time.Duration, alpha float64, steps int) (float64, []int) {
	return simulateCatchUp(maxK, draft, verify, alpha, steps, 0, 0, nil, 1, 0)
}

// simulateCatchUp is simulate with a prompt the draft must catch up with first, noise (when
// not nil, every verification takes noise() times its cost: a machine shared with other work)
// the seed of the simulation's random numbers, and a number of steps, from the first that drafts
// two tokens or more, whose draft forwards take 20 times their cost (the machine busy with
// something else for a moment).
func simulateCatchUp(maxK int, draft time.Duration, verify func(m int) time.Duration, alpha float64, steps, prompt int, catchUp time.Duration, noise func(*rand.Rand) float64, seed uint64, slowDraftSteps int) (float64, []int) {
	r := rand.New(rand.NewPCG(seed, 2))
	t := newKTuner(maxK)
	counts := make([]int, maxK+1)
	var tokens int
	var spent time.Duration
	lag := prompt // tokens of the sequence the draft has not seen
	for i := 0; i < steps; i++ {
		k := t.choose(1 << 20)
		counts[k]++
		accepted := 0
		for accepted < k && r.Float64() < alpha {
			accepted++
		}
		var d, observed time.Duration
		forwards := 0
		if k > 0 {
			perDraft := draft
			if k > 1 && slowDraftSteps > 0 {
				perDraft *= 20
				slowDraftSteps--
			}
			d = time.Duration(k) * perDraft
			observed, forwards = d, k
			if lag > catchUpRows {
				extra := time.Duration(lag) * catchUp
				d += extra
				observed, forwards = observed-perDraft, k-1
			}
			lag = accepted + 1 - min(k-1, accepted)
		} else {
			lag++
		}
		v := verify(k + 1)
		if noise != nil {
			v = time.Duration(float64(v) * noise(r))
		}
		t.observe(k, accepted, observed, forwards, v)
		tokens += accepted + 1
		spent += d + v
	}
	return float64(tokens) / spent.Seconds(), counts
}

// rateOf is the expected tokens per second of drafting k tokens every step.
func rateOf(k int, draft time.Duration, verify func(m int) time.Duration, alpha float64) float64 {
	e := 0.0
	for i := 0; i <= k; i++ {
		e += pow(alpha, i)
	}
	return e / (time.Duration(k)*draft + verify(k+1)).Seconds()
}

// bestFixed is the best expected tokens per second of any fixed k in [0, maxK].
func bestFixed(maxK int, draft time.Duration, verify func(m int) time.Duration, alpha float64) (int, float64) {
	best, rate := 0, 0.0
	for k := 0; k <= maxK; k++ {
		if r := rateOf(k, draft, verify, alpha); r > rate {
			best, rate = k, r
		}
	}
	return best, rate
}

func pow(a float64, n int) float64 {
	p := 1.0
	for ; n > 0; n-- {
		p *= a
	}
	return p
}

func TestKTunerFindsTheBestK(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name   string
		draft  time.Duration
		verify func(m int) time.Duration
		alpha  float64
	}{
		// A compute-bound target: m rows cost m forwards, so drafting never pays.
		{"compute-bound", ms / 5, func(m int) time.Duration { return time.Duration(m) * ms }, 0.7},
		// A memory-bound target: extra rows are nearly free, and good drafts pay.
		{"memory-bound", ms / 10, func(m int) time.Duration { return ms + time.Duration(m-1)*ms/20 }, 0.8},
		// Memory-bound but the drafts are poor: a small k.
		{"poor drafts", ms / 4, func(m int) time.Duration { return ms + time.Duration(m-1)*ms/10 }, 0.3},
		// Prompt lookup: free drafts, rows nearly free.
		{"free drafts", 0, func(m int) time.Duration { return ms + time.Duration(m-1)*ms/50 }, 0.9},
	} {
		t.Run(c.name, func(t *testing.T) {
			const maxK = 8
			got, counts := simulate(maxK, c.draft, c.verify, c.alpha, 400)
			k, want := bestFixed(maxK, c.draft, c.verify, c.alpha)
			mode := 0
			for i := range counts {
				if counts[i] > counts[mode] {
					mode = i
				}
			}
			t.Logf("best fixed k %d: %.0f tok/s; tuned: %.0f tok/s, steps by k %v", k, want, got, counts)
			if got < 0.9*want {
				t.Errorf("the tuned policy reached %.0f tok/s, under 90%% of the best fixed k's %.0f", got, want)
			}
			if r := rateOf(mode, c.draft, c.verify, c.alpha); r < 0.9*want {
				t.Errorf("most steps drafted %d tokens (%.0f tok/s expected); the best is %d", mode, r, k)
			}
		})
	}
}

// TestKTunerCatchUpIsNotADraftCost is a memory-bound target with a draft four times cheaper
// than a target forward and a 200-token prompt: the draft's first forward catches up with the
// whole prompt, and after steps that drafted nothing it catches up with their tokens. Charged
// to the drafted tokens, that cost made plain decoding look best for good (a speculative
// pipeline ran at 0.92× greedy where drafting 8 tokens ran at 1.8×).
func TestKTunerCatchUpIsNotADraftCost(t *testing.T) {
	ms := time.Millisecond
	verify := func(m int) time.Duration { return 10*ms + time.Duration(m-1)*ms/2 }
	const maxK, alpha = 16, 0.9
	got, counts := simulateCatchUp(maxK, 5*ms/2, verify, alpha, 200, 200, ms, nil, 1, 0)
	k, want := bestFixed(maxK, 5*ms/2, verify, alpha)
	t.Logf("best fixed k %d: %.0f tok/s; tuned: %.0f tok/s, steps by k %v", k, want, got, counts)
	if got < 0.85*want {
		t.Errorf("the tuned policy reached %.0f tok/s, under 85%% of the best fixed k's %.0f (steps by k %v)", got, want, counts)
	}
	if counts[0] > 20 {
		t.Errorf("%d of 200 steps drafted nothing", counts[0])
	}
}

// TestKTunerNoisyMachine is a memory-bound target on a shared machine: one verification in
// six takes 1.6 times its cost, and the policy must still reach 85 % of the best fixed k. (On
// a real machine, a table of costs by rows kept one slow forward for good and settled at 1.52×
// greedy where a fixed k reached 1.80×; this simulation's noise does not reproduce that — the
// table passes it too — so it guards the fitted line against noise, not that failure.)
func TestKTunerNoisyMachine(t *testing.T) {
	ms := time.Millisecond
	verify := func(m int) time.Duration { return 11*ms + time.Duration(m-1)*ms/4 }
	noise := func(r *rand.Rand) float64 {
		if r.IntN(6) == 0 {
			return 1.6
		}
		return 1 + 0.1*r.Float64()
	}
	const maxK, alpha = 16, 0.95
	for seed := uint64(1); seed <= 5; seed++ {
		got, counts := simulateCatchUp(maxK, 3*ms, verify, alpha, 120, 100, ms/2, noise, seed, 0)
		k, want := bestFixed(maxK, 3*ms, verify, alpha)
		want /= 1.6/6 + 1.05*5/6 // the noise's average cost
		t.Logf("seed %d: best fixed k %d: %.0f tok/s with noise; tuned: %.0f tok/s, steps by k %v", seed, k, want, got, counts)
		if got < 0.85*want {
			t.Errorf("seed %d: the tuned policy reached %.0f tok/s, under 85%% of the best fixed k's %.0f (steps by k %v)", seed, got, want, counts)
		}
	}
}

// TestKTunerSlowDraftsPass is a memory-bound target with a cheap, nearly always right draft
// whose first drafting steps ran slow (the machine busy for a moment): the running draft cost
// then makes plain decoding look best, and a probe of one token never measures the draft
// again, since after plain steps its one draft forward first catches up with their tokens.
// Before the fix the policy stayed at plain decoding for good here (97 of the best fixed k's
// 399 tok/s). The policy must get back to drafting. (Runs on the 110M F32 target with its
// Q4_0 draft where most steps drafted nothing prompted this; there the slower draft of that
// day, not this trap, explained the lower speed-up: the fix did not change it measurably.)
func TestKTunerSlowDraftsPass(t *testing.T) {
	ms := time.Millisecond
	verify := func(m int) time.Duration { return 10*ms + time.Duration(m-1)*ms/3 }
	const maxK, alpha = 16, 0.99
	for _, slow := range []int{1, 3} {
		got, counts := simulateCatchUp(maxK, 3*ms/2, verify, alpha, 300, 50, ms/4, nil, 1, slow)
		k, want := bestFixed(maxK, 3*ms/2, verify, alpha)
		t.Logf("%d slow steps: best fixed k %d: %.0f tok/s; tuned: %.0f tok/s, steps by k %v", slow, k, want, got, counts)
		if got < 0.85*want {
			t.Errorf("%d slow steps: the tuned policy reached %.0f tok/s, under 85%% of the best fixed k's %.0f (steps by k %v)", slow, got, want, counts)
		}
	}
}

func TestKTunerRespectsRoomAndProbes(t *testing.T) {
	tu := newKTuner(6)
	if k := tu.choose(2); k != 1 {
		t.Fatalf("first step drafts %d, want 1", k)
	}
	tu.observe(1, 1, time.Millisecond, 1, 2*time.Millisecond)
	if k := tu.choose(5); k != 0 {
		t.Fatalf("second step drafts %d, want 0 (the one-row cost is measured next)", k)
	}
	tu.observe(0, 0, 0, 0, time.Millisecond)
	// Every row costs a full forward: plain decoding wins, but a draft is probed regularly.
	probes := 0
	for i := 0; i < 4*tunerProbe; i++ {
		k := tu.choose(100)
		if k > 0 {
			probes++
		}
		tu.observe(k, 0, time.Duration(k)*time.Millisecond, k, time.Duration(k+1)*time.Millisecond)
	}
	if probes < 3 || probes > 5 {
		t.Errorf("%d probing steps in %d, want about one every %d", probes, 4*tunerProbe, tunerProbe)
	}
	if k := tu.choose(0); k != 0 {
		t.Errorf("no room: drafted %d", k)
	}
}

func TestParseKPolicy(t *testing.T) {
	for _, p := range []KPolicy{KFixed, KAcceptance, KCost} {
		got, err := ParseKPolicy(p.String())
		if err != nil || got != p {
			t.Errorf("%v: %v, %v", p, got, err)
		}
	}
	if _, err := ParseKPolicy("fast"); err == nil {
		t.Error("an unknown policy was accepted")
	}
}
