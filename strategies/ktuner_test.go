package strategies

import (
	"math/rand/v2"
	"testing"
	"time"
)

// simulate runs the cost policy for steps steps against a synthetic machine: a drafted token
// costs draft, a target forward of m rows costs verify(m), and each draft is accepted with
// probability alpha. It returns the tokens per second achieved, all costs counted, and the
// steps by k.
func simulate(maxK int, draft time.Duration, verify func(m int) time.Duration, alpha float64, steps int) (float64, []int) {
	return simMachine{maxK: maxK, draft: draft, verify: verify, alpha: alpha, steps: steps, seed: 1}.run()
}

// simulateCatchUp is simulate with a prompt the draft must catch up with first, noise (when
// not nil, every verification takes noise() times its cost: a machine shared with other work)
// the seed of the simulation's random numbers, and a number of steps, from the first that drafts
// two tokens or more, whose draft forwards take 20 times their cost (the machine busy with
// something else for a moment).
func simulateCatchUp(maxK int, draft time.Duration, verify func(m int) time.Duration, alpha float64, steps, prompt int, catchUp time.Duration, noise func(*rand.Rand) float64, seed uint64, slowDraftSteps int) (float64, []int) {
	return simMachine{maxK: maxK, draft: draft, verify: verify, alpha: alpha, steps: steps, prompt: prompt, catchUp: catchUp, noise: noise, seed: seed, slowDraftSteps: slowDraftSteps}.run()
}

// simMachine is a synthetic machine and run for the cost policy: a drafted token costs draft,
// a target forward of m rows costs verify(m) (times noise(), when noise is not nil), and each
// draft is accepted with probability alpha. The draft model also has to catch up with the
// tokens it has not seen before it drafts: the prompt (prompt tokens) and every token of the
// steps that drafted nothing, at catchUp a token, as the strategy's draft forwards do; like the
// strategy, the simulation reports to the tuner only the draft forwards that proposed one
// token after at most catchUpRows new ones. From the first step that drafts two tokens or more,
// slowDraftSteps steps' draft forwards take 20 times their cost. The run lasts steps steps, or
// until it has generated tokens tokens when tokens > 0.
type simMachine struct {
	maxK           int
	draft          time.Duration
	verify         func(m int) time.Duration
	alpha          float64
	steps, tokens  int
	prompt         int
	catchUp        time.Duration
	noise          func(*rand.Rand) float64
	seed           uint64
	slowDraftSteps int
}

