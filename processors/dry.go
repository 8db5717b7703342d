package processors

import (
	"bytes"
	"fmt"
	"math"

	"github.com/loomlm/loom/core"
)

// DRYConfig configures DRY.
type DRYConfig struct {
	// Multiplier scales the penalty (in [0, 3.4e38], the float32 range; 0 disables; 0.8 is
	// the usual value).
	Multiplier float64
	// Base is the growth of the penalty per extra repeated token (≥ 1; usually 1.75).
	Base float64
	// AllowedLength is the longest repeat that goes unpenalised (≥ 0; usually 2).
	AllowedLength int
	// LastN is the window of the sequence searched for repeats: the last LastN tokens, prompt
	// included; WholeHistory (-1) the whole sequence, 0 disables (llama.cpp's
	// dry_penalty_last_n) — the values of the penalties' Window.LastN too.
	LastN int
	// SequenceBreakers are strings a repeat cannot run across (usually "\n", ":", "\"", "*"),
	// matched on the bytes of the text, across token boundaries; each at most 64 bytes.
	SequenceBreakers []string
}

// DefaultSequenceBreakers are DRY's usual sequence breakers (text-generation-webui's and
// llama.cpp's defaults).
var DefaultSequenceBreakers = []string{"\n", ":", "\"", "*"}

// maxBreakerLen bounds a sequence breaker's length in bytes.
const maxBreakerLen = 64

// DRY ("don't repeat yourself", from text-generation-webui; as in llama.cpp and koboldcpp)
// penalises the tokens that would extend a repetition of something already in the sequence.
// For each earlier position j of the window w whose preceding tokens repeat the end of the
// window — a match of length ℓ(j): w[j−ℓ … j−1] = w[L−ℓ … L−1] (L = len(w)), at most as long as
// the text after the last sequence breaker — the token w[j] that followed it there would
// extend the repeat. Every such token t is penalised by its longest match:
//
//	ℓ(t) = max { ℓ(j) : w[j] = t },   logit(t) −= multiplier · base^min(ℓ(t) − allowed, e_max)   if ℓ(t) ≥ max(allowed, 1)
//
// where e_max is the largest exponent for which multiplier · base^e is a finite float32, so the
// penalty cannot overflow (a logit pushed below the float32 range becomes -Inf, a ban). A token
// whose own text contains a sequence breaker is never penalised.
//
// Sequence breakers are matched on decoded bytes: the latest breaker in the text of the
// sequence, wherever token boundaries fall, ends the searchable suffix at the token holding its
// last byte. llama.cpp instead maps each breaker string to token sequences once (every token
// containing it, plus every token ending in a prefix of it followed by the tokenisation of the
// rest), which misses a breaker spread over tokens in an unusual way; on ordinary text the two
// agree. At construction each vocabulary entry is classified once (does it contain a breaker;
// could it end one begun in an earlier token), so a step only looks up bits, and looks at the
// bytes of earlier tokens only for the rare tokens that could end a breaker spread over tokens.
//
// The window is the last LastN tokens of the sequence, prompt included (llama.cpp's server and
// CLI feed the prompt to the sampler too); LastN = -1 is the whole sequence. Two differences
// remain at the edges: text-generation-webui caps matches at 50 tokens instead of clamping the
// exponent, and llama.cpp with allowed length 0 also penalises every token of the window that
// follows a non-matching position (here, as in text-generation-webui, only matches of at least
// one token count).
//
// The matches are a Z-function over the reversed window, so a step costs O(L) whatever the
// repetitions, plus O(penalised tokens) on a dense row or O(kept) on a sparse one. DRY reads the
// window from the sequence at every step, so it is right after forks and rollbacks by
// construction; it is a core.StatefulProcessor so that each sequence (each sample, each beam)
// gets its own instance and scratch space, and nothing is allocated per token once the window
// has reached its size. On a sorted sparse set the penalties may break the order, so the set is
// marked unsorted. NaN and ±Inf logits pass through.
type DRY struct {
	cfg      DRYConfig
	minLen   int // shortest match penalised: max(allowed, 1)
	maxExp   int // e_max; -1: no clamp needed (base 1)
	breakers *dryBreakers

	// Scratch of the sequence's instance.
	rev  []core.TokenID
	z    []int32
	lens tokenMax
}

