package tokenizer

import (
	"strings"
	"sync"

	"github.com/loomlm/loom/core"
)

// maxCachedWords bounds a word cache; when it is full, it starts over.
const maxCachedWords = 1 << 17

// wordCache remembers the tokens of the words (BPE) or chunks (SentencePiece) a text splits
// into, which are tokenised independently of their context. It is safe for concurrent use.
type wordCache struct {
	mu sync.RWMutex
	m  map[string][]core.TokenID
}

// encode appends the tokens of each word split yields: from the cache, or appended by
// tokenize to its first argument.
func (c *wordCache) encode(out []core.TokenID, split func(yield func(string)), tokenize func([]core.TokenID, string) ([]core.TokenID, error)) ([]core.TokenID, error) {
	// Words tokenised here: their text and where their ids are in out.
	var missed strings.Builder
	type miss struct{ start, end, idStart, idEnd int }
	var misses []miss
	var err error
	c.mu.RLock()
	split(func(word string) {
		if err != nil {
			return
		}
		if ids, ok := c.m[word]; ok {
			out = append(out, ids...)
			return
		}
		n := len(out)
		if out, err = tokenize(out, word); err != nil {
			return
		}
		misses = append(misses, miss{missed.Len(), missed.Len() + len(word), n, len(out)})
		missed.WriteString(word)
	})
	c.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	if len(misses) == 0 {
		return out, nil
	}
	// One string and one slice hold the new entries.
	words := missed.String()
	total := 0
	for _, m := range misses {
		total += m.idEnd - m.idStart
	}
	slab := make([]core.TokenID, 0, total)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range misses {
		if c.m == nil || len(c.m) >= maxCachedWords {
			c.m = make(map[string][]core.TokenID, 1024)
		}
		k := len(slab)
		slab = append(slab, out[m.idStart:m.idEnd]...)
		c.m[words[m.start:m.end]] = slab[k:len(slab):len(slab)]
	}
	return out, nil
}

// reset empties the cache.
func (c *wordCache) reset() {
	c.mu.Lock()
	c.m = nil
	c.mu.Unlock()
}
