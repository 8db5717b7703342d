package ggml

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// halfValue computes the value of half-precision bits h in float64 from the IEEE 754
// definition, independently of HalfToFloat32.
func halfValue(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch e {
	case 0:
		return sign * m * math.Pow(2, -24)
	case 0x1f:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * (1 + m/1024) * math.Pow(2, float64(e-15))
}

func TestHalfToFloat32AllValues(t *testing.T) {
	for h := range 1 << 16 {
		got := float64(HalfToFloat32(uint16(h)))
		want := halfValue(uint16(h))
		if math.IsNaN(want) {
			if !math.IsNaN(got) {
				t.Fatalf("half %#04x: got %v, want NaN", h, got)
			}
			continue
		}
		if got != want || math.Signbit(got) != math.Signbit(want) {
			t.Fatalf("half %#04x: got %v, want %v", h, got, want)
		}
		// Every finite half survives the round trip.
		if back := Float32ToHalf(float32(got)); back != uint16(h) {
			t.Fatalf("half %#04x: round trip gives %#04x", h, back)
		}
	}
}

func TestFloat32ToHalfRounding(t *testing.T) {
	// The nearest half to x, ties to the even bit pattern, found by searching the ordered
	// positive halves.
	nearest := func(x float64) uint16 {
		var sign uint16
		if x < 0 {
			sign, x = 0x8000, -x
		}
		if x >= 65520 { // halfway between the largest half and the next power
			return sign | 0x7c00
		}
		lo := uint16(0)
		for h := uint16(1); h < 0x7c00; h++ {
			if halfValue(h) <= x {
				lo = h
			} else {
				break
			}
		}
		if lo == 0x7bff {
			return sign | lo
		}
		a, b := halfValue(lo), halfValue(lo+1)
		switch {
		case x-a < b-x:
			return sign | lo
		case x-a > b-x:
			return sign | (lo + 1)
		case lo&1 == 0:
			return sign | lo
		}
		return sign | (lo + 1)
	}
	r := rand.New(rand.NewPCG(1, 2))
	cases := []float32{0, 1, -1, 0.1, 65504, 65519, 65520, 1e-8, 2.9802322e-08, 5.9604645e-08, 6.1035156e-05, 1 + 1.0/2048, 1 + 3.0/2048}
	for range 300 {
		cases = append(cases, float32(r.NormFloat64()*math.Pow(2, float64(r.IntN(40)-25))))
	}
	for _, f := range cases {
		if got, want := Float32ToHalf(f), nearest(float64(f)); got != want {
			t.Errorf("Float32ToHalf(%g) = %#04x, want %#04x", f, got, want)
		}
	}
}

func TestBF16(t *testing.T) {
	tests := []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{-2, 0xc000},
		{float32(math.Float32frombits(0x3f808000)), 0x3f80}, // tie, even stays
		{float32(math.Float32frombits(0x3f818000)), 0x3f82}, // tie, odd rounds up
		{float32(math.Float32frombits(0x3f808001)), 0x3f81},
		{float32(math.Inf(-1)), 0xff80},
	}
	for _, tc := range tests {
		if got := Float32ToBF16(tc.in); got != tc.want {
			t.Errorf("Float32ToBF16(%g) = %#04x, want %#04x", tc.in, got, tc.want)
		}
		if got := BF16ToFloat32(tc.want); Float32ToBF16(got) != tc.want {
			t.Errorf("BF16 %#04x does not round trip", tc.want)
		}
	}
	if !math.IsNaN(float64(BF16ToFloat32(Float32ToBF16(float32(math.NaN()))))) {
		t.Error("NaN does not stay NaN")
	}
}

// A quantised block described by its logical content; encode lays it out as the format
// defines and want computes each element in float64.
type testBlock struct {
	name   string
	typ    Type
	encode func() []byte
	want   []float64
}