// NewDRY returns a DRY processor. tok maps token ids to text for the sequence breakers; it may
// be nil when there are none.
func NewDRY(cfg DRYConfig, tok core.Tokenizer) (*DRY, error) {
	if err := checkFloat("multiplier", cfg.Multiplier, nonNegative32, "0 disables"); err != nil {
		return nil, err
	}
	// The penalty multiplier·base^e is clamped to the float32 range (see Penalty), so base
	// may be any finite number ≥ 1.
	if err := checkFloat("base", cfg.Base, atLeastOne, ""); err != nil {
		return nil, err
	}
	if cfg.AllowedLength < 0 {
		return nil, &core.ParamError{Param: "allowed_length", Value: cfg.AllowedLength, Reason: "must be ≥ 0"}
	}
	if err := checkLastN("penalty_last_n", cfg.LastN, "the whole sequence"); err != nil {
		return nil, err
	}
	for i, s := range cfg.SequenceBreakers {
		if s == "" || len(s) > maxBreakerLen {
			return nil, &core.ParamError{Param: fmt.Sprintf("sequence_breakers[%d]", i), Value: s, Reason: fmt.Sprintf("must be 1 to %d bytes", maxBreakerLen)}
		}
	}
	p := &DRY{cfg: cfg, minLen: max(cfg.AllowedLength, 1), maxExp: -1}
	p.cfg.SequenceBreakers = append([]string(nil), cfg.SequenceBreakers...)
	if cfg.Base > 1 && cfg.Multiplier > 0 {
		p.maxExp = max(int((math.Log(math.MaxFloat32)-math.Log(cfg.Multiplier))/math.Log(cfg.Base)), 0)
	}
	if len(cfg.SequenceBreakers) > 0 {
		if tok == nil {
			return nil, &core.ParamError{Param: "sequence_breakers", Reason: "need the pipeline's tokenizer"}
		}
		p.breakers = newDRYBreakers(cfg.SequenceBreakers, tok)
	}
	return p, nil
}

// Name implements core.LogitsProcessor.
func (p *DRY) Name() string { return "dry" }

func (p *DRY) disabled() bool { return p.cfg.Multiplier == 0 || p.cfg.LastN == 0 }

// Penalty returns the amount DRY subtracts for a match of length ℓ (0 below the allowed length).
func (p *DRY) Penalty(length int) float32 {
	if length < p.minLen {
		return 0
	}
	e := length - p.cfg.AllowedLength
	if p.maxExp >= 0 {
		e = min(e, p.maxExp)
	}
	return float32(min(p.cfg.Multiplier*math.Pow(p.cfg.Base, float64(e)), math.MaxFloat32))
}

// Process implements core.LogitsProcessor.
func (p *DRY) Process(seq *core.Sequence, c *core.Candidates) error {
	if p.disabled() || seq == nil {
		return nil
	}
	if !p.matches(seq.Tokens()) {
		return nil
	}
	if row := c.Dense(); row != nil {
		for _, slot := range p.lens.used {
			id := p.lens.ids[slot]
			if int(id) < len(row) {
				row[id] -= p.Penalty(int(p.lens.vals[slot]))
			}
		}
		return nil
	}
	items := c.Items()
	changed := false
	for i, it := range items {
		if n := p.lens.get(it.ID); n > 0 {
			items[i].Logit -= p.Penalty(int(n))
			changed = true
		}
	}
	if changed {
		c.MarkUnsorted()
	}
	return nil
}

// matches fills p.lens with ℓ(t) for every token t to penalise and reports whether there is any.
func (p *DRY) matches(toks []core.TokenID) bool {
	start := 0
	if p.cfg.LastN > 0 {
		start = max(len(toks)-p.cfg.LastN, 0)
	}
	w := toks[start:]
	L := len(w)
	if L-1 < p.minLen {
		return false
	}
	limit := L
	if p.breakers != nil {
		limit = p.breakers.tokensAfterLast(toks, start)
	}
	if limit < p.minLen {
		return false
	}
	// Z-function of the reversed window, each value capped at limit: z[i] is how many tokens
	// ending at position L−1−i equal the last ones of the window. Capping keeps it linear: the
	// box [l, r) it reuses is itself no longer than limit.
	if cap(p.rev) < L {
		p.rev = make([]core.TokenID, L, 2*L)
		p.z = make([]int32, L, 2*L)
	}
	rev, z := p.rev[:L], p.z[:L]
	for i, id := range w {
		rev[L-1-i] = id
	}
	p.lens.reset(L)
	found := false
	l, r := 0, 0
	for i := 1; i < L; i++ {
		zi := 0
		if i < r {
			zi = min(r-i, int(z[i-l]))
		}
		for zi < limit && i+zi < L && rev[zi] == rev[i+zi] {
			zi++
		}
		z[i] = int32(zi)
		if i+zi > r {
			l, r = i, i+zi
		}
		if zi >= p.minLen {
			next := rev[i-1] // w[L−i], the token that followed the match
			if p.breakers == nil || !p.breakers.inside.has(next) {
				p.lens.max(next, int32(zi))
				found = true
			}
		}
	}
	return found
}

// Accept implements core.StatefulProcessor. DRY reads the window from the sequence, so it has
// nothing to observe.
func (p *DRY) Accept(*core.Sequence, core.TokenID) {}

// Clone implements core.StatefulProcessor: the configuration and the breaker tables are shared,
// scratch space is the clone's own.
func (p *DRY) Clone() core.StatefulProcessor {
	return &DRY{cfg: p.cfg, minLen: p.minLen, maxExp: p.maxExp, breakers: p.breakers}
}

// String describes the processor, for traces and errors.
func (p *DRY) String() string {
	return fmt.Sprintf("dry(multiplier %g, base %g, allowed_length %d, penalty_last_n %d, sequence_breakers %q)",
		p.cfg.Multiplier, p.cfg.Base, p.cfg.AllowedLength, p.cfg.LastN, p.cfg.SequenceBreakers)
}

