//go:build race

package tests

// raceEnabled builds the binary under test with the race detector when the tests run with it.
const raceEnabled = true
