package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loomlm/loom/model/ggml"
	"github.com/loomlm/loom/model/kernels"
)

// kvValue is the test's stand-in for a key or value: a function of the whole token prefix up
// to pos (as a real model's K and V are), the layer, the element and K/V. Its values are
// exact in half precision, so Float16 pools must reproduce them bit for bit.
func kvValue(prefix []int32, layer, j int, isV bool) float32 {
	h := uint64(1469598103934665603)
	for _, t := range prefix {
		h = (h ^ uint64(uint32(t))) * 1099511628211
	}
	h = (h ^ uint64(layer)<<32 ^ uint64(j)<<8) * 0x9e3779b97f4a7c15
	if isV {
		h = (h ^ 0xabcdef) * 0x9e3779b97f4a7c15
	}
	h ^= h >> 33
	return float32(int(h%2001)-1000) / 64
}

// fill grows s by tokens and writes their rows as kvValue computes them, then commits.
func fill(t testing.TB, s *Sequence, tokens []int32) error {
	t.Helper()
	start := s.Len()
	if err := s.Grow(tokens); err != nil {
		return err
	}
	all := s.Tokens(nil)
	cfg := s.Pool().Config()
	k := make([]float32, cfg.KVHeads*cfg.HeadDim)
	v := make([]float32, cfg.KVHeads*cfg.HeadDim)
	for pos := start; pos < s.Len(); pos++ {
		for l := 0; l < cfg.Layers; l++ {
			for j := range k {
				k[j] = kvValue(all[:pos+1], l, j, false)
				v[j] = kvValue(all[:pos+1], l, j, true)
			}
			s.Put(l, pos, k, v)
		}
	}
	s.Commit()
	return nil
}

// verify checks that s holds want, with every K and V row as kvValue gives it, through both
// ReadKV and Spans.
func verify(t testing.TB, s *Sequence, want []int32) {
	t.Helper()
	if s.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", s.Len(), len(want))
	}
	got := s.Tokens(nil)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("token %d = %d, want %d", i, got[i], want[i])
		}
	}
	cfg := s.Pool().Config()
	hd := cfg.HeadDim
	d := cfg.KVHeads * hd
	k := make([]float32, len(want)*d)
	v := make([]float32, len(want)*d)
	var spans []Span
	for l := 0; l < cfg.Layers; l++ {
		s.ReadKV(l, 0, len(want), k, v)
		spans = s.Spans(l, len(want), spans[:0])
		covered := 0
		for _, sp := range spans {
			if sp.Start != covered {
				t.Fatalf("layer %d: span starts at %d, want %d", l, sp.Start, covered)
			}
			covered += sp.Rows
			for h := 0; h < cfg.KVHeads; h++ {
				if got, want := len(sp.VHead(h)), sp.Rows*cfg.DType.Bytes(hd); got != want {
					t.Fatalf("VHead has %d bytes, want %d", got, want)
				}
				// Past Rows the transposed keys are finite.
				for dd := 0; dd < hd; dd++ {
					for r := sp.Rows; r < cfg.BlockSize; r++ {
						if x := elemAt(cfg, sp.KHead(h), r, dd, false); math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
							t.Fatalf("unused key column %d holds %v", r, x)
						}
					}
				}
			}
		}
		if covered != len(want) {
			t.Fatalf("layer %d: spans cover %d positions, want %d", l, covered, len(want))
		}
		wk, wv := make([]float32, d), make([]float32, d)
		for pos := range want {
			sp := &spans[pos/cfg.BlockSize]
			r := pos - sp.Start
			for j := 0; j < d; j++ {
				wk[j], wv[j] = kvValue(want[:pos+1], l, j, false), kvValue(want[:pos+1], l, j, true)
			}
			for h := range cfg.KVHeads {
				copy(wk[h*hd:(h+1)*hd], stored(cfg.DType, wk[h*hd:(h+1)*hd]))
				copy(wv[h*hd:(h+1)*hd], stored(cfg.DType, wv[h*hd:(h+1)*hd]))
			}
			for j := 0; j < d; j++ {
				if k[pos*d+j] != wk[j] || v[pos*d+j] != wv[j] {
					t.Fatalf("layer %d position %d element %d: ReadKV K, V = %v, %v, want %v, %v", l, pos, j, k[pos*d+j], v[pos*d+j], wk[j], wv[j])
				}
				h, e := j/hd, j%hd
				sk := elemAt(cfg, sp.KHead(h), r, e, false)
				sv := elemAt(cfg, sp.VHead(h), r, e, true)
				if cfg.DType != Q8_0 { // through the typed views
					var tk, tv float32
					if cfg.DType == Float16 {
						tk, tv = ggml.HalfToFloat32(sp.KHalf(h)[e*cfg.BlockSize+r]), ggml.HalfToFloat32(sp.VHalf(h)[r*hd+e])
					} else {
						tk, tv = sp.KFloat32(h)[e*cfg.BlockSize+r], sp.VFloat32(h)[r*hd+e]
					}
					if tk != sk || tv != sv {
						t.Fatalf("typed views give %v, %v; bytes give %v, %v", tk, tv, sk, sv)
					}
				}
				if sk != wk[j] || sv != wv[j] {
					t.Fatalf("layer %d position %d element %d: span K, V = %v, %v, want %v, %v", l, pos, j, sk, sv, wk[j], wv[j])
				}
			}
		}
	}
}

