package cache

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/loomlm/loom/model/ggml"
	"github.com/loomlm/loom/model/kernels"
)

// Sequence is one sequence's keys and values: a list of blocks of the pool and the number of
// positions filled. Positions [0, Len) hold the K and V of the sequence's tokens, layer by
// layer. A Sequence is used by one goroutine at a time.
type Sequence struct {
	pool   *Pool
	blocks []*block
	// hashes are the chain hashes of the committed full blocks, in order.
	hashes    []uint64
	n         int
	committed int
	closed    bool
}

// NewSequence returns an empty sequence. It holds no memory until it grows.
func (p *Pool) NewSequence() *Sequence {
	return &Sequence{pool: p}
}

// Pool returns the pool the sequence takes its blocks from.
func (s *Sequence) Pool() *Pool { return s.pool }

// Len returns the number of positions the sequence holds (reserved by Grow, written or not).
func (s *Sequence) Len() int { return s.n }

// NumBlocks returns the number of blocks in the sequence's block table.
func (s *Sequence) NumBlocks() int { return len(s.blocks) }

// Tokens appends the sequence's tokens, positions 0 to Len-1, to dst and returns it.
func (s *Sequence) Tokens(dst []int32) []int32 {
	bs := s.pool.cfg.BlockSize
	for i, b := range s.blocks {
		dst = append(dst, b.tokens[:min(bs, s.n-i*bs)]...)
	}
	return dst
}

func (s *Sequence) checkOpen() {
	if s.closed {
		panic("cache: use of a closed sequence")
	}
}

// MatchPrefix appends to the sequence the published blocks that hold the longest run of
// whole blocks at the start of tokens, taken as the tokens following the sequence's current
// ones, and returns how many tokens they cover (a multiple of the block size, possibly 0).
// Those positions need no forward pass: their keys and values are already computed. It
// matches only when the sequence is committed and ends on a block boundary (a new sequence
// always does) and prefix reuse is on. To be left a token to compute logits from, callers pass
// all but the last token of a prompt.
func (s *Sequence) MatchPrefix(tokens []int32) int { return s.matchPrefix(tokens, true) }

// CachedPrefix returns how many tokens MatchPrefix would take from the published blocks now,
// without taking them.
func (s *Sequence) CachedPrefix(tokens []int32) int { return s.matchPrefix(tokens, false) }

// matchPrefix is MatchPrefix when take is set, else CachedPrefix.
func (s *Sequence) matchPrefix(tokens []int32, take bool) int {
	s.checkOpen()
	p := s.pool
	bs := p.cfg.BlockSize
	if p.cfg.NoPrefixCache || s.n%bs != 0 || s.committed != s.n || len(tokens) < bs {
		return 0
	}
	var prev uint64
	if len(s.hashes) > 0 {
		prev = s.hashes[len(s.hashes)-1]
	}
	matched := 0
	p.mu.Lock()
	for ; matched+bs <= len(tokens); matched += bs {
		blk := tokens[matched : matched+bs]
		h := chainHash(prev, blk)
		b, ok := p.table[h]
		if !ok || b.parent != prev || !equalTokens(b.tokens, blk) {
			break
		}
		if take {
			p.acquire(b)
			s.blocks = append(s.blocks, b)
			s.hashes = append(s.hashes, h)
		}
		prev = h
	}
	if take {
		p.reused += int64(matched)
		s.n += matched
		s.committed = s.n
	}
	p.mu.Unlock()
	return matched
}

