package config

import (
	"math"
	"strconv"
	"strings"
)

// ByteSize is a number of bytes written in the config either as a whole number ("268435456")
// or with a binary unit ("256MiB", "512 KiB", "1GiB"). Only binary units are taken: "MB"
// would leave a reader guessing between 10^6 and 2^20, so it is refused rather than read.
type ByteSize int64

// byteUnits are the suffixes parseByteSize takes, longest first so "KiB" is not read as "B".
var byteUnits = [...]struct {
	name  string
	shift uint
}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}, {"B", 0}}

// parseByteSize reads s as a ByteSize: digits, then optional spaces and a unit. A value that
// does not fit in an int64 is refused, never wrapped.
func parseByteSize(s string) (ByteSize, bool) {
	s = strings.TrimSpace(s)
	shift := uint(0)
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(s, u.name); ok {
			s, shift = strings.TrimSpace(rest), u.shift
			break
		}
	}
	if s == "" || s[0] == '+' {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 && shift > 0 || n > math.MaxInt64>>shift {
		return 0, false
	}
	return ByteSize(n << shift), true
}
