package processors

import "github.com/loomlm/loom/core"

// tokenCounts is a small hash table token id → count (open addressing, linear probing,
// deletion by backward shift), sized to the distinct tokens of a penalty window. Unlike a Go
// map it does not allocate as tokens come and go, and it iterates over a compact array.
type tokenCounts struct {
	ids    []core.TokenID // -1 marks an empty slot
	counts []int32
	n      int // occupied slots
	shift  uint
}

func (t *tokenCounts) reset() {
	for i := range t.ids {
		t.ids[i] = -1
	}
	t.n = 0
}

func (t *tokenCounts) slot(id core.TokenID) int {
	return int((uint32(id) * 0x9e3779b1) >> t.shift)
}

// get returns the count of id (0 when absent).
func (t *tokenCounts) get(id core.TokenID) int32 {
	if t.n == 0 {
		return 0
	}
	mask := len(t.ids) - 1
	for i := t.slot(id); ; i = (i + 1) & mask {
		switch t.ids[i] {
		case id:
			return t.counts[i]
		case -1:
			return 0
		}
	}
}

// add adds delta (±1) to the count of id, removing the entry when it reaches 0.
func (t *tokenCounts) add(id core.TokenID, delta int32) {
	if 2*(t.n+1) > len(t.ids) {
		t.grow()
	}
	mask := len(t.ids) - 1
	i := t.slot(id)
	for ; t.ids[i] != id; i = (i + 1) & mask {
		if t.ids[i] == -1 {
			if delta <= 0 {
				return // removing an absent token: nothing to do
			}
			t.ids[i], t.counts[i] = id, delta
			t.n++
			return
		}
	}
	t.counts[i] += delta
	if t.counts[i] > 0 {
		return
	}
	// Delete slot i and shift back the entries of its probe run that would become
	// unreachable.
	t.n--
	for j := (i + 1) & mask; t.ids[j] != -1; j = (j + 1) & mask {
		home := t.slot(t.ids[j])
		// The entry at j may move to i if i lies cyclically in [home, j).
		if (j-home)&mask >= (j-i)&mask {
			t.ids[i], t.counts[i] = t.ids[j], t.counts[j]
			i = j
		}
	}
	t.ids[i] = -1
}

func (t *tokenCounts) grow() {
	size := max(16, 2*len(t.ids))
	oldIDs, oldCounts := t.ids, t.counts
	t.ids = make([]core.TokenID, size)
	t.counts = make([]int32, size)
	t.shift = 32
	for s := size; s > 1; s >>= 1 {
		t.shift--
	}
	t.reset()
	for i, id := range oldIDs {
		if id != -1 {
			t.insertNew(id, oldCounts[i])
		}
	}
}

func (t *tokenCounts) insertNew(id core.TokenID, count int32) {
	mask := len(t.ids) - 1
	i := t.slot(id)
	for t.ids[i] != -1 {
		i = (i + 1) & mask
	}
	t.ids[i], t.counts[i] = id, count
	t.n++
}

func (t *tokenCounts) clone() tokenCounts {
	c := *t
	c.ids = append([]core.TokenID(nil), t.ids...)
	c.counts = append([]int32(nil), t.counts...)
	return c
}
