package fastmath

import (
	"math"
	"testing"
)

func TestExpAccuracy(t *testing.T) {
	worst := 0.0
	for x := -87.0; x < 88.5; x += 0.000731 {
		got := float64(Exp(float32(x)))
		want := math.Exp(float64(float32(x)))
		rel := math.Abs(got-want) / want
		if rel > worst {
			worst = rel
		}
	}
	if worst > 2e-7 {
		t.Fatalf("worst relative error %.3g, want < 2e-7", worst)
	}
}

func TestExpSpecialValues(t *testing.T) {
	inf := float32(math.Inf(1))
	cases := []struct {
		in, want float32
	}{
		{0, 1},
		{-inf, 0},
		{inf, inf},
		{-100, 0},
		{100, inf},
	}
	for _, c := range cases {
		if got := Exp(c.in); got != c.want {
			t.Errorf("Exp(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if got := Exp(float32(math.NaN())); got == got {
		t.Errorf("Exp(NaN) = %v, want NaN", got)
	}
}

func TestMax(t *testing.T) {
	ninf := float32(math.Inf(-1))
	cases := []struct {
		in    []float32
		max   float32
		index int
		nan   bool
	}{
		{nil, ninf, -1, false},
		{[]float32{1, 3, 2}, 3, 1, false},
		{[]float32{ninf, ninf}, ninf, 0, false},
		{[]float32{1, float32(math.NaN()), 2}, 2, 2, true},
	}
	for _, c := range cases {
		m, i, n := Max(c.in)
		if m != c.max || i != c.index || n != c.nan {
			t.Errorf("Max(%v) = %v,%v,%v want %v,%v,%v", c.in, m, i, n, c.max, c.index, c.nan)
		}
	}
}

func BenchmarkExpShiftSum151936(b *testing.B) {
	src := make([]float32, 151936)
	for i := range src {
		src[i] = float32(i%997) / 100
	}
	dst := make([]float32, len(src))
	b.ResetTimer()
	for b.Loop() {
		ExpShiftSum(dst, src, 10)
	}
}

func BenchmarkMathExp151936(b *testing.B) {
	src := make([]float32, 151936)
	for i := range src {
		src[i] = float32(i%997) / 100
	}
	dst := make([]float32, len(src))
	b.ResetTimer()
	for b.Loop() {
		for i, v := range src {
			dst[i] = float32(math.Exp(float64(v - 10)))
		}
	}
}