func equalTokens(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Grow reserves positions Len … Len+len(tokens)-1 for tokens, whose keys and values the
// caller then writes with Put and confirms with Commit. It allocates the blocks needed and
// copies the last block if it is shared with another sequence (copy-on-write). When the pool
// cannot provide the blocks within its budget, Grow returns an error wrapping ErrBudget and
// the sequence is unchanged.
func (s *Sequence) Grow(tokens []int32) error {
	s.checkOpen()
	if len(tokens) == 0 {
		return nil
	}
	p := s.pool
	bs := p.cfg.BlockSize
	newN := s.n + len(tokens)
	add := (newN+bs-1)/bs - len(s.blocks)
	partial := s.n%bs != 0

	p.mu.Lock()
	var last *block
	cow := false
	if partial {
		last = s.blocks[len(s.blocks)-1]
		cow = last.refs > 1
	}
	need := add
	if cow {
		need++
	}
	if have := p.available(); need > have {
		err := p.budgetError(need, have)
		p.mu.Unlock()
		return err
	}
	if partial {
		switch {
		case cow:
			nb := p.takeBlock(false) // overwritten whole by the copy
			p.copyBlock(nb, last)
			p.release(last)
			s.blocks[len(s.blocks)-1] = nb
		case last.published:
			// Held by this sequence alone after a Truncate into a published block: it
			// stops being published before its rows change.
			p.unpublish(last)
		}
	}
	for range add {
		s.blocks = append(s.blocks, p.take())
	}
	p.mu.Unlock()

	for i, t := range tokens {
		pos := s.n + i
		s.blocks[pos/bs].tokens[pos%bs] = t
	}
	s.n = newN
	return nil
}

// Put writes the key row k and the value row v of layer at position pos, which must have been
// reserved by Grow and not yet committed. Both rows hold KVHeads × HeadDim values, head after
// head; Float16 storage rounds them to half precision, Q8_0 storage quantizes each run of 32
// values (see Span). Puts of different positions, or of different heads (PutHeads), may run
// concurrently (they write disjoint values) while nothing else changes the sequence.
func (s *Sequence) Put(layer, pos int, k, v []float32) {
	s.PutHeads(layer, pos, 0, s.pool.cfg.KVHeads, k, v)
}

// PutHeads is Put of the key/value heads [h0, h1) of k and v alone: an attention task that
// takes some of the heads writes their keys and values of its rows itself, in its own core's
// cache, where it then reads them.
func (s *Sequence) PutHeads(layer, pos, h0, h1 int, k, v []float32) {
	s.checkOpen()
	p := s.pool
	if pos < s.committed || pos >= s.n {
		panic(fmt.Sprintf("cache: Put at position %d outside the positions [%d, %d) reserved by Grow", pos, s.committed, s.n))
	}
	if layer < 0 || layer >= p.cfg.Layers || len(k) != p.kvDim || len(v) != p.kvDim || h0 < 0 || h0 > h1 || h1 > p.cfg.KVHeads {
		panic(fmt.Sprintf("cache: Put of layer %d, heads [%d, %d), with rows of %d and %d values; want layer < %d, heads within [0, %d), rows of %d",
			layer, h0, h1, len(k), len(v), p.cfg.Layers, p.cfg.KVHeads, p.kvDim))
	}
	bs, hd := p.cfg.BlockSize, p.cfg.HeadDim
	b := s.blocks[pos/bs]
	r := pos % bs
	layerData := b.data[layer*p.layerBytes : (layer+1)*p.layerBytes]
	var tmp [256]uint16
	var kq *q8Row // a key row quantized, before it is written transposed
	for h := h0; h < h1; h++ {
		kh, vh := k[h*hd:(h+1)*hd], v[h*hd:(h+1)*hd]
		kdst := layerData[h*p.headBytes : (h+1)*p.headBytes]
		vdst := layerData[(p.cfg.KVHeads+h)*p.headBytes : (p.cfg.KVHeads+h+1)*p.headBytes]
		// Keys transposed (element d of the block's keys in row d), values row-major.
		switch p.cfg.DType {
		case Q8_0:
			rowBytes := p.cfg.DType.Bytes(hd)
			vrow := vdst[r*rowBytes : (r+1)*rowBytes]
			kernels.QuantizeQ8_0(vrow[:hd], halves(vrow[hd:]), vh)
			if kq == nil {
				kq = p.q8Scratch.Get().(*q8Row)
				defer p.q8Scratch.Put(kq)
			}
			q, d := kq.q, kq.d
			kernels.QuantizeQ8_0(q, d, kh)
			for g := range hd / Q8Group {
				kg := kdst[g*(Q8Group+2)*bs:]
				// Elements 4w…4w+3 lie side by side (kernels.Q8KeyByte): a word each,
				// unsigned (each byte + 128).
				src := q[g*Q8Group : (g+1)*Q8Group]
				for w := range Q8Group / 4 {
					o := kernels.Q8KeyByte(4*w, r, bs)
					binary.LittleEndian.PutUint32(kg[o:o+4], binary.LittleEndian.Uint32(src[4*w:])^0x80808080)
				}
				halves(kg[Q8Group*bs:])[r] = d[g]
			}
			continue
		case Float16:
			EncodeHalf(halves(vdst)[r*hd:(r+1)*hd], vh)
			kt := halves(kdst)
			enc := tmp[:0]
			if hd > len(tmp) {
				enc = make([]uint16, hd)
			}
			enc = enc[:hd]
			EncodeHalf(enc, kh)
			for d, e := range enc {
				kt[d*bs+r] = e
			}
			continue
		}
		copy(floats(vdst)[r*hd:(r+1)*hd], vh)
		kt := floats(kdst)
		for d, x := range kh {
			kt[d*bs+r] = x
		}
	}
}

// floats and halves view little-endian storage as float32 or binary16 values.
func floats(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

func halves(b []byte) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2)
}

