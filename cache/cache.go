// Package cache is the key/value cache of loom's transformer runtime: the keys and values every
// attention layer has computed for a sequence's past tokens, kept in fixed-size blocks so that
// sequences can share them.
//
// A Pool owns the blocks, within a memory budget. A Sequence is an ordered list of blocks (its
// block table), one block holding BlockSize consecutive positions of every layer's K and V. The
// operations the decoding strategies need are all bookkeeping on block tables:
//
//   - Fork gives a second sequence the same blocks, with reference counts raised: O(blocks),
//     no data copied. A block shared by several sequences, or published for prefix reuse, is
//     never written; a sequence about to write into it first copies it (copy-on-write).
//   - Truncate rolls a sequence back to an earlier length (rejected speculative drafts), giving
//     up the blocks past the new end.
//   - Prefix reuse: when a block fills, it is published under a hash of its tokens chained with
//     the hashes of every block before it. A new sequence whose tokens start with published
//     blocks takes them (MatchPrefix) instead of recomputing them. Published blocks that no
//     sequence holds stay cached until their memory is needed, least recently used first.
//
// A forward pass uses a sequence in three steps: Grow reserves positions for new tokens
// (allocating and copying blocks as needed, or failing with ErrBudget without changing
// anything), Put writes each layer's K and V rows at those positions, and Commit marks them
// written, which publishes blocks that became full. Attention reads the rows through Spans:
// views of the stored blocks laid out as attention's kernels read them (each head's keys
// transposed, each head's values as rows). ReadKV copies rows out as float32.
//
// Blocks store float32, IEEE half precision (Float16, half the memory; converted with the
// CPU's F16C instructions where available) or 8-bit integers with a half-precision scale per
// 32 values (Q8_0, ggml's format, as llama.cpp's --cache-type-k/v q8_0: 34 bytes per 32
// values, 53 % of Float16's memory and memory traffic).
//
// A Pool is safe for concurrent use. A Sequence is used by one goroutine at a time; different
// sequences, even sharing blocks, may be used concurrently.
package cache

import (
	"errors"
	"fmt"
	"sync"
)

// DType is the element type blocks store.
type DType uint8

const (
	// Float32 stores keys and values exactly as computed.
	Float32 DType = iota
	// Float16 stores them in IEEE half precision (rounded to nearest even): half the memory.
	Float16
	// Q8_0 stores each run of 32 values of a head's key or value as ggml's Q8_0 block does: a
	// scale d = max|x|/127 in half precision and 32 signed bytes round(x/d). The head
	// dimension must be a multiple of 32.
	Q8_0
)

// Q8Group is the number of values that share one scale in Q8_0 storage.
const Q8Group = 32

// Bytes returns the storage of n values: n·4 for Float32, n·2 for Float16, and for Q8_0 34
// bytes for every group of 32 values begun (a pool's rows are whole groups).
func (d DType) Bytes(n int) int {
	switch d {
	case Float16:
		return 2 * n
	case Q8_0:
		return (n + Q8Group - 1) / Q8Group * (Q8Group + 2)
	}
	return 4 * n
}

