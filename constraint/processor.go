package constraint

import (
	"fmt"
	"math"
	mathbits "math/bits"
	"reflect"
	"slices"
	"sync"

	"github.com/loomlm/loom/constraint/earley"
	"github.com/loomlm/loom/constraint/grammar"
	"github.com/loomlm/loom/constraint/tokentrie"
	"github.com/loomlm/loom/core"
)

// sparseDirect is the candidate count up to which a sparse set is checked token by token
// against the parser instead of through a full mask.
const sparseDirect = 64

// Processor constrains generated text to a grammar: it bans (-Inf on a dense set; removes
// from a sparse set) every token whose bytes cannot continue a sentence of the grammar, bans
// tokens with no bytes (control tokens), and allows the end-of-generation tokens only when the
// text so far is a complete sentence. Once an end token is accepted, only end tokens are
// allowed (a speculative draft may run past the end). The prompt is not constrained: the
// grammar starts at the first generated token.
//
// It is a core.StatefulProcessor: Accept advances its Earley parser by the chosen token's
// bytes, and Clone, which the session calls for every fork and after every token (its
// rollback snapshot), shares the parser's chart and costs O(1). A chosen token that the mask
// forbids (a strategy forcing it) makes the next Process fail with an error naming the token.
type Processor struct {
	name string
	cfg  *grammar.CFG
	m    *earley.Matcher
	// cur holds the bits of the mask last computed or taken from the cache (see maskBuf).
	cur *maskBuf
	// runs and slices are Mask's scratch: the regular runs of the parser's state and their
	// vocabulary slices.
	runs   []earley.Run
	slices []*tokentrie.Slice
	// childRuns is the scratch of the walk's child slices; walk is the walk's options, its
	// Child bound to p once, walking walkTrie (the trie of the mask being made).
	childRuns []earley.Run
	walk      tokentrie.WalkOptions
	walkTrie  *tokentrie.Trie
	// parts and childParts are the scratch of the unbounded runs' automata at the root and
	// below the first byte.
	parts, childParts []*earley.Automaton
	// maskFor and maskAt are the tokenizer and parser position the mask was last computed
	// for, while it is still that of the current state (Accept and Clone reset them).
	maskFor core.Tokenizer
	maskAt  int
	ended   bool  // an end-of-generation token was accepted
	err     error // a forbidden token was accepted
	// masks is shared by p and its clones: the masks of recent parser states by their key
	// within the longest token (earley.Matcher.AppendStateKeyWithin); key is the scratch the
	// current key is built in.
	masks *maskCache
	key   []byte
}

// maskCache keeps the masks of the last few parser states of a processor and its clones, by
// the state's key: inside a JSON string the state after every character has the same key, so
// the string's masks after the first are taken from the cache. A cached mask is shared, not
// copied: each mask lives in a maskBuf that counts its holders, the cache entry and the
// processors whose current mask it is (copying 16 KB into the cache for every mask made, and
// out of it for every one taken, was a tenth of a warm pass's mask time on a 128k
// vocabulary). It is safe for concurrent use.
type maskCache struct {
	mu      sync.Mutex
	entries [maskCacheSize]maskEntry
	next    int // the entry the next miss replaces
	hits    int
	spare   []*maskBuf // buffers no one holds any more, for the next mask to be made
}

type maskEntry struct {
	tok core.Tokenizer
	key string
	buf *maskBuf
}

// maskBuf is a mask's bits and the number of its holders (guarded by the cache's mu). A
// buffer in the cache, or held by more than one, is never written; one that a processor
// alone holds is that processor's to write.
type maskBuf struct {
	bits tokentrie.Mask
	refs int
}

// maskCacheSize is the number of masks a maskCache keeps (each the vocabulary's size in bits:
// 16 KB for 128k tokens).
const maskCacheSize = 8

// take returns the buffer cached for (tok, key) with bits of words words, held for the caller
// in place of held (which it releases), or nil (and holds on to held).
func (c *maskCache) take(tok core.Tokenizer, key []byte, words int, held *maskBuf) *maskBuf {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.entries {
		if e := &c.entries[i]; e.buf != nil && e.tok == tok && e.key == string(key) && len(e.buf.bits) == words {
			c.hits++
			if e.buf != held {
				e.buf.refs++
				c.release(held)
			}
			return e.buf
		}
	}
	return nil
}

