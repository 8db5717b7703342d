//go:build race

package constraint_test

// raceEnabled reports whether the tests run under the race detector, which makes the
// 128k-vocabulary walks about ten times slower.
const raceEnabled = true
