package apitest

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
)

// Canary is a fresh platform key shaped like a real one: a test hands it to the simulated
// platform and then checks that it never shows up in a log line, a header or a body.
func Canary(t testing.TB) string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "sk-CANARY-" + hex.EncodeToString(b[:])
}