// checkInvariants verifies the pool's bookkeeping against the live sequences: every block's
// reference count equals the number of block-table entries naming it, the counters add up,
// cached blocks are published and unreferenced, and the prefix table points at published
// blocks under their own hash.
func checkInvariants(t testing.TB, p *Pool, seqs []*Sequence) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	refs := map[*block]int32{}
	for _, s := range seqs {
		if s == nil || s.closed {
			continue
		}
		bs := p.cfg.BlockSize
		if len(s.blocks) != (s.n+bs-1)/bs {
			t.Fatalf("sequence of %d positions has %d blocks", s.n, len(s.blocks))
		}
		for _, b := range s.blocks {
			refs[b]++
		}
	}
	for b, n := range refs {
		if b.refs != n {
			t.Fatalf("block has refs = %d, but %d block-table entries", b.refs, n)
		}
	}
	if p.inUse != len(refs) {
		t.Fatalf("inUse = %d, but %d distinct blocks are held", p.inUse, len(refs))
	}
	cached := 0
	for b := p.lru.next; b != &p.lru; b = b.next {
		cached++
		if b.refs != 0 || !b.published {
			t.Fatalf("cached block with refs = %d, published = %v", b.refs, b.published)
		}
		if b.next.prev != b {
			t.Fatal("broken LRU links")
		}
	}
	if cached != p.cached {
		t.Fatalf("cached = %d, list has %d", p.cached, cached)
	}
	for _, b := range p.free {
		if b.refs != 0 || b.published {
			t.Fatalf("free block with refs = %d, published = %v", b.refs, b.published)
		}
		if b.zeroed && slices.ContainsFunc(b.data, func(x byte) bool { return x != 0 }) {
			t.Fatal("a free block marked zeroed holds non-zero bytes")
		}
	}
	for b := range refs {
		if b.zeroed {
			t.Fatal("a block in use is still marked zeroed")
		}
	}
	if p.allocated != p.inUse+p.cached+len(p.free) {
		t.Fatalf("allocated %d != in use %d + cached %d + free %d", p.allocated, p.inUse, p.cached, len(p.free))
	}
	if p.allocated > p.maxBlocks {
		t.Fatalf("allocated %d blocks, budget allows %d", p.allocated, p.maxBlocks)
	}
	for h, b := range p.table {
		if !b.published || b.hash != h {
			t.Fatalf("table entry %x: block published = %v, hash %x", h, b.published, b.hash)
		}
		if chainHash(b.parent, b.tokens) != h {
			t.Fatalf("table entry %x: block's tokens hash to %x", h, chainHash(b.parent, b.tokens))
		}
	}
}

func seqTokens(start, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(start + i)
	}
	return out
}

func newTestPool(t testing.TB, cfg Config) *Pool {
	t.Helper()
	p, err := NewPool(widen(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewPoolErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no layers", Config{KVHeads: 2, HeadDim: 4}},
		{"no kv heads", Config{Layers: 2, HeadDim: 4}},
		{"no head dim", Config{Layers: 2, KVHeads: 4}},
		{"negative block size", Config{Layers: 2, KVHeads: 2, HeadDim: 4, BlockSize: -1}},
		{"bad dtype", Config{Layers: 2, KVHeads: 2, HeadDim: 4, DType: 7}},
		{"q8_0 head of 48", Config{Layers: 2, KVHeads: 2, HeadDim: 48, DType: Q8_0}},
		{"budget below one block", Config{Layers: 2, KVHeads: 2, HeadDim: 4, Budget: 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewPool(tc.cfg); err == nil {
				t.Fatal("NewPool succeeded")
			}
		})
	}
}

// TestDTypeBytes checks the storage of any number of values, a partial Q8_0 group counting
// whole.
func TestDTypeBytes(t *testing.T) {
	for _, tc := range []struct {
		dt      DType
		n, want int
	}{
		{Float32, 5, 20}, {Float16, 5, 10}, {Q8_0, 0, 0}, {Q8_0, 1, 34}, {Q8_0, 32, 34}, {Q8_0, 33, 68}, {Q8_0, 64, 68},
	} {
		if got := tc.dt.Bytes(tc.n); got != tc.want {
			t.Errorf("%v.Bytes(%d) = %d, want %d", tc.dt, tc.n, got, tc.want)
		}
	}
}

func TestBytesPerToken(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want int64
	}{
		{Config{Layers: 12, KVHeads: 12, HeadDim: 64}, 12 * 2 * 768 * 4},
		{Config{Layers: 12, KVHeads: 12, HeadDim: 64, DType: Float16}, 12 * 2 * 768 * 2},
		{Config{Layers: 5, KVHeads: 4, HeadDim: 8}, 5 * 2 * 32 * 4},
		{Config{Layers: 12, KVHeads: 12, HeadDim: 64, DType: Q8_0}, 12 * 2 * 768 * 34 / 32},
	} {
		p := newTestPool(t, tc.cfg)
		if got := p.BytesPerToken(); got != tc.want {
			t.Errorf("%+v: BytesPerToken = %d, want %d", tc.cfg, got, tc.want)
		}
		if got, want := p.BlockBytes(), tc.want*DefaultBlockSize+4*DefaultBlockSize; got != want {
			t.Errorf("%+v: BlockBytes = %d, want %d", tc.cfg, got, want)
		}
	}
}