// Commit marks every position of the sequence as written. Blocks that became full are
// published for prefix reuse, unless a block with the same tokens already is.
func (s *Sequence) Commit() {
	s.checkOpen()
	p := s.pool
	bs := p.cfg.BlockSize
	s.committed = s.n
	full := s.n / bs
	if len(s.hashes) >= full {
		return
	}
	prev := uint64(0)
	if len(s.hashes) > 0 {
		prev = s.hashes[len(s.hashes)-1]
	}
	if !p.cfg.NoPrefixCache {
		p.mu.Lock()
		defer p.mu.Unlock()
	}
	for i := len(s.hashes); i < full; i++ {
		b := s.blocks[i]
		h := chainHash(prev, b.tokens)
		s.hashes = append(s.hashes, h)
		if !p.cfg.NoPrefixCache && !b.published {
			if _, dup := p.table[h]; !dup {
				b.hash, b.parent, b.published = h, prev, true
				p.table[h] = b
			}
		}
		prev = h
	}
}

// Span is what attention reads of one block for one layer: positions Start … Start+Rows-1 of
// the sequence, as views of the stored bytes (which must not be modified). The element type
// is DType (little-endian float32 or IEEE binary16, or Q8_0's bytes and scales, below).
//
// KHead(h) is head h's keys transposed, a HeadDim × BlockSize row-major matrix whose column t
// is position Start+t, so that a query's scores against the block are BlockSize lanes of
// multiply-adds, one element of the query broadcast at a time (columns past Rows hold zeros or
// keys of rolled-back positions, always finite). VHead(h) is head h's values as a Rows ×
// HeadDim row-major matrix, so that the weighted sum of values adds whole rows, each weight
// broadcast (kernels.AttnScores and kernels.AttnAccumulate).
//
// In Q8_0 storage each run of 32 values has its own scale, stored after the values it scales.
// KHead(h) is HeadDim/32 groups, each 8 rows of BlockSize × 4 bytes followed by BlockSize
// half-precision scales, one per position: row t holds, position after position, the four
// elements 32g+4t … 32g+4t+3 of the position's key, each as its signed byte plus 128 (an
// unsigned byte), so that one VPDPBUSD multiplies four elements of 16 keys by four of a
// quantized query (kernels.AttnScoresQ8). A key's element 32g+j is (byte j/4·4·BlockSize +
// 4·position + j mod 4 of group g) − 128, times the position's scale in group g. VHead(h) is
// Rows rows of HeadDim signed bytes, each followed by its HeadDim/32 half-precision scales.
type Span struct {
	Start, Rows        int
	BlockSize, HeadDim int
	DType              DType
	// K and V are the layer's keys and values in the block, head after head.
	K, V []byte
}

