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