var dtypes = []DType{Float32, Float16, Q8_0}

// widen gives a Q8_0 configuration heads of 32 values (one scale group) where a test asks for
// fewer: the same test then runs on every element type.
func widen(cfg Config) Config {
	if cfg.DType == Q8_0 && cfg.HeadDim < Q8Group {
		cfg.HeadDim = Q8Group
	}
	return cfg
}

// stored is what a pool of type dt gives back for a head's row of values: the values
// themselves (kvValue's are exact in half precision), or for Q8_0 each group of 32 quantized
// and scaled back.
func stored(dt DType, row []float32) []float32 {
	out := append([]float32(nil), row...)
	if dt != Q8_0 {
		return out
	}
	q, d := make([]byte, len(row)), make([]uint16, len(row)/Q8Group)
	kernels.QuantizeQ8_0(q, d, row)
	for j, x := range q {
		out[j] = float32(int8(x)) * ggml.HalfToFloat32(d[j/Q8Group])
	}
	return out
}

// elemAt returns element e (< HeadDim) of position r's key (isV false) or value in a head's
// bytes as KHead or VHead give them.
func elemAt(cfg Config, b []byte, r, e int, isV bool) float32 {
	bs, hd := cfg.BlockSize, cfg.HeadDim
	switch cfg.DType {
	case Float16:
		if isV {
			return ggml.HalfToFloat32(binary.LittleEndian.Uint16(b[2*(r*hd+e):]))
		}
		return ggml.HalfToFloat32(binary.LittleEndian.Uint16(b[2*(e*bs+r):]))
	case Q8_0:
		g, j := e/Q8Group, e%Q8Group
		if isV {
			row := b[r*cfg.DType.Bytes(hd):]
			return float32(int8(row[e])) * ggml.HalfToFloat32(binary.LittleEndian.Uint16(row[hd+2*g:]))
		}
		grp := b[g*(Q8Group+2)*bs:]
		return float32(int(grp[kernels.Q8KeyByte(j, r, bs)])-128) * ggml.HalfToFloat32(binary.LittleEndian.Uint16(grp[Q8Group*bs+2*r:]))
	}
	if isV {
		return math.Float32frombits(binary.LittleEndian.Uint32(b[4*(r*hd+e):]))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*(e*bs+r):]))
}

func TestGrowPutRead(t *testing.T) {
	for _, dt := range dtypes {
		for _, n := range []int{1, 3, 4, 5, 17} {
			t.Run(fmt.Sprintf("%v/%d", dt, n), func(t *testing.T) {
				p := newTestPool(t, Config{Layers: 3, KVHeads: 2, HeadDim: 5, BlockSize: 4, DType: dt})
				s := p.NewSequence()
				toks := seqTokens(100, n)
				// In two steps, the second starting inside a block.
				if err := fill(t, s, toks[:n/2]); err != nil {
					t.Fatal(err)
				}
				if err := fill(t, s, toks[n/2:]); err != nil {
					t.Fatal(err)
				}
				verify(t, s, toks)
				checkInvariants(t, p, []*Sequence{s})
				s.Close()
				checkInvariants(t, p, nil)
				if st := p.Stats(); st.InUse != 0 {
					t.Fatalf("after Close: %+v", st)
				}
			})
		}
	}
}

