package ratelimit

import (
	"strings"
	"testing"
)

// FuzzOwnerRecord: whatever a stored owner record holds, decoding does not fail, and a record
// written by encode reads back as written (team names cannot hold a NUL; config forbids it).
func FuzzOwnerRecord(f *testing.F) {
	f.Add("search", "0a1b2c3d")
	f.Add("vision", "")
	f.Add("", "")
	f.Add("a\x00b", "c")
	f.Fuzz(func(t *testing.T, team, fp string) {
		_ = decodeOwner(team + fp)
		if strings.Contains(team, "\x00") || strings.Contains(fp, "\x00") {
			return
		}
		o := AssetOwner{Team: team, KeyFingerprint: fp}
		if got := decodeOwner(o.encode()); got != o {
			t.Fatalf("round trip of %+v gave %+v", o, got)
		}
	})
}
