package fastmath

import (
	"math"
	"math/rand/v2"
	"testing"
)

// withGeneric runs f with the Go kernels and returns to the default afterwards.
func withGeneric(f func()) {
	saved, saved512 := useAVX2, useAVX512
	useAVX2, useAVX512 = false, false
	defer func() { useAVX2, useAVX512 = saved, saved512 }()
	f()
}

// withoutAVX512 runs f with the AVX2 kernels where the default would take an AVX-512 one.
func withoutAVX512(f func()) {
	saved := useAVX512
	useAVX512 = false
	defer func() { useAVX512 = saved }()
	f()
}

// testRow returns n values: mostly normal with the given spread, with special values mixed in
// when specials is set.
func testRow(r *rand.Rand, n int, sigma float64, specials bool) []float32 {
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = float32(r.NormFloat64() * sigma)
		if specials && r.IntN(16) == 0 {
			xs[i] = []float32{
				float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN()), 0,
				float32(math.Copysign(0, -1)), 1e-40, -1e-40, 100, -100, 88.7, 88.8, -87.3, -87.4,
				math.MaxFloat32, -math.MaxFloat32,
			}[r.IntN(15)]
		}
	}
	return xs
}

func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

var lengths = []int{0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 100, 150, 1023, 1024, 1025, 2048 + 37, 5000}

func TestExpShiftSumMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range lengths {
		for _, specials := range []bool{false, true} {
			src := testRow(r, n, 8, specials)
			for _, shift := range []float32{0, 3.5, -20, float32(math.Inf(1))} {
				// d1's backing array runs 32 values past n: a kernel that writes past the
				// end of dst changes them.
				d1, d2, d3 := make([]float32, n, n+32), make([]float32, n), make([]float32, n)
				past := d1[n : n+32]
				for i := range past {
					past[i] = -1
				}
				s1 := ExpShiftSum(d1, src, shift)
				for i, v := range past {
					if v != -1 {
						t.Fatalf("n=%d: dst[%d], past the end, was written: %v", n, n+i, v)
					}
				}
				var s2, s3 float64
				withGeneric(func() { s2 = ExpShiftSum(d2, src, shift) })
				withoutAVX512(func() { s3 = ExpShiftSum(d3, src, shift) })
				for _, s := range []float64{s1, s3} {
					if math.Float64bits(s) != math.Float64bits(s2) && !(s != s && s2 != s2) {
						t.Errorf("n=%d shift=%v specials=%v: sum %v (default, AVX-512 %v), %v without AVX-512, %v generic", n, shift, specials, s1, useAVX512, s3, s2)
					}
				}
				for i := range d1 {
					if !sameBits(d1[i], d2[i]) || !sameBits(d3[i], d2[i]) {
						t.Fatalf("n=%d shift=%v: element %d (x=%v): %v (default), %v (without AVX-512) != %v (generic)", n, shift, i, src[i], d1[i], d3[i], d2[i])
					}
					if want := Exp(src[i] - shift); !sameBits(d1[i], want) {
						t.Fatalf("n=%d: element %d: %v, Exp gives %v", n, i, d1[i], want)
					}
				}
			}
		}
	}
}

func TestExpShiftSumValue(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	src := testRow(r, 151936, 3, false)
	dst := make([]float32, len(src))
	m, _, _ := Max(src)
	got := ExpShiftSum(dst, src, m)
	var want float64
	for _, v := range src {
		want += math.Exp(float64(v) - float64(m))
	}
	if rel := math.Abs(got-want) / want; rel > 1e-6 {
		t.Fatalf("sum %v, float64 reference %v (relative error %.2g)", got, want, rel)
	}
}

func TestExpEdges(t *testing.T) {
	// The largest input that does not overflow needs the two-step scaling (n = 128).
	x := float32(88.7) // round(x·log2 e) = 128
	if got, want := float64(Exp(x)), math.Exp(float64(x)); math.IsInf(got, 0) || math.Abs(got-want)/want > 2e-7 {
		t.Fatalf("Exp(%v) = %v, want %v", x, got, want)
	}
	// Results near the bottom of the range are subnormal-free and monotone enough to be
	// usable: no value below expMin is positive.
	if got := Exp(float32(expMin)); got != 0 {
		t.Fatalf("Exp(expMin) = %v, want 0", got)
	}
	if got := Exp(math.Nextafter32(float32(expMin), 0)); got <= 0 {
		t.Fatalf("Exp just above expMin = %v, want > 0", got)
	}
}

