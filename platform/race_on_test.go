//go:build race

package platform

// raceEnabled: the race detector instruments every function, which grows frames, so stack
// budgets are checked without it.
const raceEnabled = true
