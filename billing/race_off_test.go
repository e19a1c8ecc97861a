//go:build !race

package billing

const raceEnabled = false
