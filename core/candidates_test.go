package core_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
)

var (
	inf  = float32(math.Inf(1))
	ninf = float32(math.Inf(-1))
	nan  = float32(math.NaN())
)

// refTopK is the definition: sort by (logit desc, id asc), drop banned entries, keep k.
func refTopK(items []core.Candidate, k int) []core.Candidate {
	var s []core.Candidate
	for _, it := range items {
		if it.Logit > ninf {
			s = append(s, it)
		}
	}
	slices.SortFunc(s, func(a, b core.Candidate) int {
		switch {
		case a.Logit > b.Logit:
			return -1
		case a.Logit < b.Logit:
			return 1
		}
		return int(a.ID) - int(b.ID)
	})
	return s[:min(k, len(s))]
}

func denseItems(row []float32) []core.Candidate {
	out := make([]core.Candidate, len(row))
	for i, v := range row {
		out[i] = core.Candidate{ID: core.TokenID(i), Logit: v}
	}
	return out
}

func randomRow(r *rand.Rand, n int, ties, banned bool) []float32 {
	row := make([]float32, n)
	for i := range row {
		row[i] = float32(r.NormFloat64() * 2.5)
		if ties {
			row[i] = float32(r.IntN(6))
		}
		if banned && r.IntN(3) == 0 {
			row[i] = ninf
		}
	}
	return row
}

func TestTopKMatchesSortDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{1, 2, 5, 31, 40, 100, 1000, 5000} {
		for _, k := range []int{1, 2, 3, 10, 40, 999} {
			if k >= n {
				continue
			}
			for trial := range 4 {
				row := randomRow(r, n, trial&1 == 1, trial&2 == 2)
				want := refTopK(denseItems(row), k)

				// dense
				c := core.NewCandidates(slices.Clone(row))
				err := c.TopK(k)
				checkTopK(t, "dense", n, k, c, err, want)

				// sparse, shuffled
				items := denseItems(row)
				r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
				c = core.NewCandidates(nil)
				buf := c.Buffer(len(items))
				copy(buf, items)
				c.SetItems(buf, false)
				err = c.TopK(k)
				checkTopK(t, "sparse", n, k, c, err, want)

				// sparse, sorted
				c = core.NewCandidates(slices.Clone(row))
				c.Sort()
				err = c.TopK(k)
				checkTopK(t, "sorted", n, k, c, err, want)
			}
		}
	}
}

