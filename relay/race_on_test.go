//go:build race

package relay

// raceEnabled: under the race detector sync.Pool drops a share of what is put back on
// purpose, so allocation counts that rely on pooling do not hold.
const raceEnabled = true