func TestFork(t *testing.T) {
	for _, dt := range dtypes {
		for _, tc := range []struct {
			name          string
			prefix        int // tokens before the fork
			aNew, bNew    int // tokens each side adds afterwards
			wantCopies    int64
			wantAllocated int
		}{
			{"aligned", 8, 3, 5, 0, 2 + 1 + 2},
			{"mid-block", 6, 3, 5, 1, 2 + 2 + 1}, // a: a copy and a new block; b: one more
			{"no growth", 6, 0, 0, 0, 2},
			{"one side", 6, 0, 1, 1, 3},
		} {
			t.Run(fmt.Sprintf("%v/%s", dt, tc.name), func(t *testing.T) {
				p := newTestPool(t, Config{Layers: 2, KVHeads: 2, HeadDim: 4, BlockSize: 4, DType: dt, NoPrefixCache: true})
				a := p.NewSequence()
				base := seqTokens(1, tc.prefix)
				if err := fill(t, a, base); err != nil {
					t.Fatal(err)
				}
				b := a.Fork()
				checkInvariants(t, p, []*Sequence{a, b})
				if st := p.Stats(); st.Allocated != (tc.prefix+3)/4 {
					t.Fatalf("fork allocated: %+v", st)
				}
				wa := append(append([]int32(nil), base...), seqTokens(50, tc.aNew)...)
				wb := append(append([]int32(nil), base...), seqTokens(80, tc.bNew)...)
				if err := fill(t, a, wa[tc.prefix:]); err != nil {
					t.Fatal(err)
				}
				if err := fill(t, b, wb[tc.prefix:]); err != nil {
					t.Fatal(err)
				}
				verify(t, a, wa)
				verify(t, b, wb)
				checkInvariants(t, p, []*Sequence{a, b})
				st := p.Stats()
				if st.Copies != tc.wantCopies || st.Allocated != tc.wantAllocated {
					t.Fatalf("copies = %d, allocated = %d, want %d, %d", st.Copies, st.Allocated, tc.wantCopies, tc.wantAllocated)
				}
				a.Close()
				verify(t, b, wb)
				b.Close()
				checkInvariants(t, p, nil)
			})
		}
	}
}

func TestTruncate(t *testing.T) {
	for _, dt := range dtypes {
		for _, tc := range []struct {
			name      string
			n, to     int
			refill    int
			forkFirst bool
		}{
			{"to zero", 10, 0, 5, false},
			{"to block boundary", 10, 8, 3, false},
			{"inside a block", 10, 6, 7, false},
			{"no-op", 10, 10, 2, false},
			{"shared, inside a block", 10, 6, 7, true},
			{"shared, to block boundary", 12, 4, 1, true},
		} {
			t.Run(fmt.Sprintf("%v/%s", dt, tc.name), func(t *testing.T) {
				p := newTestPool(t, Config{Layers: 2, KVHeads: 2, HeadDim: 4, BlockSize: 4, DType: dt})
				s := p.NewSequence()
				toks := seqTokens(7, tc.n)
				if err := fill(t, s, toks); err != nil {
					t.Fatal(err)
				}
				var other *Sequence
				if tc.forkFirst {
					other = s.Fork()
				}
				if err := s.Truncate(tc.to); err != nil {
					t.Fatal(err)
				}
				verify(t, s, toks[:tc.to])
				checkInvariants(t, p, []*Sequence{s, other})
				want := append(append([]int32(nil), toks[:tc.to]...), seqTokens(500, tc.refill)...)
				if err := fill(t, s, want[tc.to:]); err != nil {
					t.Fatal(err)
				}
				verify(t, s, want)
				if other != nil {
					verify(t, other, toks)
				}
				checkInvariants(t, p, []*Sequence{s, other})
				if err := s.Truncate(len(want) + 1); err == nil {
					t.Fatal("Truncate past the end succeeded")
				}
			})
		}
	}
}

func TestPrefixReuse(t *testing.T) {
	for _, dt := range dtypes {
		for _, tc := range []struct {
			name        string
			first       []int32
			second      []int32
			wantMatched int
		}{
			{"same prompt", seqTokens(1, 13), seqTokens(1, 13), 12},
			{"longer prompt", seqTokens(1, 9), seqTokens(1, 20), 8},
			{"diverges in block 2", seqTokens(1, 12), append(seqTokens(1, 6), seqTokens(99, 6)...), 4},
			{"diverges at once", seqTokens(1, 12), seqTokens(2, 12), 0},
			{"shorter than a block", seqTokens(1, 12), seqTokens(1, 3), 0},
		} {
			t.Run(fmt.Sprintf("%v/%s", dt, tc.name), func(t *testing.T) {
				p := newTestPool(t, Config{Layers: 2, KVHeads: 2, HeadDim: 4, BlockSize: 4, DType: dt})
				a := p.NewSequence()
				if err := fill(t, a, tc.first); err != nil {
					t.Fatal(err)
				}
				a.Close()
				checkInvariants(t, p, nil)

				b := p.NewSequence()
				// CachedPrefix counts what MatchPrefix takes, and takes nothing.
				if got := b.CachedPrefix(tc.second); got != tc.wantMatched || b.Len() != 0 || p.Stats().ReusedTokens != 0 {
					t.Fatalf("CachedPrefix = %d (want %d), then length %d and %d reused positions", got, tc.wantMatched, b.Len(), p.Stats().ReusedTokens)
				}
				checkInvariants(t, p, []*Sequence{b})
				got := b.MatchPrefix(tc.second)
				if got != tc.wantMatched {
					t.Fatalf("MatchPrefix = %d, want %d", got, tc.wantMatched)
				}
				if err := fill(t, b, tc.second[got:]); err != nil {
					t.Fatal(err)
				}
				verify(t, b, tc.second)
				checkInvariants(t, p, []*Sequence{b})
				if st := p.Stats(); st.ReusedTokens != int64(tc.wantMatched) {
					t.Fatalf("ReusedTokens = %d", st.ReusedTokens)
				}
			})
		}
	}
}