// writable returns a buffer of a vocabulary of n tokens that only the caller holds: held
// when it is the caller's alone, else (held released) a spare one or a new one.
func (c *maskCache) writable(held *maskBuf, n int) *maskBuf {
	words := (n + 63) / 64
	c.mu.Lock()
	defer c.mu.Unlock()
	if held != nil && held.refs == 1 && len(held.bits) == words {
		return held
	}
	c.release(held)
	for len(c.spare) > 0 {
		b := c.spare[len(c.spare)-1]
		c.spare = c.spare[:len(c.spare)-1]
		if len(b.bits) == words {
			b.refs = 1
			return b
		}
	}
	return &maskBuf{bits: tokentrie.NewMask(n), refs: 1}
}

// put caches buf, held by the caller, for (tok, key): from now on it is not written.
func (c *maskCache) put(tok core.Tokenizer, key []byte, buf *maskBuf) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &c.entries[c.next]
	c.next = (c.next + 1) % maskCacheSize
	c.release(e.buf)
	e.tok, e.key, e.buf = tok, string(key), buf
	buf.refs++
}

// release drops a hold on b (nil: none); c.mu is held. A buffer no one holds becomes a
// spare.
func (c *maskCache) release(b *maskBuf) {
	if b == nil {
		return
	}
	if b.refs--; b.refs == 0 && len(c.spare) < maskCacheSize {
		c.spare = append(c.spare, b)
	}
}

// NewGrammar compiles GBNF source (start rule "root") into a processor named "grammar".
// Errors name line and column.
func NewGrammar(src string) (*Processor, error) {
	g, err := grammar.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("grammar: %w", err)
	}
	cfg, err := grammar.Compile(g, "root")
	if err != nil {
		return nil, fmt.Errorf("grammar: %w", err)
	}
	return New("grammar", cfg), nil
}

// New returns a processor named name that constrains output to cfg.
func New(name string, cfg *grammar.CFG) *Processor {
	return &Processor{name: name, cfg: cfg, m: earley.New(cfg), masks: &maskCache{}}
}

// Name implements core.LogitsProcessor.
func (p *Processor) Name() string { return p.name }

// Matcher returns the processor's parser state (for inspection; do not advance it).
func (p *Processor) Matcher() *earley.Matcher { return p.m }

// Clone implements core.StatefulProcessor in O(1).
func (p *Processor) Clone() core.StatefulProcessor {
	c := *p
	c.m = p.m.Clone()
	c.cur, c.runs, c.slices, c.maskFor = nil, nil, nil, nil
	c.childRuns, c.walk, c.walkTrie, c.key = nil, tokentrie.WalkOptions{}, nil, nil
	c.parts, c.childParts = nil, nil
	return &c
}

// Accept implements core.StatefulProcessor: it advances the parser by id's bytes.
func (p *Processor) Accept(seq *core.Sequence, id core.TokenID) {
	p.maskFor = nil
	if p.err != nil {
		return
	}
	tok := seq.Tokenizer()
	if p.ended {
		if isEndOfGeneration(tok, id) {
			return // more end tokens (a speculative draft running past the end)
		}
		p.err = fmt.Errorf("%s: token %d (%q) follows the end of the constrained output", p.name, id, tok.Piece(id))
		return
	}
	if isEndOfGeneration(tok, id) {
		if !p.m.IsAccepting() {
			p.err = fmt.Errorf("%s: token %d (%q) ends the sequence, but the output so far is not complete", p.name, id, tok.Piece(id))
		}
		p.ended = true
		return
	}
	b := tok.TokenBytes(id)
	if len(b) == 0 {
		p.err = fmt.Errorf("%s: token %d (%q) is a control token, which the constraint does not allow", p.name, id, tok.Piece(id))
		return
	}
	if n, ok := p.m.AdvanceBytes(b); !ok {
		p.err = fmt.Errorf("%s: token %d (%q) cannot continue the output: byte %d (0x%02X) is not allowed after %d bytes", p.name, id, tok.Piece(id), n, b[n], p.m.Len()+n)
	}
}

// Err returns the error of a forbidden token accepted so far, or nil.
func (p *Processor) Err() error { return p.err }

