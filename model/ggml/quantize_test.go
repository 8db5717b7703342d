package ggml

import (
	"math"
	"math/rand/v2"
	"testing"
)

func gaussian(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * scale)
	}
	return x
}

// TestQuantizeRoundTrip quantises data of several shapes, dequantises it and bounds the
// error: exactly for the float types, per element by the block scale for Q8_0 and Q4_0, and by
// the relative RMS error for the K-quants.
func TestQuantizeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	inputs := map[string][]float32{
		"gaussian": gaussian(r, 4096, 0.02),
		"large":    gaussian(r, 1024, 300),
		"zeros":    make([]float32, 512),
		"positive": func() []float32 {
			x := gaussian(r, 512, 1)
			for i := range x {
				x[i] = float32(math.Abs(float64(x[i]))) + 1
			}
			return x
		}(),
		"outlier": func() []float32 { x := gaussian(r, 512, 0.1); x[77] = 25; return x }(),
		"mixed scales": func() []float32 {
			x := gaussian(r, 1024, 1)
			for i := 0; i < 256; i++ {
				x[i] *= 1e-3
			}
			return x
		}(),
	}
	for _, tc := range []struct {
		typ Type
		// maxRelRMS bounds the RMS error relative to the RMS of the input; maxBlockErr, when
		// positive, bounds every element's error relative to its block's largest magnitude.
		maxRelRMS   float64
		maxBlockErr float64
	}{
		{F32, 0, 0},
		{F16, 1e-3, 0},
		{BF16, 1e-2, 0},
		{Q8_0, 0.02, 0.5 / 127 * 1.002},
		{Q4_0, 0.15, 1.0 / 8 * 1.002},
		{Q4_K, 0.12, 0},
		{Q6_K, 0.04, 0},
	} {
		for name, x := range inputs {
			t.Run(tc.typ.String()+"/"+name, func(t *testing.T) {
				if !CanQuantize(tc.typ) {
					t.Fatal("CanQuantize = false")
				}
				n, err := tc.typ.RowBytes(len(x))
				if err != nil {
					t.Fatal(err)
				}
				q := make([]byte, n)
				if err := Quantize(tc.typ, x, q); err != nil {
					t.Fatal(err)
				}
				y := make([]float32, len(x))
				if err := Dequantize(tc.typ, q, y); err != nil {
					t.Fatal(err)
				}
				var se, sx float64
				for i := range x {
					e := float64(y[i]) - float64(x[i])
					se += e * e
					sx += float64(x[i]) * float64(x[i])
				}
				if sx == 0 {
					if se != 0 {
						t.Fatalf("zeros came back with squared error %g", se)
					}
					return
				}
				rel := math.Sqrt(se / sx)
				if rel > tc.maxRelRMS {
					t.Errorf("relative RMS error %.4g > %.4g", rel, tc.maxRelRMS)
				}
				if tc.maxBlockErr > 0 {
					for b := 0; b < len(x)/32; b++ {
						var amax float64
						for _, v := range x[32*b : 32*b+32] {
							amax = max(amax, math.Abs(float64(v)))
						}
						for i := 32 * b; i < 32*b+32; i++ {
							// The half-precision scale adds its own rounding.
							if e := math.Abs(float64(y[i]) - float64(x[i])); e > tc.maxBlockErr*amax*1.001+1e-7 {
								t.Fatalf("element %d: %v came back as %v, error %.3g of block max %.3g", i, x[i], y[i], e, amax)
							}
						}
					}
				}
			})
		}
	}
}

// TestQuantizeExact checks values that a format represents exactly survive a round trip.
func TestQuantizeExact(t *testing.T) {
	for _, tc := range []struct {
		typ Type
		x   func(i int) float32
	}{
		{F16, func(i int) float32 { return float32(i%200-100) / 16 }},
		{BF16, func(i int) float32 { return float32(i%200-100) / 16 }},
		{Q8_0, func(i int) float32 { return float32(i%32*8-127) / 4 }}, // block max 127/4 → d = 1/4
		{Q4_0, func(i int) float32 { return float32(i%16 - 8) }},       // m = -8 → d = 1
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			x := make([]float32, 512)
			for i := range x {
				x[i] = tc.x(i)
			}
			n, _ := tc.typ.RowBytes(len(x))
			q := make([]byte, n)
			if err := Quantize(tc.typ, x, q); err != nil {
				t.Fatal(err)
			}
			y := make([]float32, len(x))
			if err := Dequantize(tc.typ, q, y); err != nil {
				t.Fatal(err)
			}
			for i := range x {
				if x[i] != y[i] {
					t.Fatalf("element %d: %v came back as %v", i, x[i], y[i])
				}
			}
		})
	}
}

func TestQuantizeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  Type
		n    int
		dst  int
	}{
		{"unsupported type", Q5_K, 256, 176},
		{"partial block", Q8_0, 31, 34},
		{"short destination", Q4_K, 256, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Quantize(tc.typ, make([]float32, tc.n), make([]byte, tc.dst)); err == nil {
				t.Fatal("Quantize succeeded")
			}
		})
	}
}

func BenchmarkQuantizeQ4_K(b *testing.B) {
	x := gaussian(rand.New(rand.NewPCG(1, 1)), 768*256, 0.02)
	n, _ := Q4_K.RowBytes(len(x))
	q := make([]byte, n)
	b.SetBytes(int64(4 * len(x)))
	for range b.N {
		Quantize(Q4_K, x, q)
	}
}
