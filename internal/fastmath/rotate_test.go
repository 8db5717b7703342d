package fastmath

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestRotateMatchesReference checks RotatePairs and RotateHalves, with the default kernels and
// with the Go ones, bit for bit against the rotation written out pair by pair, for heads of 1
// to 40 pairs (the kernels' blocks and the tails past them), one to three heads a call, and
// values that include infinities, NaNs and signed zeros.
func TestRotateMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	rot := func(x0, x1, c, s float32) (float32, float32) {
		return float32(x0*c) - float32(x1*s), float32(x0*s) + float32(x1*c)
	}
	for half := 1; half <= 40; half++ {
		for heads := 1; heads <= 3; heads++ {
			v := testRow(r, 2*half*heads, 4, half%3 == 0)
			cos, sin := testRow(r, half, 1, half%5 == 0), testRow(r, half+r.IntN(3), 1, false)
			wantPairs, wantHalves := append([]float32(nil), v...), append([]float32(nil), v...)
			for h := 0; h < heads; h++ {
				p, q := wantPairs[2*half*h:], wantHalves[2*half*h:]
				for i := range half {
					p[2*i], p[2*i+1] = rot(p[2*i], p[2*i+1], cos[i], sin[i])
					q[i], q[i+half] = rot(q[i], q[i+half], cos[i], sin[i])
				}
			}
			for _, impl := range []struct {
				name string
				run  func(func())
			}{{"default", func(f func()) { f() }}, {"generic", withGeneric}} {
				for _, tc := range []struct {
					name   string
					rotate func(v, cos, sin []float32)
					want   []float32
				}{{"pairs", RotatePairs, wantPairs}, {"halves", RotateHalves, wantHalves}} {
					got := append([]float32(nil), v...)
					impl.run(func() { tc.rotate(got, cos, sin) })
					for i := range got {
						if !sameBits(got[i], tc.want[i]) {
							t.Fatalf("%s %s, %d pairs × %d heads: value %d is %v, want %v", tc.name, impl.name, half, heads, i, got[i], tc.want[i])
						}
					}
				}
			}
		}
	}
}

// TestRotatePartialHeadPanics checks that a vector that is not a whole number of heads, and
// fewer sines than cosines, are refused with the lengths named, in both layouts.
func TestRotatePartialHeadPanics(t *testing.T) {
	cos, sin := make([]float32, 4), make([]float32, 4)
	for _, rotate := range []func(v, cos, sin []float32){RotatePairs, RotateHalves} {
		for _, tc := range []struct {
			v, sin []float32
			want   string
		}{
			{make([]float32, 12), sin, "12 values: not a whole number of heads of 8"},
			{make([]float32, 16), sin[:3], "with 3 sines for 4 cosines"},
		} {
			func() {
				defer func() {
					msg, _ := recover().(string)
					if !strings.Contains(msg, tc.want) {
						t.Errorf("%d values, %d cosines, %d sines: panic %q, want %q", len(tc.v), len(cos), len(tc.sin), msg, tc.want)
					}
				}()
				rotate(tc.v, cos, tc.sin)
			}()
		}
	}
}

// BenchmarkRotatePairs rotates the heads of one row as a small model's forward pass does (12
// heads of 32 values) and as a larger one's does (16 of 64).
func BenchmarkRotatePairs(b *testing.B) {
	for _, sh := range []struct{ heads, hd int }{{12, 32}, {16, 64}} {
		r := rand.New(rand.NewPCG(7, 8))
		v, cos, sin := testRow(r, sh.heads*sh.hd, 1, false), testRow(r, sh.hd/2, 1, false), testRow(r, sh.hd/2, 1, false)
		b.Run(fmt.Sprintf("heads=%d/hd=%d", sh.heads, sh.hd), func(b *testing.B) {
			for b.Loop() {
				RotatePairs(v, cos, sin)
			}
		})
	}
}
