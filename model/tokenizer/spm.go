package tokenizer

import (
	"fmt"
	"strings"
	"sync"

	"github.com/loomlm/loom/core"
)

// spmSpace is how SentencePiece vocabularies write a space: "▁" (U+2581).
const spmSpace = "\u2581"

type spmState struct {
	// byteIDs maps a byte to the token that stands for it in byte fallback, or -1.
	byteIDs [256]core.TokenID

	// Pairs of adjacent characters found inside vocabulary entries: a merge can only join
	// two characters that form one of these, so text splits into chunks at every other
	// pair, and chunks are tokenised (and cached) independently with the same result.
	pairsOnce  sync.Once
	smallPairs [129*129/64 + 1]uint64 // pairs of ASCII characters and "▁" (see smallCode)
	pairs      map[string]struct{}

	cache wordCache
}

func (t *Tokenizer) initSPM() {
	for b := range 256 {
		id, ok := t.toID[fmt.Sprintf("<0x%02X>", b)]
		if !ok {
			id, ok = t.toID[string([]byte{byte(b)})]
		}
		if !ok {
			id = -1
		}
		t.spm.byteIDs[b] = id
	}
}

// initPairs records the pairs of adjacent characters of every vocabulary entry.
func (t *Tokenizer) initPairs() {
	st := &t.spm
	st.pairs = map[string]struct{}{}
	for _, tok := range t.tokens {
		prev := -1
		for i := 0; i < len(tok); {
			n := charLen(tok, i)
			if prev >= 0 {
				if x, y := smallCode(tok[prev:i]), smallCode(tok[i:i+n]); x >= 0 && y >= 0 {
					k := x*129 + y
					st.smallPairs[k/64] |= 1 << (k % 64)
				} else {
					st.pairs[tok[prev:i+n]] = struct{}{}
				}
			}
			prev = i
			i += n
		}
	}
}

// smallCode numbers the most common characters of SentencePiece text, ASCII (0–127) and "▁"
// (128), for a table of pairs faster than a map; other characters get -1.
func smallCode(ch string) int {
	if len(ch) == 1 && ch[0] < 0x80 {
		return int(ch[0])
	}
	if ch == spmSpace {
		return 128
	}
	return -1
}

// mayJoin reports whether the characters text[a:b] and text[b:c] occur next to each other in
// some vocabulary entry.
func (st *spmState) mayJoin(text string, a, b, c int) bool {
	if x, y := smallCode(text[a:b]), smallCode(text[b:c]); x >= 0 && y >= 0 {
		k := x*129 + y
		return st.smallPairs[k/64]&(1<<(k%64)) != 0
	}
	_, ok := st.pairs[text[a:c]]
	return ok
}

// spmSymbol is a run of text[start:start+n] in the linked list of symbols; n = 0 once merged
// into its left neighbour.
type spmSymbol struct {
	start, n   int32
	prev, next int32
}

// spmBigram is a candidate merge of two adjacent symbols into a vocabulary entry of the given
// score and byte size.
type spmBigram struct {
	left, right int32
	size        int32
	score       float32
}

// before orders the queue: higher score first, then the leftmost pair.
func (a spmBigram) before(b spmBigram) bool {
	return a.score > b.score || (a.score == b.score && a.left < b.left)
}

// encodeSPM appends the tokens of a fragment of text, SentencePiece-style: spaces become "▁"
// (with one in front when prefix is set), then each chunk of the result is tokenised by
// spmChunk.
func (t *Tokenizer) encodeSPM(out []core.TokenID, fragment string, prefix bool) ([]core.TokenID, error) {
	var sb strings.Builder
	sb.Grow(len(fragment) + len(fragment)/4 + 3)
	if prefix {
		sb.WriteString(spmSpace)
	}
	for i := 0; i < len(fragment); {
		j := strings.IndexByte(fragment[i:], ' ')
		if j < 0 {
			sb.WriteString(fragment[i:])
			break
		}
		sb.WriteString(fragment[i : i+j])
		sb.WriteString(spmSpace)
		i += j + 1
	}
	text := sb.String()
	t.spm.pairsOnce.Do(t.initPairs)
	split := func(yield func(string)) {
		start, prev := 0, -1
		for i := 0; i < len(text); {
			n := charLen(text, i)
			if prev >= 0 && !t.spm.mayJoin(text, prev, i, i+n) {
				yield(text[start:i])
				start = i
			}
			prev = i
			i += n
		}
		if start < len(text) {
			yield(text[start:])
		}
	}
	var sc spmScratch
	return t.spm.cache.encode(out, split, func(out []core.TokenID, chunk string) ([]core.TokenID, error) {
		return t.spmChunk(&sc, out, chunk)
	})
}

// spmScratch holds buffers reused from chunk to chunk.
type spmScratch struct {
	syms  []spmSymbol
	queue bigramHeap[spmBigram]
}

// spmChunk appends the tokens of an escaped chunk of text: starting from single characters, the adjacent
// pair forming the best-scoring vocabulary entry (the leftmost among equals) is merged until
// none remains; characters left without a token are written with byte tokens.
func (t *Tokenizer) spmChunk(sc *spmScratch, out []core.TokenID, text string) ([]core.TokenID, error) {
	syms := sc.syms[:0]
	for i := 0; i < len(text); {
		n := charLen(text, i)
		k := int32(len(syms))
		syms = append(syms, spmSymbol{start: int32(i), n: int32(n), prev: k - 1, next: k + 1})
		i += n
	}
	syms[len(syms)-1].next = -1

	queue := sc.queue[:0]
	defer func() { sc.syms, sc.queue = syms, queue }()
	tryPair := func(left, right int32) {
		if left < 0 || right < 0 {
			return
		}
		l, r := &syms[left], &syms[right]
		id, ok := t.toID[text[l.start:r.start+r.n]]
		if !ok {
			return
		}
		queue.push(spmBigram{left: left, right: right, size: l.n + r.n, score: t.scores[id]})
	}
	for i := 1; i < len(syms); i++ {
		tryPair(int32(i-1), int32(i))
	}
	for len(queue) > 0 {
		bg := queue.pop()
		l, r := &syms[bg.left], &syms[bg.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != bg.size {
			continue // outdated: one side has merged since
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = bg.left
		}
		tryPair(l.prev, bg.left)
		tryPair(bg.left, l.next)
	}

	for i := int32(0); i >= 0; i = syms[i].next {
		s := syms[i]
		piece := text[s.start : s.start+s.n]
		if id, ok := t.toID[piece]; ok {
			out = append(out, id)
			continue
		}
		all := true
		for _, b := range []byte(piece) {
			all = all && t.spm.byteIDs[b] >= 0
		}
		if !all {
			// Without byte tokens for it, the character is unknown.
			if t.special.UNK < 0 {
				return nil, fmt.Errorf("tokenizer: no token for %q and no unknown token", piece)
			}
			out = append(out, t.special.UNK)
			continue
		}
		for _, b := range []byte(piece) {
			out = append(out, t.spm.byteIDs[b])
		}
	}
	return out, nil
}
