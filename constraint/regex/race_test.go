//go:build race

package regex

// raceEnabled reports whether the tests run under the race detector, which makes the word
// lists' checks through the Earley matcher about ten times slower.
const raceEnabled = true