// Process implements core.LogitsProcessor.
func (p *Processor) Process(seq *core.Sequence, c *core.Candidates) error {
	if p.err != nil {
		return p.err
	}
	tok := seq.Tokenizer()
	if !c.IsDense() && c.Len() <= sparseDirect {
		return p.processFew(tok, c)
	}
	mask := p.Mask(tok)
	if c.IsDense() {
		// A row longer than the vocabulary (a model's padded embedding) has its extra
		// entries banned: Has is false beyond the vocabulary.
		mask.ban(c.Dense())
		if mask.Count() == 0 {
			return p.noToken(c.Len())
		}
		return nil
	}
	items := c.Items()
	kept := items[:0]
	for _, it := range items {
		if int(it.ID) < mask.Len() && mask.Has(it.ID) {
			kept = append(kept, it)
		}
	}
	if len(kept) == 0 {
		return p.noToken(len(items))
	}
	c.SetItems(kept, c.Sorted())
	return nil
}

// processFew checks each candidate of a small sparse set against the parser directly.
func (p *Processor) processFew(tok core.Tokenizer, c *core.Candidates) error {
	items := c.Items()
	sorted := c.Sorted()
	kept := items[:0]
	n := len(items)
	for _, it := range items {
		if p.allows(tok, it.ID) {
			kept = append(kept, it)
		}
	}
	if len(kept) == 0 {
		return p.noToken(n)
	}
	c.SetItems(kept, sorted)
	return nil
}

// allows reports whether token id may come next.
func (p *Processor) allows(tok core.Tokenizer, id core.TokenID) bool {
	if isEndOfGeneration(tok, id) {
		return p.ended || p.m.IsAccepting()
	}
	if p.ended {
		return false
	}
	b := tok.TokenBytes(id)
	if len(b) == 0 {
		return false
	}
	n, ok := p.m.AdvanceBytes(b)
	if ok {
		p.m.Pop(n)
	}
	return ok
}

func (p *Processor) noToken(n int) error {
	return fmt.Errorf("%s: none of the %d candidate tokens can continue the output after %d bytes (place the constraint before processors that truncate the candidates)", p.name, n, p.m.Len())
}

// Mask computes the set of tokens that may come next under tok's vocabulary. The result is
// valid until p's next call; its bits may be shared with p's clones and its mask cache (they
// are never written while any of them holds them).
func (p *Processor) Mask(tok core.Tokenizer) Mask {
	trie := TrieFor(tok)
	if p.maskFor == tok && p.maskAt == p.m.Len() && p.cur != nil {
		return Mask{bits: p.cur.bits, n: trie.VocabSize()}
	}
	cacheable := !p.ended && reflect.TypeOf(tok).Comparable()
	if cacheable {
		p.key = p.m.AppendStateKeyWithin(p.key[:0], trie.MaxTokenLen()) // a mask looks one token ahead
		if b := p.masks.take(tok, p.key, (trie.VocabSize()+63)/64, p.cur); b != nil {
			p.cur = b
			p.maskFor, p.maskAt = tok, p.m.Len()
			return Mask{bits: b.bits, n: trie.VocabSize()}
		}
	}
	p.cur = p.masks.writable(p.cur, trie.VocabSize())
	mask := p.cur.bits
	mask.Clear()
	if !p.ended {
		trie.FillWith(p.m, mask, p.walkOptions(trie))
	}
	if p.ended || p.m.IsAccepting() {
		for _, id := range endOfGeneration(tok) {
			if int(id) < trie.VocabSize() {
				mask.Set(id)
			}
		}
	}
	if cacheable {
		p.masks.put(tok, p.key, p.cur)
	}
	if reflect.TypeOf(tok).Comparable() {
		p.maskFor, p.maskAt = tok, p.m.Len()
	}
	return Mask{bits: mask, n: trie.VocabSize()}
}