// run returns the tokens per second achieved, all costs counted, and the steps by k.
func (sm simMachine) run() (float64, []int) {
	r := rand.New(rand.NewPCG(sm.seed, 2))
	t := newKTuner(sm.maxK)
	counts := make([]int, sm.maxK+1)
	var tokens int
	var spent time.Duration
	lag := sm.prompt // tokens of the sequence the draft has not seen
	slow := sm.slowDraftSteps
	for i := 0; sm.tokens > 0 && tokens < sm.tokens || sm.tokens == 0 && i < sm.steps; i++ {
		room := 1 << 20
		if sm.tokens > 0 {
			room = sm.tokens - tokens - 1
		}
		k := t.choose(room)
		counts[k]++
		accepted := 0
		for accepted < k && r.Float64() < sm.alpha {
			accepted++
		}
		var d, observed time.Duration
		forwards := 0
		if k > 0 {
			perDraft := sm.draft
			if k > 1 && slow > 0 {
				perDraft *= 20
				slow--
			}
			d = time.Duration(k) * perDraft
			observed, forwards = d, k
			if lag > catchUpRows {
				extra := time.Duration(lag) * sm.catchUp
				d += extra
				observed, forwards = observed-perDraft, k-1
			}
			lag = accepted + 1 - min(k-1, accepted)
		} else {
			lag++
		}
		v := sm.verify(k + 1)
		if sm.noise != nil {
			v = time.Duration(float64(v) * sm.noise(r))
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

// TestKTunerShortRunsOfAGoodDraft is the 110M F32 target with its Q4_0 draft as measured on
// this machine (2026-11-28): a one-row forward 9 ms, two to four rows 12 ms and each further
// group of four rows 3.5 ms more (the kernels take activation rows four at a time), a drafted
// token 2.3 ms, nearly every draft accepted, one verification in eight slowed 2.5 times by the
// shared machine, and runs of 128 tokens, as `loom bench strategy` makes them: the policy has
// a dozen steps to learn in. A prior acceptance rate that kept its weight held the estimate at
// 0.977 or below, where few drafts look best, and the policy climbed slowly from 2–3 drafts a
// step: 0.93 of the best fixed k's speed on average over these 20 runs (0.96 over 400).
func TestKTunerShortRunsOfAGoodDraft(t *testing.T) {
	ms := time.Millisecond
	verify := func(m int) time.Duration {
		if m == 1 {
			return 9 * ms
		}
		return 12*ms + time.Duration((m-1)/4)*7*ms/2
	}
	noise := func(r *rand.Rand) float64 {
		if r.IntN(8) == 0 {
			return 2.5
		}
		return 1 + 0.1*r.Float64()
	}
	const maxK, alpha = 16, 0.99
	k, want := bestFixed(maxK, 23*ms/10, verify, alpha)
	want /= 2.5/8 + 1.05*7/8 // the noise's average cost
	var worst, sum float64
	for seed := uint64(1); seed <= 20; seed++ {
		got, counts := simMachine{maxK: maxK, draft: 23 * ms / 10, verify: verify, alpha: alpha, tokens: 128, prompt: 14, catchUp: ms / 2, noise: noise, seed: seed}.run()
		if seed <= 3 || got < 0.85*want {
			t.Logf("seed %d: best fixed k %d: %.0f tok/s with noise; tuned: %.0f tok/s, steps by k %v", seed, k, want, got, counts)
		}
		if seed == 1 || got < worst {
			worst = got
		}
		sum += got
	}
	t.Logf("20 runs: worst %.0f tok/s, %.2f of the best fixed k's; mean %.2f", worst, worst/want, sum/20/want)
	if worst < 0.8*want || sum/20 < 0.95*want {
		t.Errorf("the tuned policy's runs reached %.0f tok/s on average and %.0f in the worst, under 95%% and 80%% of the best fixed k's %.0f", sum/20, worst, want)
	}
}

// TestKTunerOneSlowVerification is a run on the 110M pair as traced on this machine (a
// one-row forward 8.5 ms, drafts 2.3 ms, every draft accepted, the policy's k climbing with
// its acceptance estimate) in which one eight-row verification took 40 ms instead of 15.5,
// the machine busy for a moment. The line fitted freely to the drafting steps, clustered
// around a few k, tilted so far that a one-row forward looked cheaper than it is and the
// policy drafted a few tokens (in the traced run: none, for several steps). It must go on
// drafting many.
func TestKTunerOneSlowVerification(t *testing.T) {
	ms := time.Millisecond
	tu := newKTuner(16)
	step := func(k int, v time.Duration) {
		tu.choose(100)
		tu.observe(k, k, time.Duration(k)*23*ms/10, k, v)
	}
	step(1, 12*ms)
	step(0, 17*ms/2)
	step(8, 22*ms)
	for _, k := range []int{2, 3, 3, 3, 4, 5, 5, 6, 8, 6} {
		step(k, 12*ms+time.Duration(k/4)*7*ms/2)
	}
	step(7, 40*ms)           // the slow one
	for i := 0; i < 2; i++ { // (the step after these is a probe)
		k := tu.choose(100)
		t.Logf("after the slow step: verify(1) %.1f ms, verify(13) %.1f ms, draft %d", tu.verifyCost(1)*1e3, tu.verifyCost(13)*1e3, k)
		if k < 6 {
			t.Fatalf("drafted %d tokens after one slow verification (verify(1) %.1f ms, verify(13) %.1f ms)", k, tu.verifyCost(1)*1e3, tu.verifyCost(13)*1e3)
		}
		tu.observe(k, k, time.Duration(k)*23*ms/10, k, 12*ms+time.Duration(k/4)*7*ms/2)
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
