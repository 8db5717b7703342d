package fastmath

import (
	"fmt"
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

// BenchmarkExpShiftSum151936 runs ExpShiftSum over a 151 936-value row (a large vocabulary)
// with the default kernel and, where that is the AVX-512 one, with the AVX2 one.
func BenchmarkExpShiftSum151936(b *testing.B) {
	src := make([]float32, 151936)
	for i := range src {
		src[i] = float32(i%997) / 100
	}
	dst := make([]float32, len(src))
	b.Run("default", func(b *testing.B) {
		for b.Loop() {
			ExpShiftSum(dst, src, 10)
		}
	})
	if useAVX512 {
		b.Run("avx2", func(b *testing.B) {
			withoutAVX512(func() {
				for b.Loop() {
					ExpShiftSum(dst, src, 10)
				}
			})
		})
	}
}

// BenchmarkExpShiftSumShort runs ExpShiftSum over rows as short as an attention row's
// positions, where the values past the last whole block of 32 are a large share.
func BenchmarkExpShiftSumShort(b *testing.B) {
	for _, n := range []int{20, 150, 1000} {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(i%97) / 10
		}
		dst := make([]float32, n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				ExpShiftSum(dst, src, 10)
			}
		})
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