// randHalf returns half bits of a moderate random value and its exact value.
func randHalf(r *rand.Rand, scale float64) (uint16, float64) {
	h := Float32ToHalf(float32((r.Float64()*2 - 1) * scale))
	return h, halfValue(h)
}

func putHalf(b []byte, h uint16) { binary.LittleEndian.PutUint16(b, h) }

// setBits writes the low n bits of v into b at bit offset off (bit 0 = least significant bit
// of b[0]).
func setBits(b []byte, off, n int, v uint) {
	for i := range n {
		bit := off + i
		if v>>i&1 != 0 {
			b[bit/8] |= 1 << (bit % 8)
		} else {
			b[bit/8] &^= 1 << (bit % 8)
		}
	}
}

func q8Block(r *rand.Rand) testBlock {
	dh, d := randHalf(r, 0.05)
	var q [32]int8
	for i := range q {
		q[i] = int8(r.IntN(256) - 128)
	}
	want := make([]float64, 32)
	for i := range want {
		want[i] = d * float64(q[i])
	}
	return testBlock{"Q8_0", Q8_0, func() []byte {
		b := make([]byte, 34)
		putHalf(b, dh)
		for i := range q {
			b[2+i] = byte(q[i])
		}
		return b
	}, want}
}

func q4Block(r *rand.Rand) testBlock {
	dh, d := randHalf(r, 0.2)
	var q [32]uint
	for i := range q {
		q[i] = uint(r.IntN(16))
	}
	want := make([]float64, 32)
	for i := range want {
		want[i] = d * (float64(q[i]) - 8)
	}
	return testBlock{"Q4_0", Q4_0, func() []byte {
		b := make([]byte, 18)
		putHalf(b, dh)
		// Element i < 16 is the low nibble of byte i; element i ≥ 16 the high nibble of
		// byte i−16.
		for i, v := range q {
			setBits(b[2:], 8*(i%16)+4*(i/16), 4, v)
		}
		return b
	}, want}
}

func q4KBlock(r *rand.Rand) testBlock {
	dh, d := randHalf(r, 0.01)
	mh, dmin := randHalf(r, 0.01)
	var sc, mn [8]uint
	for i := range 8 {
		sc[i], mn[i] = uint(r.IntN(64)), uint(r.IntN(64))
	}
	var q [256]uint
	for i := range q {
		q[i] = uint(r.IntN(16))
	}
	want := make([]float64, 256)
	for i := range want {
		s := i / 32
		want[i] = d*float64(sc[s])*float64(q[i]) - dmin*float64(mn[s])
	}
	return testBlock{"Q4_K", Q4_K, func() []byte {
		b := make([]byte, 144)
		putHalf(b, dh)
		putHalf(b[2:], mh)
		s := b[4:16]
		for j := range 8 {
			if j < 4 {
				setBits(s, 8*j, 6, sc[j])
				setBits(s, 8*(j+4), 6, mn[j])
				continue
			}
			setBits(s, 8*(j+4), 4, sc[j]&15)
			setBits(s, 8*(j+4)+4, 4, mn[j]&15)
			setBits(s, 8*(j-4)+6, 2, sc[j]>>4)
			setBits(s, 8*j+6, 2, mn[j]>>4)
		}
		// Element i: group g = i/64 owns bytes 32g…32g+31; position i%32 within its
		// sub-block; odd sub-blocks use the high nibble.
		for i, v := range q {
			g, sub, l := i/64, i/32, i%32
			setBits(b[16:], 8*(32*g+l)+4*(sub%2), 4, v)
		}
		return b
	}, want}
}