func TestPrefixReuseWhileInUse(t *testing.T) {
	// A second sequence shares the first's published blocks while the first still runs; the
	// first then truncates into a shared block and rewrites it, which must copy it.
	p := newTestPool(t, Config{Layers: 2, KVHeads: 2, HeadDim: 4, BlockSize: 4})
	a := p.NewSequence()
	toks := seqTokens(1, 12)
	if err := fill(t, a, toks); err != nil {
		t.Fatal(err)
	}
	b := p.NewSequence()
	if n := b.MatchPrefix(toks); n != 12 {
		t.Fatalf("MatchPrefix = %d, want 12", n)
	}
	checkInvariants(t, p, []*Sequence{a, b})
	if err := a.Truncate(6); err != nil {
		t.Fatal(err)
	}
	wantA := append(seqTokens(1, 6), seqTokens(40, 4)...)
	if err := fill(t, a, wantA[6:]); err != nil {
		t.Fatal(err)
	}
	verify(t, a, wantA)
	verify(t, b, toks)
	checkInvariants(t, p, []*Sequence{a, b})

	// A sole holder of a published block that truncates into it and rewrites it unpublishes
	// it instead of copying.
	copies := p.Stats().Copies
	a.Close()
	if err := b.Truncate(10); err != nil {
		t.Fatal(err)
	}
	wantB := append(seqTokens(1, 10), 77, 78)
	if err := fill(t, b, wantB[10:]); err != nil {
		t.Fatal(err)
	}
	verify(t, b, wantB)
	if got := p.Stats().Copies; got != copies {
		t.Fatalf("copies went from %d to %d", copies, got)
	}
	checkInvariants(t, p, []*Sequence{b})
	c := p.NewSequence()
	if n := c.MatchPrefix(wantB); n != 12 {
		t.Fatalf("MatchPrefix after rewrite = %d, want 12", n)
	}
	verify(t, c, wantB)
}

func TestNoPrefixCache(t *testing.T) {
	p := newTestPool(t, Config{Layers: 1, KVHeads: 2, HeadDim: 4, BlockSize: 4, NoPrefixCache: true})
	a := p.NewSequence()
	if err := fill(t, a, seqTokens(1, 9)); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b := p.NewSequence()
	if n := b.MatchPrefix(seqTokens(1, 9)); n != 0 {
		t.Fatalf("MatchPrefix = %d with prefix caching off", n)
	}
	if st := p.Stats(); st.Cached != 0 || st.Published != 0 || st.Free != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestBudget(t *testing.T) {
	cfg := Config{Layers: 2, KVHeads: 2, HeadDim: 4, BlockSize: 4}
	probe := newTestPool(t, cfg)
	cfg.Budget = 4*probe.BlockBytes() + 100 // four blocks: 16 positions
	p := newTestPool(t, cfg)

	a := p.NewSequence()
	if err := fill(t, a, seqTokens(1, 10)); err != nil { // three blocks
		t.Fatal(err)
	}
	b := p.NewSequence()
	err := b.Grow(seqTokens(1, 5)) // two blocks, one left
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("Grow beyond the budget: err = %v, want ErrBudget", err)
	}
	if b.Len() != 0 || b.NumBlocks() != 0 {
		t.Fatalf("failed Grow changed the sequence: %d positions, %d blocks", b.Len(), b.NumBlocks())
	}
	if err := fill(t, b, seqTokens(50, 4)); err != nil { // the last block
		t.Fatal(err)
	}
	// A fork of a sequence ending inside a block cannot grow without a block for its copy.
	f := a.Fork()
	if err := f.Grow([]int32{9}); !errors.Is(err, ErrBudget) {
		t.Fatalf("copy-on-write beyond the budget: err = %v", err)
	}
	verify(t, f, seqTokens(1, 10))
	checkInvariants(t, p, []*Sequence{a, b, f})
	f.Close()
	b.Close()

	// Cached blocks are evicted, least recently used first, when memory is needed.
	a.Close()
	st := p.Stats()
	if st.Cached != 3 || st.Free != 1 {
		t.Fatalf("after Close: %+v", st)
	}
	c := p.NewSequence()
	if err := fill(t, c, seqTokens(300, 12)); err != nil {
		t.Fatal(err)
	}
	if st = p.Stats(); st.Evictions != 2 {
		t.Fatalf("evictions = %d, want 2", st.Evictions)
	}
	// b's block went first, then a's second block (a released its last blocks first); a's
	// first block is still cached.
	d := p.NewSequence()
	if n := d.MatchPrefix(seqTokens(1, 10)); n != 4 {
		t.Fatalf("MatchPrefix after eviction = %d, want 4", n)
	}
	e := p.NewSequence()
	if n := e.MatchPrefix(seqTokens(50, 4)); n != 0 {
		t.Fatalf("MatchPrefix of an evicted block = %d, want 0", n)
	}
	checkInvariants(t, p, []*Sequence{c, d, e})
	c.Close()
	p.DropCached()
	checkInvariants(t, p, []*Sequence{d, e})
	if st = p.Stats(); st.Cached != 0 || st.InUse != 1 || st.Published != 1 {
		t.Fatalf("after DropCached: %+v", st)
	}
}

