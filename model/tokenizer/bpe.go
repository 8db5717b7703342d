package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"

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
	ranks        map[pairKey]int32
	pre          *pretokenizer
	ignoreMerges bool
	cache        wordCache
}

type pairKey struct{ left, right string }

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
	b := &bpeState{ranks: make(map[pairKey]int32, len(merges)), pre: pre, ignoreMerges: pre.ignoreMerges}
	for rank, m := range merges {
		// Split at the first space after the first character: pieces never hold a raw space.
		sp := strings.IndexByte(m[min(1, len(m)):], ' ')
		if sp < 0 {
			return fmt.Errorf("tokenizer: merge %d %q is not two pieces separated by a space", rank, m)
		}
		sp += min(1, len(m))
		key := pairKey{m[:sp], m[sp+1:]}
		if _, dup := b.ranks[key]; !dup {
			b.ranks[key] = int32(rank)
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
	queue []bpeBigram
}

type bpeSymbol struct {
	start, n   int32
	prev, next int32
}

type bpeBigram struct {
	left, right int32
	size        int32
	rank        int32
}

func (a bpeBigram) before(b bpeBigram) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.left < b.left)
}

// bpeWord appends the tokens of one pre-tokenized word: its bytes are mapped to characters,
// then the adjacent pair with the lowest merge rank is merged until no pair has a rank.
func (t *Tokenizer) bpeWord(sc *bpeScratch, out []core.TokenID, word string) []core.TokenID {
	sc.text = sc.text[:0]
	for i := 0; i < len(word); i++ {
		sc.text = append(sc.text, byteString[word[i]]...)
	}
	text := unsafe.String(unsafe.SliceData(sc.text), len(sc.text)) // valid until the next word
	if t.bpe.ignoreMerges {
		if id, ok := t.toID[text]; ok {
			return append(out, id)
		}
	}
	syms := sc.syms[:0]
	for i := 0; i < len(text); {
		_, n := utf8.DecodeRuneInString(text[i:])
		k := int32(len(syms))
		syms = append(syms, bpeSymbol{start: int32(i), n: int32(n), prev: k - 1, next: k + 1})
		i += n
	}
	syms[len(syms)-1].next = -1

	queue := sc.queue[:0]
	defer func() { sc.syms, sc.queue = syms, queue }()
	push := func(b bpeBigram) {
		queue = append(queue, b)
		i := len(queue) - 1
		for i > 0 {
			p := (i - 1) / 2
			if !queue[i].before(queue[p]) {
				break
			}
			queue[i], queue[p] = queue[p], queue[i]
			i = p
		}
	}
	pop := func() bpeBigram {
		top := queue[0]
		last := len(queue) - 1
		queue[0] = queue[last]
		queue = queue[:last]
		i := 0
		for {
			l := 2*i + 1
			if l >= len(queue) {
				break
			}
			m := l
			if r := l + 1; r < len(queue) && queue[r].before(queue[l]) {
				m = r
			}
			if !queue[m].before(queue[i]) {
				break
			}
			queue[i], queue[m] = queue[m], queue[i]
			i = m
		}
		return top
	}
	tryPair := func(left, right int32) {
		if left < 0 || right < 0 {
			return
		}
		l, r := syms[left], syms[right]
		rank, ok := t.bpe.ranks[pairKey{text[l.start : l.start+l.n], text[r.start : r.start+r.n]}]
		if !ok {
			return
		}
		push(bpeBigram{left: left, right: right, size: l.n + r.n, rank: rank})
	}
	for i := 1; i < len(syms); i++ {
		tryPair(int32(i-1), int32(i))
	}
	for len(queue) > 0 {
		bg := pop()
		l, r := &syms[bg.left], &syms[bg.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != bg.size {
			continue
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

	ids := out
	for i := int32(0); i >= 0; i = syms[i].next {
		s := syms[i]
		piece := text[s.start : s.start+s.n]
		if id, ok := t.toID[piece]; ok {
			ids = append(ids, id)
			continue
		}
		// Not in the vocabulary (a malformed vocabulary): fall back to the characters.
		for _, r := range piece {
			if id, ok := t.toID[string(r)]; ok {
				ids = append(ids, id)
			} else if t.special.UNK >= 0 {
				ids = append(ids, t.special.UNK)
			}
		}
	}
	return ids
}