// walkOptions returns the slices a mask of the current state walks with: those of the runs
// the parser may repeat from here (the unbounded ones as one union), and child slices below
// the first byte (childSlices).
func (p *Processor) walkOptions(trie *tokentrie.Trie) tokentrie.WalkOptions {
	p.runs = p.m.ActiveRuns(p.runs[:0])
	p.slices = p.slices[:0]
	unbounded := p.parts[:0]
	for _, r := range p.runs {
		if r.Budget < 0 {
			unbounded = append(unbounded, r.Automaton)
			continue
		}
		if sl := sliceFor(trie, r); sl != nil {
			p.slices = append(p.slices, sl)
		}
	}
	p.parts = unbounded
	if sl := unionSliceFor(trie, unbounded); sl != nil {
		p.slices = append(p.slices, sl)
	} else {
		// Too many parts, or a union past its limits: each run's own slice, as without unions.
		for _, a := range unbounded {
			if sl := sliceFor(trie, earley.Run{Automaton: a, Budget: -1}); sl != nil {
				p.slices = append(p.slices, sl)
			}
		}
	}
	p.walkTrie = trie
	if p.walk.Child == nil {
		p.walk.Child = func(dst []*tokentrie.ChildSlice) []*tokentrie.ChildSlice { return p.childSlices(p.walkTrie, dst) }
	}
	p.walk.Slices = p.slices
	return p.walk
}

// childSlices appends the child slices of the unbounded runs the parser may repeat after the
// first byte of a token (p.m is in that state) and that it could not repeat at the root.
func (p *Processor) childSlices(trie *tokentrie.Trie, dst []*tokentrie.ChildSlice) []*tokentrie.ChildSlice {
	p.childRuns = p.m.ActiveRuns(p.childRuns[:0])
	parts := p.childParts[:0]
	new := false
	for _, r := range p.childRuns {
		if r.Budget >= 0 {
			continue
		}
		parts = append(parts, r.Automaton)
		new = new || !slices.ContainsFunc(p.runs, func(root earley.Run) bool { return root.Budget < 0 && root.Automaton == r.Automaton })
	}
	p.childParts = parts
	if !new { // the root's slices already skip what these runs accept
		return dst
	}
	if cs := unionChildSliceFor(trie, parts); cs != nil {
		dst = append(dst, cs)
	}
	return dst
}

// Forced implements core.Forcer: when the mask of the current state holds a single token, it
// returns it. The mask is kept for the step's Process.
func (p *Processor) Forced(seq *core.Sequence) (core.TokenID, bool) {
	if p.err != nil {
		return -1, false
	}
	m := p.Mask(seq.Tokenizer())
	if m.Count() != 1 {
		return -1, false
	}
	for w, bits := range m.bits {
		if bits != 0 {
			return core.TokenID(w*64 + mathbits.TrailingZeros64(bits)), true
		}
	}
	return -1, false
}

// Mask is a set of allowed token ids over a vocabulary.
type Mask struct {
	bits tokentrie.Mask
	n    int
}

// ban sets to -Inf every entry of row whose token the mask does not allow, the entries past
// the vocabulary included, a word of the mask (64 tokens) at a time: on a 128k vocabulary a
// test of every token's bit took longer than most masks take to compute.
func (m Mask) ban(row []float32) {
	ninf := float32(math.Inf(-1))
	limit := min(len(row), m.n)
	for w := 0; w*64 < limit; w++ {
		seg := row[w*64 : min(w*64+64, limit)]
		switch bits := m.bits[w]; {
		case bits == 0:
			copy(seg, negInf64[:]) // memmove's vector stores
		case bits == ^uint64(0):
		default:
			for i := range seg {
				if bits&(1<<uint(i)) == 0 {
					seg[i] = ninf
				}
			}
		}
	}
	for i := limit; i < len(row); i++ {
		row[i] = ninf
	}
}

// negInf64 is a word of the mask's worth of -Inf.
var negInf64 = func() (a [64]float32) {
	for i := range a {
		a[i] = float32(math.Inf(-1))
	}
	return a
}()

// Has reports whether token id is allowed.
func (m Mask) Has(id core.TokenID) bool { return int(id) < m.n && id >= 0 && m.bits.Has(id) }

// Len is the vocabulary size.
func (m Mask) Len() int { return m.n }

// Count is the number of allowed tokens.
func (m Mask) Count() int { return m.bits.Count() }

func endOfGeneration(tok core.Tokenizer) []core.TokenID {
	sp := tok.Special()
	if len(sp.EndOfGeneration) > 0 {
		return sp.EndOfGeneration
	}
	if sp.EOS >= 0 {
		return []core.TokenID{sp.EOS}
	}
	return nil
}

func isEndOfGeneration(tok core.Tokenizer, id core.TokenID) bool {
	for _, e := range endOfGeneration(tok) {
		if e == id {
			return true
		}
	}
	return false
}
