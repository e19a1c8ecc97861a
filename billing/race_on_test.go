//go:build race

package billing

// raceEnabled: the race detector makes the store's writes several times slower, so bounds
// on wall time measured without it do not hold.
const raceEnabled = true