// String returns "f32", "f16" or "q8_0".
func (d DType) String() string {
	switch d {
	case Float32:
		return "f32"
	case Float16:
		return "f16"
	case Q8_0:
		return "q8_0"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// ParseDType returns the DType named "f32" (or "float32"), "f16" (or "float16") or "q8_0".
func ParseDType(s string) (DType, error) {
	switch s {
	case "f32", "float32", "F32":
		return Float32, nil
	case "f16", "float16", "F16":
		return Float16, nil
	case "q8_0", "Q8_0":
		return Q8_0, nil
	}
	return 0, fmt.Errorf("cache: element type %q: want f32, f16 or q8_0", s)
}

// DefaultBlockSize is the tokens per block when Config.BlockSize is zero.
const DefaultBlockSize = 16

// DefaultBudget is the memory budget when Config.Budget is zero: 1 GiB.
const DefaultBudget = 1 << 30

// ErrBudget is the error (wrapped, with the numbers) of a Grow that needs more blocks than the
// pool's budget leaves: the request does not fit beside the sequences that hold blocks now.
var ErrBudget = errors.New("kv cache: memory budget exhausted")

// Config describes the blocks of a Pool.
type Config struct {
	// Layers is the number of attention layers; each block holds K and V for all of them.
	Layers int
	// KVHeads is the number of key/value heads, HeadDim the values of one head's key (and
	// value) at one position. One position of one layer holds KVHeads × HeadDim values of K
	// and as many of V.
	KVHeads, HeadDim int
	// BlockSize is the number of positions per block (DefaultBlockSize when zero). Prefix
	// reuse works in whole blocks.
	BlockSize int
	// DType is the element type of the stored keys and values.
	DType DType
	// Budget is the most bytes of block storage the pool allocates (DefaultBudget when zero).
	Budget int64
	// NoPrefixCache turns prefix reuse off: full blocks are not published, and released blocks
	// are not kept.
	NoPrefixCache bool
}

// block is one block of storage: BlockSize positions of K and V for every layer, and the
// tokens at those positions. Per layer, K is laid out [head][HeadDim][position] and V
// [head][position][HeadDim]: each head's keys form a HeadDim × BlockSize matrix (transposed)
// and its values a BlockSize × HeadDim matrix. Elements are little-endian float32 or binary16;
// Q8_0 storage is described at Span.
type block struct {
	data   []byte
	tokens []int32
	refs   int32
	// hash is the chain hash under which the block is published (when published is true);
	// parent is the chain hash of the block before it.
	hash, parent uint64
	published    bool
	// zeroed is set while the storage of a free block is known to be all zeros (Reserve), so
	// that taking it need not clear it.
	zeroed bool
	// prev and next link the unreferenced published blocks in least-recently-used order.
	prev, next *block
}

// Pool allocates blocks for sequences within a memory budget, tracks how many sequences hold
// each block, and keeps the table of published blocks for prefix reuse.
type Pool struct {
	cfg        Config
	kvDim      int // KVHeads × HeadDim
	headBytes  int // bytes of one head's K (or V) in a block
	layerBytes int // bytes of one layer's K and V in a block
	blockBytes int64
	maxBlocks  int

	// q8Scratch holds *q8Row buffers for Put (Q8_0 storage).
	q8Scratch sync.Pool

	mu        sync.Mutex
	allocated int      // blocks with memory
	inUse     int      // blocks held by at least one sequence
	free      []*block // unreferenced, unpublished
	lru       block    // sentinel of the list of unreferenced published blocks, oldest first
	cached    int      // length of that list
	table     map[uint64]*block
	reused    int64
	evictions int64
	copies    int64
}

// NewPool returns an empty pool for blocks of the given shape. It allocates memory only as
// sequences grow.
func NewPool(cfg Config) (*Pool, error) {
	if cfg.BlockSize == 0 {
		cfg.BlockSize = DefaultBlockSize
	}
	if cfg.Budget == 0 {
		cfg.Budget = DefaultBudget
	}
	switch {
	case cfg.Layers <= 0:
		return nil, fmt.Errorf("cache: layers = %d: must be positive", cfg.Layers)
	case cfg.KVHeads <= 0 || cfg.HeadDim <= 0:
		return nil, fmt.Errorf("cache: %d kv heads of dimension %d: both must be positive", cfg.KVHeads, cfg.HeadDim)
	case cfg.BlockSize < 0:
		return nil, fmt.Errorf("cache: block size = %d: must be positive", cfg.BlockSize)
	case cfg.DType > Q8_0:
		return nil, fmt.Errorf("cache: unknown element type %v", cfg.DType)
	case cfg.DType == Q8_0 && cfg.HeadDim%Q8Group != 0:
		return nil, fmt.Errorf("cache: q8_0 stores a head's values in groups of %d, and the head dimension %d is not a multiple of %d: use f16 or f32", Q8Group, cfg.HeadDim, Q8Group)
	}
	p := &Pool{cfg: cfg, table: map[uint64]*block{}}
	p.kvDim = cfg.KVHeads * cfg.HeadDim
	p.headBytes = cfg.DType.Bytes(cfg.BlockSize * cfg.HeadDim)
	p.layerBytes = 2 * cfg.KVHeads * p.headBytes
	p.blockBytes = int64(cfg.Layers)*int64(p.layerBytes) + 4*int64(cfg.BlockSize)
	if cfg.Budget < p.blockBytes {
		return nil, fmt.Errorf("cache: budget of %d bytes is less than one block (%d bytes)", cfg.Budget, p.blockBytes)
	}
	p.maxBlocks = int(cfg.Budget / p.blockBytes)
	p.q8Scratch.New = func() any {
		return &q8Row{q: make([]byte, cfg.HeadDim), d: make([]uint16, cfg.HeadDim/Q8Group)}
	}
	p.lru.prev, p.lru.next = &p.lru, &p.lru
	return p, nil
}

// Config returns the pool's configuration, defaults filled in.
func (p *Pool) Config() Config { return p.cfg }

// BytesPerToken is the memory one position of one sequence takes: K and V of every layer.
func (p *Pool) BytesPerToken() int64 {
	return 2 * int64(p.cfg.Layers) * int64(p.cfg.KVHeads) * int64(p.cfg.DType.Bytes(p.cfg.HeadDim))
}

// BlockBytes is the memory of one block, its token record included.
func (p *Pool) BlockBytes() int64 { return p.blockBytes }

// Stats is a snapshot of a pool's use.
type Stats struct {
	// Budget and BlockBytes are the configured limit and the size of one block; MaxBlocks is
	// how many blocks fit in the budget.
	Budget, BlockBytes int64
	MaxBlocks          int
	// Allocated blocks have memory; each is either in use (held by a sequence), cached
	// (published, held by none, kept for prefix reuse) or free.
	Allocated, InUse, Cached, Free int
	// BytesAllocated is Allocated × BlockBytes.
	BytesAllocated int64
	// Published is the number of blocks in the prefix table (in use or cached).
	Published int
	// ReusedTokens counts positions taken from published blocks by MatchPrefix; Evictions
	// counts cached blocks whose memory was given to another block; Copies counts
	// copy-on-write copies of shared blocks.
	ReusedTokens, Evictions, Copies int64
}

// Stats returns a snapshot of the pool's use.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{
		Budget: p.cfg.Budget, BlockBytes: p.blockBytes, MaxBlocks: p.maxBlocks,
		Allocated: p.allocated, InUse: p.inUse, Cached: p.cached, Free: len(p.free),
		BytesAllocated: int64(p.allocated) * p.blockBytes,
		Published:      len(p.table),
		ReusedTokens:   p.reused, Evictions: p.evictions, Copies: p.copies,
	}
}