// dryBreakers classifies the vocabulary for the sequence breakers. It is read-only and shared by
// every clone.
type dryBreakers struct {
	strs [][]byte
	tok  core.Tokenizer
	// inside: the token's bytes contain a breaker. tail: a non-empty prefix of its bytes is a
	// proper suffix of a breaker, so a breaker begun in earlier tokens may end in it. either:
	// inside or tail, the one bit the scan back over the window tests for most tokens.
	inside, tail, either bitset
}

func newDRYBreakers(strs []string, tok core.Tokenizer) *dryBreakers {
	b := &dryBreakers{tok: tok}
	for _, s := range strs {
		b.strs = append(b.strs, []byte(s))
	}
	n := tok.VocabSize()
	b.inside, b.tail, b.either = newBitset(n), newBitset(n), newBitset(n)
	for id := range n {
		t := tok.TokenBytes(core.TokenID(id))
		for _, s := range b.strs {
			if bytes.Contains(t, s) {
				b.inside.set(core.TokenID(id))
			}
			for e := 1; e < len(s) && e <= len(t); e++ {
				if bytes.Equal(t[:e], s[len(s)-e:]) {
					b.tail.set(core.TokenID(id))
				}
			}
		}
	}
	for i := range b.either {
		b.either[i] = b.inside[i] | b.tail[i]
	}
	return b
}

// tokensAfterLast returns how many tokens of toks[start:] follow the token holding the last byte
// of the latest breaker in the text of toks (all of them when there is none in the window).
func (b *dryBreakers) tokensAfterLast(toks []core.TokenID, start int) int {
	for j := len(toks) - 1; j >= start; j-- {
		id := toks[j]
		if b.either.has(id) && (b.inside.has(id) || b.endsAcross(toks, j)) {
			return len(toks) - 1 - j
		}
	}
	return len(toks) - start
}

// endsAcross reports whether a breaker that began before token j ends inside it.
func (b *dryBreakers) endsAcross(toks []core.TokenID, j int) bool {
	t := b.tok.TokenBytes(toks[j])
	for _, s := range b.strs {
		for e := 1; e < len(s) && e <= len(t); e++ {
			if bytes.Equal(t[:e], s[len(s)-e:]) && b.textEndsWith(toks[:j], s[:len(s)-e]) {
				return true
			}
		}
	}
	return false
}

// textEndsWith reports whether the concatenated bytes of toks end with suffix.
func (b *dryBreakers) textEndsWith(toks []core.TokenID, suffix []byte) bool {
	for j := len(toks) - 1; j >= 0 && len(suffix) > 0; j-- {
		t := b.tok.TokenBytes(toks[j])
		n := min(len(t), len(suffix))
		if !bytes.Equal(t[len(t)-n:], suffix[len(suffix)-n:]) {
			return false
		}
		suffix = suffix[:len(suffix)-n]
	}
	return len(suffix) == 0
}

// bitset is a set of token ids.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (s bitset) set(id core.TokenID) { s[id/64] |= 1 << (id % 64) }

func (s bitset) has(id core.TokenID) bool {
	return id >= 0 && int(id/64) < len(s) && s[id/64]&(1<<(id%64)) != 0
}

// tokenMax maps token ids to the longest match seen this step: open addressing with linear
// probing, sized to the window, cleared through the list of used slots.
type tokenMax struct {
	ids   []core.TokenID // -1: empty
	vals  []int32
	used  []int32
	shift uint
}

// reset empties the table and makes room for n distinct tokens.
func (t *tokenMax) reset(n int) {
	if 2*n > len(t.ids) {
		size := 16
		for size < 2*n {
			size *= 2
		}
		t.ids = make([]core.TokenID, size)
		t.vals = make([]int32, size)
		t.used = make([]int32, 0, size)
		for i := range t.ids {
			t.ids[i] = -1
		}
		t.shift = uint(32 - bitsLen(size-1))
		return
	}
	for _, s := range t.used {
		t.ids[s] = -1
	}
	t.used = t.used[:0]
}

func bitsLen(x int) int {
	n := 0
	for ; x > 0; x >>= 1 {
		n++
	}
	return n
}

func (t *tokenMax) slot(id core.TokenID) int { return int((uint32(id) * 0x9e3779b1) >> t.shift) }

// max raises the value of id to at least v.
func (t *tokenMax) max(id core.TokenID, v int32) {
	mask := len(t.ids) - 1
	i := t.slot(id)
	for ; t.ids[i] != id; i = (i + 1) & mask {
		if t.ids[i] == -1 {
			t.ids[i], t.vals[i] = id, v
			t.used = append(t.used, int32(i))
			return
		}
	}
	t.vals[i] = max(t.vals[i], v)
}

// get returns the value of id, 0 when absent.
func (t *tokenMax) get(id core.TokenID) int32 {
	if len(t.used) == 0 {
		return 0
	}
	mask := len(t.ids) - 1
	for i := t.slot(id); ; i = (i + 1) & mask {
		switch t.ids[i] {
		case id:
			return t.vals[i]
		case -1:
			return 0
		}
	}
}