// KHead returns head h's keys transposed: HeadDim × BlockSize values, row-major (row d holds
// element d of every position's key; positions Rows and up are not written yet), or for
// Q8_0 groups of 32 elements with their scales (see Span).
func (sp *Span) KHead(h int) []byte {
	hb := sp.DType.Bytes(sp.BlockSize * sp.HeadDim)
	return sp.K[h*hb : (h+1)*hb]
}

// VHead returns head h's values: Rows × HeadDim values, row-major (each row followed by its
// scales for Q8_0).
func (sp *Span) VHead(h int) []byte {
	hb := sp.DType.Bytes(sp.BlockSize * sp.HeadDim)
	return sp.V[h*hb : h*hb+sp.Rows*sp.DType.Bytes(sp.HeadDim)]
}

// KFloat32 returns KHead(h) as float32 values, nil unless DType is Float32.
func (sp *Span) KFloat32(h int) []float32 {
	if sp.DType != Float32 {
		return nil
	}
	return floats(sp.KHead(h))
}

// VFloat32 returns VHead(h) as float32 values, nil unless DType is Float32.
func (sp *Span) VFloat32(h int) []float32 {
	if sp.DType != Float32 {
		return nil
	}
	return floats(sp.VHead(h))
}

// KHalf returns KHead(h) as IEEE half-precision bits, nil unless DType is Float16.
func (sp *Span) KHalf(h int) []uint16 {
	if sp.DType != Float16 {
		return nil
	}
	return halves(sp.KHead(h))
}

// VHalf returns VHead(h) as IEEE half-precision bits, nil unless DType is Float16.
func (sp *Span) VHalf(h int) []uint16 {
	if sp.DType != Float16 {
		return nil
	}
	return halves(sp.VHead(h))
}

// Spans appends to dst the spans covering positions [0, end) of layer, in order, and returns
// it. end must not exceed Len; positions reserved by Grow but not yet written read as zeros or
// as the values the block held before.
func (s *Sequence) Spans(layer, end int, dst []Span) []Span {
	s.checkOpen()
	p := s.pool
	if end < 0 || end > s.n || layer < 0 || layer >= p.cfg.Layers {
		panic(fmt.Sprintf("cache: Spans of layer %d to position %d of a sequence of %d", layer, end, s.n))
	}
	bs := p.cfg.BlockSize
	half := p.cfg.KVHeads * p.headBytes
	for start := 0; start < end; start += bs {
		b := s.blocks[start/bs]
		ld := b.data[layer*p.layerBytes : (layer+1)*p.layerBytes]
		dst = append(dst, Span{
			Start: start, Rows: min(bs, end-start),
			BlockSize: bs, HeadDim: p.cfg.HeadDim, DType: p.cfg.DType,
			K: ld[:half:half], V: ld[half:],
		})
	}
	return dst
}

// ReadKV copies the key and value rows of layer at positions [start, end) into k and v as
// float32, row after row, each row KVHeads × HeadDim values head after head; each must hold
// (end-start) × KVHeads × HeadDim values.
func (s *Sequence) ReadKV(layer, start, end int, k, v []float32) {
	s.checkOpen()
	p := s.pool
	d := p.kvDim
	if start < 0 || start > end || end > s.n || len(k) != (end-start)*d || len(v) != (end-start)*d {
		panic(fmt.Sprintf("cache: ReadKV of positions [%d, %d) of a sequence of %d into %d and %d values", start, end, s.n, len(k), len(v)))
	}
	bs, hd := p.cfg.BlockSize, p.cfg.HeadDim
	for pos := start; pos < end; pos++ {
		b := s.blocks[pos/bs]
		r := pos % bs
		ld := b.data[layer*p.layerBytes : (layer+1)*p.layerBytes]
		krow, vrow := k[(pos-start)*d:(pos-start+1)*d], v[(pos-start)*d:(pos-start+1)*d]
		for h := range p.cfg.KVHeads {
			kh := ld[h*p.headBytes : (h+1)*p.headBytes]
			vh := ld[(p.cfg.KVHeads+h)*p.headBytes : (p.cfg.KVHeads+h+1)*p.headBytes]
			switch p.cfg.DType {
			case Q8_0:
				rowBytes := p.cfg.DType.Bytes(hd)
				vq := vh[r*rowBytes : (r+1)*rowBytes]
				for g := range hd / Q8Group {
					dv := ggml.HalfToFloat32(halves(vq[hd:])[g])
					kg := kh[g*(Q8Group+2)*bs:]
					dk := ggml.HalfToFloat32(halves(kg[Q8Group*bs:])[r])
					for j := range Q8Group {
						vrow[h*hd+g*Q8Group+j] = float32(int8(vq[g*Q8Group+j])) * dv
						krow[h*hd+g*Q8Group+j] = float32(int(kg[kernels.Q8KeyByte(j, r, bs)])-128) * dk
					}
				}
				continue
			case Float16:
				DecodeHalf(vrow[h*hd:(h+1)*hd], halves(vh)[r*hd:(r+1)*hd])
				kt := halves(kh)
				for j := range hd {
					krow[h*hd+j] = ggml.HalfToFloat32(kt[j*bs+r])
				}
				continue
			}
			copy(vrow[h*hd:(h+1)*hd], floats(vh)[r*hd:(r+1)*hd])
			kt := floats(kh)
			for j := range hd {
				krow[h*hd+j] = kt[j*bs+r]
			}
		}
	}
}

