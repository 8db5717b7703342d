package processors

import (
	"fmt"
	"math"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/fastmath"
)

// MirostatConfig configures Mirostat.
type MirostatConfig struct {
	// Version is 1 (Basu et al. 2021, Algorithm 1) or 2 (llama.cpp's simplified variant).
	Version int
	// Tau is the target surprise τ in bits (−log₂ p of the chosen token), in [0, 3.4e38]; Eta
	// the learning rate η of μ, in [0, 3.4e38] (0 keeps μ at its start, 2τ). μ ln 2 is
	// compared with logits, hence the float32 bound.
	Tau, Eta float64
	// M is how many of the most likely tokens version 1 uses to estimate the Zipf exponent
	// (≥ 2; llama.cpp uses 100); VocabSize is N in its formula, the model's vocabulary size.
	M, VocabSize int
}

// Mirostat is adaptive truncation that steers the surprise of the chosen tokens to a target τ
// (Basu et al. 2021, "Mirostat: A Neural Text Decoding Algorithm that Directly Controls
// Perplexity"), with llama.cpp's semantics. It keeps a threshold μ per sequence, starting at
// 2τ, and each step truncates the distribution with it:
//
//	v2:  keep i ⇔ −log₂ p(i) ≤ μ   (i.e. p(i) ≥ 2^−μ; the most likely token if none is)
//	v1:  ŝ = Σ t_j b_j / Σ t_j²  over j < m−1,  t_j = ln((j+2)/(j+1)),  b_j = ln(p_(j)/p_(j+1))
//	     ε̂ = ŝ − 1,  k = ((ε̂ · 2^μ) / (1 − N^(−ε̂)))^(1/ŝ),  keep the max(⌊k⌋, 1) most likely
//
// (p_(j) is the j-th largest probability, N the vocabulary size). Once the token is chosen from
// the kept set, μ learns from its surprise under that set's renormalised distribution q:
//
//	μ ← μ − η · (−log₂ q(chosen) − τ)
//
// Design: a processor that truncates, not one that draws. llama.cpp's mirostat samplers draw
// the token themselves. Here Process leaves exactly the set llama.cpp draws from (sparse; sorted
// for v1) and the strategy draws from it — with the sequence's own random stream when it
// samples, so a request keeps one random scheme — and Accept updates μ from the token the
// strategy chose. Owning the draw (cutting the set to the one drawn token) would need a second
// random stream, would report every chosen token with probability 1 (scores of 0), and would
// hide q from the strategies that need a distribution: beam search ranks beams by log q and
// speculative decoding verifies drafts against q. Place it last in the chain: then sampling
// draws from q exactly as llama.cpp does, greedy decoding takes its most likely token, and μ
// follows each sequence and each beam (the session clones the processor per sequence and per
// fork, and a speculative rollback restores μ). Processors placed after it change the draw but
// not the update, which always uses q. A token Accept sees that the last Process did not keep
// (a forced token) leaves μ unchanged.
//
// Cost: v2 is a maximum, an exponential pass and a vectorised cut at log Z − μ ln 2 (no sort);
// v1 selects the m most likely tokens (one pass with a heap) and then cuts the top k like
// top-k. The kept set is copied into the instance for Accept, O(kept). NaN or +Inf logits and
// an all-banned set are errors.
type Mirostat struct {
	cfg MirostatConfig
	mu  float64

	// What the last Process kept, for Accept: the tokens, their logits and the set's log Z.
	kept   []core.Candidate
	keptLZ float64
	valid  bool
}

// NewMirostat returns a Mirostat processor with μ = 2τ.
func NewMirostat(cfg MirostatConfig) (*Mirostat, error) {
	if cfg.Version != 1 && cfg.Version != 2 {
		return nil, &core.ParamError{Param: "version", Value: cfg.Version, Reason: "must be 1 or 2"}
	}
	// μ = 2τ, moved by η per step, is compared with logits (μ ln 2 below log Z).
	if err := checkFloat("tau", cfg.Tau, nonNegative32, "bits"); err != nil {
		return nil, err
	}
	if err := checkFloat("eta", cfg.Eta, nonNegative32, ""); err != nil {
		return nil, err
	}
	if cfg.Version == 1 {
		if cfg.M < 2 {
			return nil, &core.ParamError{Param: "m", Value: cfg.M, Reason: "must be ≥ 2"}
		}
		if cfg.VocabSize < 2 {
			return nil, &core.ParamError{Param: "vocab_size", Value: cfg.VocabSize, Reason: "must be ≥ 2"}
		}
	}
	return &Mirostat{cfg: cfg, mu: 2 * cfg.Tau}, nil
}

