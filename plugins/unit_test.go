package plugins

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/loomlm/loom/core"
)

func TestFirstInvalid(t *testing.T) {
	bad := []float32{float32(math.NaN()), float32(math.Inf(1)), -float32(math.NaN()), math.Float32frombits(0xffffffff), math.Float32frombits(0xff800001), math.Float32frombits(0x7f800001)}
	good := []float32{float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32, 0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, 1, -1}
	for _, n := range []int{1, 2, 7, 8, 9, 1000, 1001} {
		xs := make([]float32, n)
		for _, v := range good {
			xs[n-1], xs[n/2] = v, v
			if i := firstInvalid(xs); i != -1 {
				t.Fatalf("n=%d: %v flagged at %d", n, v, i)
			}
		}
		for _, v := range bad {
			for _, pos := range []int{0, n / 2, n - 1} {
				clear(xs)
				xs[pos] = v
				if i := firstInvalid(xs); i != pos {
					t.Fatalf("n=%d: %v at %d found at %d", n, v, pos, i)
				}
			}
		}
	}
}

func TestCopyChecked(t *testing.T) {
	for _, n := range []int{0, 1, 31, 32, 33, 64, 100, 1000, 1029} {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(i) - 7
		}
		dst := make([]float32, n)
		if i := copyChecked(dst, src); i != -1 || !slices.Equal(dst, src) {
			t.Fatalf("n=%d: %d, copied %v", n, i, slices.Equal(dst, src))
		}
		for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), math.Float32frombits(0xff800001)} {
			for _, pos := range []int{0, n / 2, n - 1} {
				if n == 0 {
					continue
				}
				old := src[pos]
				src[pos] = v
				clear(dst)
				if i := copyChecked(dst, src); i != pos || math.Float32bits(dst[pos]) != math.Float32bits(v) {
					t.Fatalf("n=%d: %v at %d found at %d", n, v, pos, i)
				}
				src[pos] = old
			}
		}
		if n > 0 {
			src[n-1] = float32(math.Inf(-1))
			if i := copyChecked(dst, src); i != -1 {
				t.Fatalf("n=%d: -Inf flagged at %d", n, i)
			}
		}
	}
}

func BenchmarkCopyChecked(b *testing.B) {
	src := make([]float32, 151936)
	dst := make([]float32, len(src))
	b.SetBytes(int64(4 * len(src)))
	for b.Loop() {
		copyChecked(dst, src)
	}
}

func BenchmarkCopyThenCheck(b *testing.B) {
	src := make([]float32, 151936)
	dst := make([]float32, len(src))
	b.SetBytes(int64(4 * len(src)))
	for b.Loop() {
		copy(dst, src)
		firstInvalid(dst)
	}
}

func TestTopCandidates(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	row := make([]float32, 500)
	for i := range row {
		row[i] = float32(r.IntN(40)) // many ties
	}
	row[17] = float32(math.NaN())
	for _, n := range []int{1, 5, 40, 600} {
		c := core.NewCandidates(append([]float32(nil), row...))
		got := topCandidates(nil, c, n)
		ref := core.NewCandidates(append([]float32(nil), row...))
		var items []core.Candidate
		for _, it := range ref.Items() {
			if it.Logit == it.Logit {
				items = append(items, it)
			}
		}
		slices.SortFunc(items, func(a, b core.Candidate) int {
			if a.Logit != b.Logit {
				if a.Logit > b.Logit {
					return -1
				}
				return 1
			}
			return int(a.ID - b.ID)
		})
		want := items[:min(n, len(items))]
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d: got %v\nwant %v", n, got[:min(8, len(got))], want[:min(8, len(want))])
		}
	}
}

func TestPluginLogLines(t *testing.T) {
	var out strings.Builder
	l := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Trace, Name: "p"})
	var st logState
	tl := &tail{}
	for _, line := range []string{
		`{"@message": 42}`,
		`{"@message": "hi", "@level": "error", "n": 1, "nested": {"a": [1]}}`,
		`{"@level": "debug"}`,
		"plain \x1b[2J text",
		`{"@message": "bad level", "@level": 7}`,
		"panic: oh no",
		"goroutine 1 [running]:",
	} {
		st.log(l, tl, []byte(line))
	}
	s := out.String()
	for _, want := range []string{
		"[INFO]  p: 42",
		`[ERROR] p: hi: n=1 nested="{\"a\":[1]}"`,
		`[INFO]  p: {"@level": "debug"}`,
		`plain \x1b[2J text`,
		"[INFO]  p: bad level",
		"[ERROR] p: panic: oh no",
		"[ERROR] p: goroutine 1 [running]:",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("log lacks %q:\n%s", want, s)
		}
	}
	if tl.last() != "panic: oh no" {
		t.Errorf("tail's last telling line: %q", tl.last())
	}
}
