package strategies

import (
	"slices"
	"testing"

	"github.com/loomlm/loom/core"
)

func TestLookup(t *testing.T) {
	for _, c := range []struct {
		name string
		toks []core.TokenID
		n, k int
		want []core.TokenID
	}{
		{"continuation inside the sequence", []core.TokenID{1, 2, 3, 4, 9, 1, 2}, 2, 2, []core.TokenID{3, 4}},
		{"the most recent occurrence", []core.TokenID{1, 2, 5, 1, 2, 6, 1, 2}, 2, 1, []core.TokenID{6}},
		{"longest n first", []core.TokenID{3, 2, 7, 1, 2, 8, 3, 2}, 2, 1, []core.TokenID{7}},
		{"shorter n when the longest has no match", []core.TokenID{4, 2, 7, 9, 2}, 3, 2, []core.TokenID{7, 9}},
		{"period of one", []core.TokenID{5, 5, 5}, 3, 4, []core.TokenID{5, 5, 5, 5}},
		{"period of three, copied over the drafts", []core.TokenID{1, 2, 3, 1, 2, 3}, 2, 7, []core.TokenID{1, 2, 3, 1, 2, 3, 1}},
		{"run into the end, then overlap", []core.TokenID{7, 8, 9, 4, 7, 8}, 2, 5, []core.TokenID{9, 4, 7, 8, 9}},
		{"no match", []core.TokenID{1, 2, 3}, 2, 4, nil},
		{"too short", []core.TokenID{1}, 2, 4, nil},
	} {
		if got := lookup(c.toks, c.n, c.k); !slices.Equal(got, c.want) {
			t.Errorf("%s: lookup(%v, %d, %d) = %v, want %v", c.name, c.toks, c.n, c.k, got, c.want)
		}
	}
}