func q6KBlock(r *rand.Rand) testBlock {
	dh, d := randHalf(r, 0.01)
	var sc [16]int8
	for i := range sc {
		sc[i] = int8(r.IntN(256) - 128)
	}
	var q [256]uint
	for i := range q {
		q[i] = uint(r.IntN(64))
	}
	want := make([]float64, 256)
	for i := range want {
		want[i] = d * float64(sc[i/16]) * (float64(q[i]) - 32)
	}
	return testBlock{"Q6_K", Q6_K, func() []byte {
		b := make([]byte, 210)
		ql, qh, scales := b[0:128], b[128:192], b[192:208]
		for i, v := range sc {
			scales[i] = byte(v)
		}
		putHalf(b[208:], dh)
		// Element i: half h = i/128; quarter k = (i%128)/32; l = i%32. Low 4 bits go to
		// ql[64h + l + 32(k%2)], low nibble for k < 2, high nibble otherwise; high 2 bits to
		// qh[32h + l] at bit 2k.
		for i, v := range q {
			h, k, l := i/128, i%128/32, i%32
			setBits(ql, 8*(64*h+l+32*(k%2))+4*(k/2), 4, v&15)
			setBits(qh, 8*(32*h+l)+2*k, 2, v>>4)
		}
		return b
	}, want}
}

func floatBlocks(r *rand.Rand) []testBlock {
	vals := make([]float64, 40)
	for i := range vals {
		vals[i] = float64(float32(r.NormFloat64() * 3))
	}
	f32 := testBlock{"F32", F32, func() []byte {
		b := make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
		}
		return b
	}, vals}
	hs := make([]uint16, len(vals))
	hw := make([]float64, len(vals))
	bs := make([]uint16, len(vals))
	bw := make([]float64, len(vals))
	for i, v := range vals {
		hs[i] = Float32ToHalf(float32(v))
		hw[i] = halfValue(hs[i])
		// bfloat16: the top 16 bits of a float32; the value keeps sign, exponent and 7
		// mantissa bits.
		bs[i] = uint16(math.Float32bits(float32(v)) >> 16)
		bw[i] = float64(math.Float32frombits(uint32(bs[i]) << 16))
	}
	enc16 := func(v []uint16) func() []byte {
		return func() []byte {
			b := make([]byte, 2*len(v))
			for i, x := range v {
				binary.LittleEndian.PutUint16(b[2*i:], x)
			}
			return b
		}
	}
	return []testBlock{f32, {"F16", F16, enc16(hs), hw}, {"BF16", BF16, enc16(bs), bw}}
}

func TestDequantize(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	blocks := floatBlocks(r)
	for range 4 {
		blocks = append(blocks, q8Block(r), q4Block(r), q4KBlock(r), q6KBlock(r))
	}
	for _, tb := range blocks {
		t.Run(tb.name, func(t *testing.T) {
			src := tb.encode()
			dst := make([]float32, len(tb.want))
			if err := Dequantize(tb.typ, src, dst); err != nil {
				t.Fatal(err)
			}
			for i, w := range tb.want {
				if diff := math.Abs(float64(dst[i]) - w); diff > 1e-6*math.Max(1, math.Abs(w)) {
					t.Fatalf("element %d: got %v, want %v", i, dst[i], w)
				}
			}
		})
	}
}

func TestDequantizeMultipleBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	a, b := q6KBlock(r), q6KBlock(r)
	src := append(a.encode(), b.encode()...)
	dst := make([]float32, 512)
	if err := Dequantize(Q6_K, src, dst); err != nil {
		t.Fatal(err)
	}
	want := append(a.want, b.want...)
	for i := range want {
		if math.Abs(float64(dst[i])-want[i]) > 1e-6*math.Max(1, math.Abs(want[i])) {
			t.Fatalf("element %d: got %v, want %v", i, dst[i], want[i])
		}
	}
}

func TestDequantizeErrors(t *testing.T) {
	tests := []struct {
		name string
		typ  Type
		src  int
		dst  int
	}{
		{"unsupported type", IQ2_XXS, 66, 256},
		{"unknown type", Type(99), 4, 1},
		{"partial block", Q8_0, 34, 31},
		{"short source", Q8_0, 33, 32},
		{"long source", F32, 12, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Dequantize(tc.typ, make([]byte, tc.src), make([]float32, tc.dst))
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
		})
	}
}