// TestMaxMatchesGeneric checks Max and MaxValue against a plain loop on rows of every length,
// with NaNs, -Inf, ties and the maximum in the tail, with and without the vector kernels.
func TestMaxMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ninf := float32(math.Inf(-1))
	for _, n := range lengths {
		for trial := 0; trial < 20; trial++ {
			xs := testRow(r, n, 3, trial%2 == 1)
			switch trial {
			case 2: // all -Inf
				for i := range xs {
					xs[i] = ninf
				}
			case 4: // ties: the first wins
				for i := range xs {
					xs[i] = float32(r.IntN(3))
				}
			case 6: // max in the tail
				if n > 0 {
					xs[n-1] = 1000
				}
			}
			m1, i1, nan1 := Max(xs)
			m2, i2, nan2 := maxGeneric(xs)
			if !sameBits(m1, m2) && !(m1 == m2) || i1 != i2 || nan1 != nan2 {
				t.Fatalf("n=%d trial %d: Max = (%v, %d, %v), plain loop (%v, %d, %v)", n, trial, m1, i1, nan1, m2, i2, nan2)
			}
			if mv, nanv := MaxValue(xs); !sameBits(mv, m2) && !(mv == m2) || nanv != nan2 {
				t.Fatalf("n=%d trial %d: MaxValue = (%v, %v), plain loop (%v, %v)", n, trial, mv, nanv, m2, nan2)
			}
			withGeneric(func() { m1, i1, nan1 = Max(xs) })
			if m1 != m2 && !(m1 != m1) || i1 != i2 || nan1 != nan2 {
				t.Fatalf("n=%d trial %d: generic Max = (%v, %d, %v), plain loop (%v, %d, %v)", n, trial, m1, i1, nan1, m2, i2, nan2)
			}
		}
	}
}

func TestMax(t *testing.T) {
	ninf := float32(math.Inf(-1))
	nan := float32(math.NaN())
	cases := []struct {
		in    []float32
		max   float32
		index int
		nan   bool
	}{
		{nil, ninf, -1, false},
		{[]float32{1, 3, 2}, 3, 1, false},
		{[]float32{ninf, ninf}, ninf, 0, false},
		{[]float32{1, nan, 2}, 2, 2, true},
		{[]float32{nan, nan}, ninf, -1, true},
		{[]float32{ninf, nan}, ninf, -1, true},
	}
	for _, c := range cases {
		m, i, n := Max(c.in)
		if m != c.max || i != c.index || n != c.nan {
			t.Errorf("Max(%v) = %v,%v,%v want %v,%v,%v", c.in, m, i, n, c.max, c.index, c.nan)
		}
	}
}

func TestIndexAbove(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range lengths {
		for trial := 0; trial < 20; trial++ {
			xs := testRow(r, n, 1, trial%3 == 0)
			th := []float32{-1, 0, 2, 3.5, 10, float32(math.Inf(1)), float32(math.Inf(-1))}[trial%7]
			want := indexAboveGeneric(xs, th)
			if got := IndexAbove(xs, th); got != want {
				t.Fatalf("n=%d t=%v: IndexAbove = %d, want %d", n, th, got, want)
			}
			// Every start offset, as top-k uses it.
			for from := 0; from < n; from += 1 + n/7 {
				if got, want := from+IndexAbove(xs[from:], th), from+indexAboveGeneric(xs[from:], th); got != want {
					t.Fatalf("n=%d from=%d t=%v: %d, want %d", n, from, th, got, want)
				}
			}
		}
	}
	nan := float32(math.NaN())
	if got := IndexAbove([]float32{0, 0, nan, 5}, 1); got != 2 {
		t.Fatalf("a NaN is not ≤ t: got %d, want 2", got)
	}
}

func TestDivide(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, n := range lengths {
		xs := testRow(r, n, 3, true)
		a := append([]float32(nil), xs...)
		b := append([]float32(nil), xs...)
		Divide(a, 0.7)
		withGeneric(func() { Divide(b, 0.7) })
		for i := range xs {
			want := xs[i] / 0.7
			if !sameBits(a[i], want) || !sameBits(b[i], want) {
				t.Fatalf("n=%d: element %d: %v and %v, want %v", n, i, a[i], b[i], want)
			}
		}
	}
}

func TestSiLUGate(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for _, n := range lengths {
		gs := testRow(r, n, 3, true)
		us := testRow(r, n, 2, false)
		es := make([]float32, n)
		for i, g := range gs {
			es[i] = Exp(-g)
		}
		if n > 2 { // e**(-g) overflowing to +Inf gives -0 or NaN (g = -Inf), as in Go
			es[0], es[1] = float32(math.Inf(1)), 0
		}
		a := append([]float32(nil), gs...)
		b := append([]float32(nil), gs...)
		SiLUGate(a, es, us)
		withGeneric(func() { SiLUGate(b, es, us) })
		for i := range gs {
			want := gs[i] / (1 + es[i]) * us[i]
			if !sameBits(a[i], want) || !sameBits(b[i], want) {
				t.Fatalf("n=%d: element %d: %v and %v, want %v", n, i, a[i], b[i], want)
			}
		}
		// es the same slice as gs.
		c, d := append([]float32(nil), gs...), append([]float32(nil), gs...)
		SiLUGate(c, c, us)
		withGeneric(func() { SiLUGate(d, d, us) })
		for i, g := range gs {
			if want := g / (1 + g) * us[i]; !sameBits(c[i], want) || !sameBits(d[i], want) {
				t.Fatalf("n=%d: SiLUGate(gs, gs, us): element %d: %v and %v, want %v", n, i, c[i], d[i], want)
			}
		}
	}
}

