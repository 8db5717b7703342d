package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/loomlm/loom/core"
)

// GPT-2's byte↔unicode table: byte-level BPE vocabularies write each byte as one printable
// character. Printable Latin-1 bytes ('!'…'~', '¡'…'¬', '®'…'ÿ') stand for themselves; the
// other 68 bytes, in order, are written as U+0100 onwards.
var (
	byteRune   [256]rune
	byteString [256]string
	runeByte   = map[rune]byte{}
)

func init() {
	next := rune(256)
	for b := range 256 {
		if ('!' <= b && b <= '~') || (0xa1 <= b && b <= 0xac) || (0xae <= b && b <= 0xff) {
			byteRune[b] = rune(b)
		} else {
			byteRune[b] = next
			next++
		}
		byteString[b] = string(byteRune[b])
		runeByte[byteRune[b]] = byte(b)
	}
}

// appendUnmapped appends the bytes a byte-level BPE token stands for. Characters outside the
// table are kept as their UTF-8.
func appendUnmapped(out []byte, s string) []byte {
	for _, r := range s {
		if b, ok := runeByte[r]; ok {
			out = append(out, b)
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
	return out
}

type bpeState struct {
	// merges maps a pair of token ids to the rank of their merge and the id of the result.
	merges map[uint64]bpeMerge
	// byteIDs maps a byte to the token of its character, or -1.
	byteIDs      [256]core.TokenID
	pre          *pretokenizer
	ignoreMerges bool
	cache        wordCache
}

type bpeMerge struct{ rank, result core.TokenID }

func pairOf(left, right core.TokenID) uint64 { return uint64(uint32(left))<<32 | uint64(uint32(right)) }

func (t *Tokenizer) initBPE(merges []string) error {
	if len(merges) == 0 {
		return fmt.Errorf("tokenizer: byte-level BPE vocabulary without merges")
	}
	name := t.pre
	if name == "" {
		name = "default"
	}
	pre, ok := pretokenizers[name]
	if !ok {
		return fmt.Errorf("tokenizer: pre-tokenizer %q (tokenizer.ggml.pre) is not supported; supported: %s", t.pre, strings.Join(Pretokenizers(), ", "))
	}
	t.pre = name
	b := &bpeState{merges: make(map[uint64]bpeMerge, len(merges)), pre: pre, ignoreMerges: pre.ignoreMerges}
	for c := range 256 {
		id, ok := t.toID[byteString[c]]
		if !ok {
			id = -1
		}
		b.byteIDs[c] = id
	}
	for rank, m := range merges {
		// Split at the first space after the first character: pieces never hold a raw space.
		sp := strings.IndexByte(m[min(1, len(m)):], ' ')
		if sp < 0 {
			return fmt.Errorf("tokenizer: merge %d %q is not two pieces separated by a space", rank, m)
		}
		sp += min(1, len(m))
		// Symbols are always vocabulary entries, so a merge of pieces that are not, or whose
		// result is not, can never apply.
		left, okL := t.toID[m[:sp]]
		right, okR := t.toID[m[sp+1:]]
		result, okM := t.toID[m[:sp]+m[sp+1:]]
		if !okL || !okR || !okM {
			continue
		}
		if _, dup := b.merges[pairOf(left, right)]; !dup {
			b.merges[pairOf(left, right)] = bpeMerge{rank: core.TokenID(rank), result: result}
		}
	}
	t.bpe = b
	return nil
}

// encodeBPE appends the tokens of a fragment: the pre-tokenizer splits it into words, each
// tokenised on its own (and remembered).
func (t *Tokenizer) encodeBPE(out []core.TokenID, fragment string) []core.TokenID {
	var sc bpeScratch
	out, _ = t.bpe.cache.encode(out, func(yield func(string)) { t.bpe.pre.split(fragment, yield) },
		func(out []core.TokenID, word string) ([]core.TokenID, error) { return t.bpeWord(&sc, out, word), nil })
	return out
}

// bpeScratch holds buffers reused from word to word.
type bpeScratch struct {
	text  []byte
	syms  []bpeSymbol
	queue bigramHeap[bpeBigram]
}

// bpeSymbol is a token in the linked list of a word's symbols; merged is set once it has been
// merged into its left neighbour.
type bpeSymbol struct {
	id         core.TokenID
	prev, next int32
	merged     bool
}

// bpeBigram is a candidate merge of two adjacent symbols.
type bpeBigram struct {
	left, right int32
	rank        core.TokenID
	// leftID and rightID are the symbols' ids when the pair was found: if either symbol
	// has changed since, the candidate is outdated.
	leftID, rightID core.TokenID
	result          core.TokenID
}

func (a bpeBigram) before(b bpeBigram) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.left < b.left)
}

// bpeWord appends the tokens of one pre-tokenized word: each byte starts as the token of its
// character, then the adjacent pair with the lowest merge rank (the leftmost among equals) is
// merged until no pair has a merge.
func (t *Tokenizer) bpeWord(sc *bpeScratch, out []core.TokenID, word string) []core.TokenID {
	b := t.bpe
	if b.ignoreMerges {
		sc.text = sc.text[:0]
		for i := 0; i < len(word); i++ {
			sc.text = append(sc.text, byteString[word[i]]...)
		}
		if id, ok := t.toID[string(sc.text)]; ok {
			return append(out, id)
		}
	}
	syms := sc.syms[:0]
	for i := 0; i < len(word); i++ {
		id := b.byteIDs[word[i]]
		if id < 0 {
			id = t.special.UNK // a vocabulary without this byte's character
		}
		k := int32(len(syms))
		syms = append(syms, bpeSymbol{id: id, prev: k - 1, next: k + 1})
	}
	syms[len(syms)-1].next = -1

	queue := sc.queue[:0]
	defer func() { sc.syms, sc.queue = syms, queue }()
	tryPair := func(left, right int32) {
		if left < 0 || right < 0 {
			return
		}
		l, r := syms[left].id, syms[right].id
		if l < 0 || r < 0 {
			return
		}
		m, ok := b.merges[pairOf(l, r)]
		if !ok {
			return
		}
		queue.push(bpeBigram{left: left, right: right, rank: m.rank, leftID: l, rightID: r, result: m.result})
	}
	for i := 1; i < len(syms); i++ {
		tryPair(int32(i-1), int32(i))
	}
	for len(queue) > 0 {
		bg := queue.pop()
		l, r := &syms[bg.left], &syms[bg.right]
		if l.merged || r.merged || l.next != bg.right || l.id != bg.leftID || r.id != bg.rightID {
			continue // outdated: one side has merged since
		}
		l.id = bg.result
		r.merged = true
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = bg.left
		}
		tryPair(l.prev, bg.left)
		tryPair(bg.left, l.next)
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		if id := syms[i].id; id >= 0 {
			out = append(out, id)
		}
	}
	return out
}