// TestReserve checks that reserved blocks are free, zero and taken before any other is
// allocated, within the budget.
func TestReserve(t *testing.T) {
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			cfg := widen(Config{Layers: 2, KVHeads: 2, HeadDim: 4, BlockSize: 4, DType: dt})
			probe := newTestPool(t, cfg)
			cfg.Budget = 4*probe.BlockBytes() + 100 // four blocks
			p := newTestPool(t, cfg)
			if got := p.Reserve(3); got != 3 {
				t.Fatalf("Reserve(3) = %d, want 3", got)
			}
			if st := p.Stats(); st.Allocated != 3 || st.Free != 3 || st.InUse != 0 {
				t.Fatalf("after Reserve(3): %+v", st)
			}
			checkInvariants(t, p, nil)
			// A sequence takes the reserved blocks: nothing more is allocated.
			a := p.NewSequence()
			if err := fill(t, a, seqTokens(1, 6)); err != nil { // two blocks, the second half full
				t.Fatal(err)
			}
			if st := p.Stats(); st.Allocated != 3 || st.Free != 1 || st.InUse != 2 {
				t.Fatalf("after a sequence of two blocks: %+v", st)
			}
			verify(t, a, seqTokens(1, 6))
			// The budget bounds a reservation; a negative or zero one does nothing.
			for _, c := range []struct{ ask, want int }{{-1, 0}, {0, 0}, {5, 1}, {1, 0}} {
				if got := p.Reserve(c.ask); got != c.want {
					t.Fatalf("Reserve(%d) = %d, want %d", c.ask, got, c.want)
				}
			}
			checkInvariants(t, p, []*Sequence{a})
			// A block given back unpublished (a's half-full last one) is cleared when taken
			// again; a reserved one is zero already.
			a.Close()
			b := p.NewSequence()
			if err := b.Grow(seqTokens(40, 8)); err != nil {
				t.Fatal(err)
			}
			p.mu.Lock()
			for i, blk := range b.blocks {
				if slices.ContainsFunc(blk.data, func(x byte) bool { return x != 0 }) {
					t.Errorf("block %d of a new sequence holds stale bytes", i)
				}
			}
			p.mu.Unlock()
			checkInvariants(t, p, []*Sequence{b})
		})
	}
}

// TestRandomOperations runs random grows, forks, truncates, prefix matches and closes against
// a plain model of each sequence's tokens, checking contents and bookkeeping throughout.
func TestRandomOperations(t *testing.T) {
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			cfg := widen(Config{Layers: 2, KVHeads: 2, HeadDim: 4, BlockSize: 4, DType: dt})
			probe := newTestPool(t, cfg)
			cfg.Budget = 40 * probe.BlockBytes()
			p := newTestPool(t, cfg)
			r := rand.New(rand.NewPCG(1, 2))
			type live struct {
				s    *Sequence
				toks []int32
			}
			var seqs []*live
			all := func() []*Sequence {
				out := make([]*Sequence, len(seqs))
				for i, l := range seqs {
					out[i] = l.s
				}
				return out
			}
			prompts := [][]int32{seqTokens(1, 11), seqTokens(1, 19), append(seqTokens(1, 8), seqTokens(60, 9)...)}
			for step := 0; step < 3000; step++ {
				switch op := r.IntN(10); {
				case op < 2 && len(seqs) < 12: // new sequence from a prompt, reusing what it can
					s := p.NewSequence()
					pr := prompts[r.IntN(len(prompts))]
					n := s.MatchPrefix(pr[:len(pr)-1])
					if err := fill(t, s, pr[n:]); err != nil {
						if !errors.Is(err, ErrBudget) {
							t.Fatal(err)
						}
						s.Close()
						continue
					}
					seqs = append(seqs, &live{s, append([]int32(nil), pr...)})
				case op < 5 && len(seqs) > 0: // grow
					l := seqs[r.IntN(len(seqs))]
					add := make([]int32, 1+r.IntN(6))
					for i := range add {
						add[i] = int32(r.IntN(5))
					}
					if err := fill(t, l.s, add); err != nil {
						if !errors.Is(err, ErrBudget) {
							t.Fatal(err)
						}
						continue
					}
					l.toks = append(l.toks, add...)
				case op < 6 && len(seqs) > 0 && len(seqs) < 12: // fork
					l := seqs[r.IntN(len(seqs))]
					seqs = append(seqs, &live{l.s.Fork(), append([]int32(nil), l.toks...)})
				case op < 8 && len(seqs) > 0: // truncate
					l := seqs[r.IntN(len(seqs))]
					n := r.IntN(len(l.toks) + 1)
					if err := l.s.Truncate(n); err != nil {
						t.Fatal(err)
					}
					l.toks = l.toks[:n]
				case op == 8 && r.IntN(4) == 0: // reserve blocks ahead of need
					k := r.IntN(5)
					p.mu.Lock()
					want := min(k, p.maxBlocks-p.allocated)
					p.mu.Unlock()
					if got := p.Reserve(k); got != want {
						t.Fatalf("Reserve(%d) = %d, want %d", k, got, want)
					}
				case len(seqs) > 0: // close
					i := r.IntN(len(seqs))
					seqs[i].s.Close()
					seqs = append(seqs[:i], seqs[i+1:]...)
				}
				checkInvariants(t, p, all())
				if step%50 == 0 {
					for _, l := range seqs {
						verify(t, l.s, l.toks)
					}
				}
			}
			for _, l := range seqs {
				verify(t, l.s, l.toks)
				l.s.Close()
			}
			checkInvariants(t, p, nil)
			if st := p.Stats(); st.ReusedTokens == 0 || st.Copies == 0 || st.Evictions == 0 {
				t.Fatalf("the run did not exercise reuse, copies and eviction: %+v", st)
			}
		})
	}
}

