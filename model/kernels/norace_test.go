//go:build !race

package kernels

// raceEnabled reports whether the tests run under the race detector, which makes sync.Pool
// drop a quarter of the values put back, at random.
const raceEnabled = false