// Name implements core.LogitsProcessor.
func (p *Mirostat) Name() string { return "mirostat" }

// Mu is the current threshold μ (bits).
func (p *Mirostat) Mu() float64 { return p.mu }

// Process implements core.LogitsProcessor.
func (p *Mirostat) Process(_ *core.Sequence, c *core.Candidates) error {
	p.valid = false
	if c.Len() == 0 {
		return core.ErrNoCandidates
	}
	logits := c.Logits()
	m, err := finiteMax(logits, c)
	if err != nil {
		return err
	}
	if p.cfg.Version == 2 {
		logZ, _, _ := logNormaliser(c, logits, m)
		// −log₂ p(i) ≤ μ ⇔ logit(i) ≥ log Z − μ ln 2.
		if thr := logZ - p.mu*math.Ln2; thr <= float64(m) {
			t := float32(thr)
			if float64(t) < thr {
				t = math.Nextafter32(t, float32(math.Inf(1)))
			}
			if err := keepFrom(c, t, 0); err != nil {
				return err
			}
		} else if err := c.TopK(1); err != nil {
			return err
		}
	} else if err := c.TopK(p.v1K(c)); err != nil {
		return err
	}
	p.record(c)
	return nil
}

// v1K estimates the Zipf exponent from the m most likely tokens and returns how many to keep.
func (p *Mirostat) v1K(c *core.Candidates) int {
	top := topItems(c, p.cfg.M)
	if len(top) < 2 {
		return 1
	}
	var num, den float64
	for j := 0; j+1 < len(top); j++ {
		t := math.Log(float64(j+2) / float64(j+1))
		b := float64(top[j].Logit) - float64(top[j+1].Logit) // ln(p_(j) / p_(j+1))
		num += t * b
		den += t * t
	}
	k := mirostatK(num/den, p.mu, float64(p.cfg.VocabSize))
	if !(k >= 1) { // NaN too: llama.cpp's int(NaN) is then clamped to 1 on x86
		return 1
	}
	return int(math.Min(k, float64(c.Len())))
}

// mirostatK is k = ((ε̂ · 2^μ) / (1 − N^(−ε̂)))^(1/ŝ) with ε̂ = ŝ − 1.
func mirostatK(sHat, mu, n float64) float64 {
	eps := sHat - 1
	return math.Pow(eps*math.Exp2(mu)/(1-math.Pow(n, -eps)), 1/sHat)
}

// record copies the kept set and its normaliser for Accept.
func (p *Mirostat) record(c *core.Candidates) {
	p.kept = append(p.kept[:0], c.Items()...)
	logits := c.Logits()
	m, _, _ := fastmath.Max(logits)
	p.keptLZ, _, _ = logNormaliser(c, logits, m)
	p.valid = true
}

// Accept implements core.StatefulProcessor: μ ← μ − η (surprise − τ).
func (p *Mirostat) Accept(_ *core.Sequence, id core.TokenID) {
	if !p.valid {
		return
	}
	p.valid = false
	for _, it := range p.kept {
		if it.ID == id {
			surprise := -(float64(it.Logit) - p.keptLZ) / math.Ln2
			p.mu -= p.cfg.Eta * (surprise - p.cfg.Tau)
			return
		}
	}
}

// Clone implements core.StatefulProcessor. The kept set is copied only while an Accept may
// still need it (a fork between Process and Accept, as beam search makes).
func (p *Mirostat) Clone() core.StatefulProcessor {
	c := *p
	c.kept = nil
	if p.valid {
		c.kept = append([]core.Candidate(nil), p.kept...)
	}
	return &c
}

// String describes the processor and its state, for traces and errors.
func (p *Mirostat) String() string {
	return fmt.Sprintf("mirostat(v%d, tau %g, eta %g, mu %g)", p.cfg.Version, p.cfg.Tau, p.cfg.Eta, p.mu)
}