// TestConcurrentSequences runs sequences that share prompts (and so blocks) on several
// goroutines at once; run it with -race.
func TestConcurrentSequences(t *testing.T) {
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			p := newTestPool(t, Config{Layers: 2, KVHeads: 2, HeadDim: 8, BlockSize: 4, DType: dt})
			prompt := seqTokens(1, 14)
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 9))
					for iter := 0; iter < 40; iter++ {
						s := p.NewSequence()
						n := s.MatchPrefix(prompt[:len(prompt)-1])
						if err := fill(t, s, prompt[n:]); err != nil {
							errs <- err
							return
						}
						toks := append([]int32(nil), prompt...)
						f := s.Fork()
						ftoks := append([]int32(nil), toks...)
						for step := 0; step < 6; step++ {
							tok := []int32{int32(r.IntN(3))}
							if err := fill(t, f, tok); err != nil {
								errs <- err
								return
							}
							ftoks = append(ftoks, tok...)
							if r.IntN(3) == 0 {
								cut := len(ftoks) - 1 - r.IntN(3)
								if err := f.Truncate(cut); err != nil {
									errs <- err
									return
								}
								ftoks = ftoks[:cut]
							}
						}
						verify(t, s, toks)
						verify(t, f, ftoks)
						s.Close()
						f.Close()
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			checkInvariants(t, p, nil)
			if st := p.Stats(); st.InUse != 0 || st.ReusedTokens == 0 {
				t.Fatalf("stats after the run: %+v", st)
			}
		})
	}
}

