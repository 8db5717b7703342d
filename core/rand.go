package core

import (
	crand "crypto/rand"
	"encoding/binary"
	"math/rand/v2"
)

// NewRand returns the random stream of sequence index of a request with the given seed: a PCG
// generator seeded with (seed, mix(index)). The same (seed, index) always yields the same
// stream, whatever else runs in the batch.
func NewRand(seed uint64, index int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, mix(uint64(index))))
}

// DeriveStream returns a further stream for sequence index, for a part with draws of its own
// (XTC's coin, say), identified by purpose. It is independent of the sequence's sampling
// stream and of other purposes.
func DeriveStream(seed uint64, index int, purpose string) *rand.Rand {
	h := uint64(14695981039346656037)
	for i := 0; i < len(purpose); i++ {
		h = (h ^ uint64(purpose[i])) * 1099511628211
	}
	return rand.New(rand.NewPCG(seed^mix(h), mix(uint64(index)^h)))
}

// RandomSeed draws a seed from the operating system's entropy source.
func RandomSeed() uint64 {
	var b [8]byte
	_, _ = crand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return binary.LittleEndian.Uint64(b[:])
}

// mix is SplitMix64's finaliser: it spreads nearby integers over the whole 64-bit range.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