// DropCached forgets every cached block (published and held by no sequence), making its
// memory free. Blocks in use stay published.
func (p *Pool) DropCached() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.lru.next != &p.lru {
		b := p.lru.next
		p.unlink(b)
		p.unpublish(b)
		p.free = append(p.free, b)
	}
}

// available returns how many blocks the pool can hand out now: free, unallocated within the
// budget, and cached (evictable).
func (p *Pool) available() int {
	return len(p.free) + (p.maxBlocks - p.allocated) + p.cached
}

// take returns an unreferenced block with refs set to 1, its storage zeroed (so that the
// unwritten positions of a partial block read as zeros, never as stale non-finite values).
// The caller has checked available.
func (p *Pool) take() *block { return p.takeBlock(true) }

// takeBlock is take, the storage of a reused block zeroed only when zero is set: a block about
// to be overwritten whole (copyBlock's destination) need not be (a 110M F16 model's block is
// 590 KB, and four beams copy a shared partial block for most forks).
func (p *Pool) takeBlock(zero bool) *block {
	var b *block
	switch {
	case len(p.free) > 0:
		b = p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
	case p.allocated < p.maxBlocks:
		b = p.newBlock()
		zero = false // new memory is zero
	default: // evict the least recently used cached block
		b = p.lru.next
		p.unlink(b)
		p.unpublish(b)
		p.evictions++
	}
	if zero && !b.zeroed {
		clear(b.data)
	}
	b.zeroed = false
	b.refs = 1
	p.inUse++
	return b
}