func TestHalfConversion(t *testing.T) {
	// Every half value decodes as the reference does, through the fast path (blocks of 8)
	// and the tail.
	src := make([]uint16, 1<<16+3)
	for i := range src {
		src[i] = uint16(i)
	}
	dst := make([]float32, len(src))
	DecodeHalf(dst, src)
	for i, h := range src {
		want := ggml.HalfToFloat32(h)
		if math.Float32bits(dst[i]) != math.Float32bits(want) && !(dst[i] != dst[i] && want != want) {
			t.Fatalf("DecodeHalf(%#04x) = %v, want %v", h, dst[i], want)
		}
	}
	// Encoding rounds as the reference does, across magnitudes, ties and specials.
	r := rand.New(rand.NewPCG(3, 4))
	fs := []float32{0, -0, 1, -1, 65504, 65520, 1e9, -1e9, 5.96e-8, 2.98e-8, 1e-10, float32(math.Inf(1)), float32(math.Inf(-1))}
	for range 100000 {
		fs = append(fs, math.Float32frombits(r.Uint32()))
		fs = append(fs, float32(r.NormFloat64()))
	}
	for _, h := range src[:1<<16] { // halfway points between neighbouring halves
		f := ggml.HalfToFloat32(h)
		bits := math.Float32bits(f)
		if f == f && !math.IsInf(float64(f), 0) {
			fs = append(fs, math.Float32frombits(bits+1<<12))
		}
	}
	enc := make([]uint16, len(fs))
	EncodeHalf(enc, fs)
	for i, f := range fs {
		want := ggml.Float32ToHalf(f)
		if f != f { // NaN: any NaN will do
			if enc[i]&0x7c00 != 0x7c00 || enc[i]&0x3ff == 0 {
				t.Fatalf("EncodeHalf(NaN) = %#04x", enc[i])
			}
			continue
		}
		if enc[i] != want {
			t.Fatalf("EncodeHalf(%v = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), enc[i], want)
		}
	}
}

func BenchmarkFork(b *testing.B) {
	p := newTestPool(b, Config{Layers: 12, KVHeads: 12, HeadDim: 64, DType: Float16, Budget: 4 << 30})
	s := p.NewSequence()
	if err := s.Grow(make([]int32, 1024)); err != nil {
		b.Fatal(err)
	}
	s.Commit()
	b.ResetTimer()
	for range b.N {
		s.Fork().Close()
	}
}

// BenchmarkPut writes one position's keys and values of every layer of a 110M model (12
// layers of 12 heads of 64) in each element type: what a forward pass adds to the cache per row.
func BenchmarkPut(b *testing.B) {
	for _, dt := range dtypes {
		b.Run(dt.String(), func(b *testing.B) {
			p := newTestPool(b, Config{Layers: 12, KVHeads: 12, HeadDim: 64, DType: dt})
			s := p.NewSequence()
			if err := s.Grow(make([]int32, 16)); err != nil {
				b.Fatal(err)
			}
			k, v := make([]float32, 12*64), make([]float32, 12*64)
			for i := range k {
				k[i], v[i] = float32(i%37)-18, float32(i%23)-11
			}
			pos := 0
			for b.Loop() {
				for l := range 12 {
					s.Put(l, pos, k, v)
				}
				pos = (pos + 1) % 16
			}
		})
	}
}

func BenchmarkDecodeHalf(b *testing.B) {
	src := make([]uint16, 16*768)
	dst := make([]float32, len(src))
	b.SetBytes(int64(2 * len(src)))
	for range b.N {
		DecodeHalf(dst, src)
	}
}

func TestCopy(t *testing.T) {
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			p := newTestPool(t, Config{Layers: 2, KVHeads: 2, HeadDim: 4, BlockSize: 4, DType: dt, NoPrefixCache: true})
			a := p.NewSequence()
			base := seqTokens(1, 10)
			if err := fill(t, a, base); err != nil {
				t.Fatal(err)
			}
			c, err := a.Copy()
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, p, []*Sequence{a, c})
			if st := p.Stats(); st.Allocated != 6 || st.Copies != 3 {
				t.Fatalf("a copy of 3 blocks: %+v", st)
			}
			wc := append(append([]int32(nil), base...), seqTokens(60, 3)...)
			if err := fill(t, c, wc[10:]); err != nil {
				t.Fatal(err)
			}
			verify(t, a, base)
			verify(t, c, wc)
			if st := p.Stats(); st.Copies != 3 {
				t.Fatalf("growing a copy copied again: %+v", st)
			}
			a.Close()
			c.Close()
			checkInvariants(t, p, nil)
		})
	}
}

// TestPutHeads writes every position's heads in pieces (PutHeads of heads [0, 1), then [1, 3),
// and in the other order) and checks that the sequence reads as after whole Puts; heads out
// of range panic, naming them.
func TestPutHeads(t *testing.T) {
	for _, dt := range dtypes {
		for _, pieces := range [][][2]int{{{0, 1}, {1, 3}}, {{1, 3}, {0, 1}}, {{2, 3}, {0, 2}, {2, 2}}} {
			p := newTestPool(t, Config{Layers: 2, KVHeads: 3, HeadDim: 32, BlockSize: 4, DType: dt})
			s := p.NewSequence()
			toks := seqTokens(7, 6)
			if err := s.Grow(toks); err != nil {
				t.Fatal(err)
			}
			cfg := s.Pool().Config()
			k := make([]float32, cfg.KVHeads*cfg.HeadDim)
			v := make([]float32, cfg.KVHeads*cfg.HeadDim)
			for pos := range toks {
				for l := range cfg.Layers {
					for j := range k {
						k[j] = kvValue(toks[:pos+1], l, j, false)
						v[j] = kvValue(toks[:pos+1], l, j, true)
					}
					for _, h := range pieces {
						s.PutHeads(l, pos, h[0], h[1], k, v)
					}
				}
			}
			s.Commit()
			verify(t, s, toks)
			s.Close()
		}
	}
	p := newTestPool(t, Config{Layers: 1, KVHeads: 2, HeadDim: 32, BlockSize: 4})
	s := p.NewSequence()
	defer s.Close()
	if err := s.Grow([]int32{1}); err != nil {
		t.Fatal(err)
	}
	row := make([]float32, 64)
	for _, h := range [][2]int{{-1, 1}, {1, 0}, {0, 3}} {
		func() {
			defer func() {
				if e := recover(); e == nil || !strings.Contains(fmt.Sprint(e), fmt.Sprintf("heads [%d, %d)", h[0], h[1])) {
					t.Errorf("PutHeads of heads [%d, %d): panic %v, want one naming them", h[0], h[1], e)
				}
			}()
			s.PutHeads(0, 0, h[0], h[1], row, row)
		}()
	}
}
