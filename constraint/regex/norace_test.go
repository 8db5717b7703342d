//go:build !race

package regex

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = false