func checkTopK(t *testing.T, form string, n, k int, c *core.Candidates, err error, want []core.Candidate) {
	t.Helper()
	if len(want) == 0 {
		if !errors.Is(err, core.ErrNoCandidates) {
			t.Fatalf("%s n=%d k=%d: err = %v, want ErrNoCandidates", form, n, k, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s n=%d k=%d: %v", form, n, k, err)
	}
	if !c.Sorted() {
		t.Fatalf("%s n=%d k=%d: result not marked sorted", form, n, k)
	}
	if got := c.Items(); !slices.Equal(got, want) {
		t.Fatalf("%s n=%d k=%d:\n got %v\nwant %v", form, n, k, got, want)
	}
}

func TestTopKEdgeCases(t *testing.T) {
	// k at least the set size: unchanged, not even examined.
	row := []float32{1, nan, 3}
	c := core.NewCandidates(row)
	if err := c.TopK(3); err != nil || !c.IsDense() {
		t.Fatalf("k = len: err %v, dense %v", err, c.IsDense())
	}
	if err := c.TopK(100); err != nil || !c.IsDense() {
		t.Fatalf("k > len: err %v, dense %v", err, c.IsDense())
	}
	// A NaN met while selecting is an error naming the token.
	if err := c.TopK(1); !errors.Is(err, core.ErrInvalidLogits) || !strings.Contains(err.Error(), "token 1") {
		t.Fatalf("NaN: err = %v", err)
	}
	// Every entry banned.
	c = core.NewCandidates([]float32{ninf, ninf, ninf})
	if err := c.TopK(1); !errors.Is(err, core.ErrNoCandidates) {
		t.Fatalf("all banned: err = %v", err)
	}
	// k ≤ 0 keeps nothing.
	c = core.NewCandidates([]float32{1, 2})
	if err := c.TopK(0); !errors.Is(err, core.ErrNoCandidates) {
		t.Fatalf("k = 0: err = %v", err)
	}
	// +Inf is kept (the selection reports it later).
	c = core.NewCandidates([]float32{1, inf, 2})
	if err := c.TopK(1); err != nil || c.Items()[0].ID != 1 {
		t.Fatalf("+Inf: err %v items %v", err, c.Items())
	}
	if _, _, err := c.Probs(); !errors.Is(err, core.ErrInvalidLogits) {
		t.Fatalf("+Inf then Probs: err = %v", err)
	}
	// Fewer finite entries than k: the banned ones are dropped.
	c = core.NewCandidates([]float32{ninf, 5, ninf, 4, ninf})
	if err := c.TopK(4); err != nil || !slices.Equal(c.Items(), []core.Candidate{{1, 5}, {3, 4}}) {
		t.Fatalf("few finite: err %v items %v", err, c.Items())
	}
}

func TestProbs(t *testing.T) {
	row := []float32{0, float32(math.Log(3)), ninf, float32(math.Log(6))}
	c := core.NewCandidates(row)
	probs, logZ, err := c.Probs()
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0.1, 0.3, 0, 0.6}
	for i, p := range probs {
		if math.Abs(float64(p)-want[i]) > 1e-6 {
			t.Fatalf("probs = %v, want %v", probs, want)
		}
	}
	if math.Abs(float64(logZ)-math.Log(10)) > 1e-6 {
		t.Fatalf("logZ = %v, want ln 10", logZ)
	}
	for _, tc := range []struct {
		name string
		row  []float32
		want error
	}{
		{"NaN", []float32{0, nan}, core.ErrInvalidLogits},
		{"+Inf", []float32{0, inf}, core.ErrInvalidLogits},
		{"all banned", []float32{ninf, ninf}, core.ErrNoCandidates},
		{"empty", []float32{}, core.ErrNoCandidates},
	} {
		c := core.NewCandidates(tc.row)
		if _, _, err := c.Probs(); !errors.Is(err, tc.want) {
			t.Errorf("%s: Probs err = %v, want %v", tc.name, err, tc.want)
		}
		if _, err := c.Argmax(); !errors.Is(err, tc.want) {
			t.Errorf("%s: Argmax err = %v, want %v", tc.name, err, tc.want)
		}
	}
	// Sparse sets give the same probabilities as their dense row restricted to the items.
	c = core.NewCandidates(slices.Clone(row))
	c.SetItems(append(c.Buffer(2)[:0], core.Candidate{ID: 3, Logit: row[3]}, core.Candidate{ID: 1, Logit: row[1]}), false)
	probs, _, err = c.Probs()
	if err != nil || math.Abs(float64(probs[0])-2.0/3) > 1e-6 || math.Abs(float64(probs[1])-1.0/3) > 1e-6 {
		t.Fatalf("sparse probs = %v, %v", probs, err)
	}
}

func TestScratchIsSeparateFromTheSet(t *testing.T) {
	row := []float32{1, 2, 3}
	c := core.NewCandidates(row)
	f := c.ScratchFloats(3)
	it := c.ScratchItems(3)
	for i := range f {
		f[i] = 99
		it[i] = core.Candidate{ID: 99, Logit: 99}
	}
	c.Sort()
	if _, _, err := c.Probs(); err != nil {
		t.Fatal(err)
	}
	if f[0] != 99 || it[2].ID != 99 {
		t.Fatal("Candidates methods wrote into the processors' scratch")
	}
	if got := c.Items(); got[0].ID != 2 || got[0].Logit != 3 {
		t.Fatalf("scratch writes changed the set: %v", got)
	}
	if allocs := testing.AllocsPerRun(10, func() { c.ScratchFloats(3); c.ScratchItems(2) }); allocs != 0 {
		t.Fatalf("scratch of a size already served allocates %v times", allocs)
	}
}

func TestTopKDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	src := randomRow(r, 32000, false, false)
	row := make([]float32, len(src))
	c := core.NewCandidates(row)
	step := func() {
		copy(row, src)
		c.Reset(row)
		if err := c.TopK(40); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Probs(); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if allocs := testing.AllocsPerRun(20, step); allocs != 0 {
		t.Fatalf("TopK + Probs allocate %v times per step", allocs)
	}
}

func BenchmarkTopK40(b *testing.B) {
	for _, n := range []int{32000, 151936} {
		b.Run(fmt.Sprintf("vocab=%d", n), func(b *testing.B) {
			src := randomRow(rand.New(rand.NewPCG(3, 3)), n, false, false)
			row := make([]float32, n)
			c := core.NewCandidates(row)
			b.ReportAllocs()
			for b.Loop() {
				copy(row, src)
				c.Reset(row)
				_ = c.TopK(40)
			}
		})
	}
}

func BenchmarkProbsDense(b *testing.B) {
	for _, n := range []int{32000, 151936} {
		b.Run(fmt.Sprintf("vocab=%d", n), func(b *testing.B) {
			row := randomRow(rand.New(rand.NewPCG(4, 4)), n, false, false)
			c := core.NewCandidates(row)
			b.ReportAllocs()
			for b.Loop() {
				_, _, _ = c.Probs()
			}
		})
	}
}