// Fork returns a new sequence with the same positions, sharing every block copy-on-write: the
// cost is one reference count per block. Either sequence may then grow or be truncated
// without affecting the other.
func (s *Sequence) Fork() *Sequence {
	s.checkOpen()
	p := s.pool
	f := &Sequence{
		pool:      p,
		blocks:    append(make([]*block, 0, cap(s.blocks)), s.blocks...),
		hashes:    append([]uint64(nil), s.hashes...),
		n:         s.n,
		committed: s.committed,
	}
	p.mu.Lock()
	for _, b := range s.blocks {
		p.acquire(b)
	}
	p.mu.Unlock()
	return f
}

// Copy returns a new sequence with the same positions in blocks of its own: every block is
// copied now instead of shared. It exists to measure what copy-on-write forks save; it fails
// with ErrBudget when the pool cannot provide the blocks.
func (s *Sequence) Copy() (*Sequence, error) {
	s.checkOpen()
	p := s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if have := p.available(); len(s.blocks) > have {
		return nil, p.budgetError(len(s.blocks), have)
	}
	c := &Sequence{
		pool:      p,
		blocks:    make([]*block, len(s.blocks), cap(s.blocks)),
		hashes:    append([]uint64(nil), s.hashes...),
		n:         s.n,
		committed: s.committed,
	}
	for i, b := range s.blocks {
		c.blocks[i] = p.takeBlock(false) // overwritten whole by the copy
		p.copyBlock(c.blocks[i], b)
	}
	return c, nil
}

// Truncate rolls the sequence back to its first n positions, 0 ≤ n ≤ Len, releasing the blocks
// past them.
func (s *Sequence) Truncate(n int) error {
	s.checkOpen()
	if n < 0 || n > s.n {
		return fmt.Errorf("cache: truncate to %d positions: the sequence has %d", n, s.n)
	}
	s.truncate(n)
	return nil
}

func (s *Sequence) truncate(n int) {
	p := s.pool
	bs := p.cfg.BlockSize
	keep := (n + bs - 1) / bs
	if keep < len(s.blocks) {
		p.mu.Lock()
		// Last blocks first, so that the cache evicts the ends of prefixes before their
		// beginnings.
		for i := len(s.blocks) - 1; i >= keep; i-- {
			p.release(s.blocks[i])
			s.blocks[i] = nil
		}
		p.mu.Unlock()
		s.blocks = s.blocks[:keep]
	}
	s.hashes = s.hashes[:min(len(s.hashes), n/bs)]
	s.n = n
	s.committed = min(s.committed, n)
}

// Close releases the sequence's blocks. Published blocks stay cached for prefix reuse. The
// sequence must not be used afterwards; closing twice does nothing.
func (s *Sequence) Close() {
	if s.closed {
		return
	}
	s.truncate(0)
	s.closed = true
}