func TestAddAndScaleMul(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	for _, n := range lengths {
		xs, ys := testRow(r, n, 3, true), testRow(r, n, 2, false)
		for _, generic := range []bool{false, true} {
			a := append([]float32(nil), xs...)
			m := make([]float32, n)
			// The same slice as two operands, as rmsNorm normalises in place.
			self, inPlace := append([]float32(nil), xs...), append([]float32(nil), xs...)
			run := func() {
				Add(a, ys)
				ScaleMul(m, xs, ys, 0.3)
				Add(self, self)
				ScaleMul(inPlace, inPlace, ys, 0.3)
			}
			if generic {
				withGeneric(run)
			} else {
				run()
			}
			for i := range xs {
				if want := xs[i] + ys[i]; !sameBits(a[i], want) {
					t.Fatalf("n=%d generic=%v: Add: element %d: %v, want %v", n, generic, i, a[i], want)
				}
				if want := xs[i] * 0.3 * ys[i]; !sameBits(m[i], want) || !sameBits(inPlace[i], want) {
					t.Fatalf("n=%d generic=%v: ScaleMul: element %d: %v (in place %v), want %v", n, generic, i, m[i], inPlace[i], want)
				}
				if want := xs[i] + xs[i]; !sameBits(self[i], want) {
					t.Fatalf("n=%d generic=%v: Add(xs, xs): element %d: %v, want %v", n, generic, i, self[i], want)
				}
			}
		}
	}
}

func TestMaskAbove(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, n := range append(lengths, 64, 127, 128, 129, 4096) {
		xs := testRow(r, n, 1, n%2 == 0)
		for _, th := range []float32{-1, 0.5, 3, float32(math.Inf(-1))} {
			words := (n + 63) / 64
			a := make([]uint64, words)
			b := make([]uint64, words)
			for i := range a {
				a[i], b[i] = ^uint64(0), ^uint64(0) // stale bits must be cleared
			}
			MaskAbove(a, xs, th)
			withGeneric(func() { MaskAbove(b, xs, th) })
			for i := range n {
				want := !(xs[i] <= th)
				if got := a[i/64]>>(i%64)&1 == 1; got != want {
					t.Fatalf("n=%d t=%v: bit %d = %v, want %v (x = %v)", n, th, i, got, want, xs[i])
				}
			}
			for k := range a {
				if a[k] != b[k] {
					t.Fatalf("n=%d: word %d differs between kernels", n, k)
				}
				if k == words-1 && n%64 != 0 && a[k]>>(n%64) != 0 {
					t.Fatalf("n=%d: bits past the end are set", n)
				}
			}
		}
	}
}

func TestScale(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range lengths {
		xs := testRow(r, n, 3, true)
		a := append([]float32(nil), xs...)
		b := append([]float32(nil), xs...)
		Scale(a, 1/0.7)
		withGeneric(func() { Scale(b, 1/0.7) })
		for i := range xs {
			want := xs[i] * (1 / 0.7)
			if !sameBits(a[i], want) || !sameBits(b[i], want) {
				t.Fatalf("n=%d: element %d: %v and %v, want %v", n, i, a[i], b[i], want)
			}
		}
	}
}

func benchRow() []float32 {
	return testRow(rand.New(rand.NewPCG(1, 1)), 151936, 2.5, false)
}

func BenchmarkMax151936(b *testing.B) {
	xs := benchRow()
	for b.Loop() {
		Max(xs)
	}
}

func BenchmarkIndexAbove151936(b *testing.B) {
	xs := benchRow()
	for b.Loop() {
		IndexAbove(xs, 100)
	}
}

func BenchmarkMaskAbove151936(b *testing.B) {
	xs := benchRow()
	dst := make([]uint64, (len(xs)+63)/64)
	for b.Loop() {
		MaskAbove(dst, xs, 2)
	}
}

func BenchmarkDivide151936(b *testing.B) {
	xs := benchRow()
	for b.Loop() {
		Divide(xs, 1)
	}
}

func BenchmarkScale151936(b *testing.B) {
	xs := benchRow()
	for b.Loop() {
		Scale(xs, 1)
	}
}