// newBlock allocates a block's storage within the budget. The caller holds p.mu and has checked
// that allocated < maxBlocks.
func (p *Pool) newBlock() *block {
	p.allocated++
	return &block{tokens: make([]int32, p.cfg.BlockSize), data: make([]byte, p.cfg.Layers*p.layerBytes)}
}

// Reserve allocates up to blocks more blocks within the budget and writes every page of their
// storage, so that the memory is the process's before sequences need it, and returns how many
// it allocated. The blocks are free: Grow takes them before it allocates others. A server calls
// it at startup, as llama.cpp allocates and clears its whole KV cache: the first write to a
// fresh page is a page fault, and a forward pass that writes into a new block waits for its
// faults (on the virtual machine docs/BENCHMARKS.md measures on, 11–15 µs a 4 KiB page: a
// 110M model's Q8_0 block of 313 KB cost about a millisecond, and 16 streams fill one a step).
func (p *Pool) Reserve(blocks int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := max(0, min(blocks, p.maxBlocks-p.allocated))
	for range n {
		b := p.newBlock()
		for i := 0; i < len(b.data); i += pageBytes {
			b.data[i] = 0 // a write: a read would map the shared zero page
		}
		b.zeroed = true
		p.free = append(p.free, b)
	}
	return n
}

// pageBytes is the smallest page size of the systems loom runs on.
const pageBytes = 4096

// acquire adds a reference to b.
func (p *Pool) acquire(b *block) {
	if b.refs == 0 {
		p.unlink(b) // a cached block comes back into use
		p.inUse++
	}
	b.refs++
}

// release drops a reference to b. An unreferenced published block joins the cache as the most
// recently used; any other becomes free.
func (p *Pool) release(b *block) {
	b.refs--
	if b.refs > 0 {
		return
	}
	if b.refs < 0 {
		panic("cache: block released more often than acquired")
	}
	p.inUse--
	if b.published {
		b.prev, b.next = p.lru.prev, &p.lru
		p.lru.prev.next = b
		p.lru.prev = b
		p.cached++
		return
	}
	p.free = append(p.free, b)
}

func (p *Pool) unlink(b *block) {
	b.prev.next = b.next
	b.next.prev = b.prev
	b.prev, b.next = nil, nil
	p.cached--
}

func (p *Pool) unpublish(b *block) {
	if b.published {
		delete(p.table, b.hash)
		b.published = false
	}
}

// copyBlock copies src (every layer, tokens included) into dst.
func (p *Pool) copyBlock(dst, src *block) {
	copy(dst.data, src.data)
	copy(dst.tokens, src.tokens)
	p.copies++
}

// budgetError explains a request for need blocks when only have can be handed out.
func (p *Pool) budgetError(need, have int) error {
	return fmt.Errorf("%w: %d more blocks of %d tokens needed (%d bytes each) but %d are left; %d of the %d blocks that fit in the budget of %d bytes are held by live sequences",
		ErrBudget, need, p.cfg.BlockSize, p.blockBytes, have, p.inUse, p.maxBlocks, p.cfg.Budget)
}

// chainHash returns the hash of a full block of tokens following a block whose chain hash is
// parent (0 for the first block).
func chainHash(parent uint64, tokens []int32) uint64 {
	h := parent ^ 0x9e3779b97f4a7c15
	for _, t := range tokens {
		h ^= uint64(uint32(t))
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 31
	}
	h ^= uint64(len(tokens))
	h *= 0x94d049bb133111eb
	h ^= h >> 29
	if h == 0 { // 0 marks "no parent"
		h = 1
	}
	return h
}
