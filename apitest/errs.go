package apitest

import (
	"strings"
	"testing"
)

// ErrWanted checks err against a table case's want: a part of the error it must contain, or
// "" for none. A wrong error (or an unexpected one) fails the test; the result says whether
// an error was wanted, after which the case has nothing more to check.
func ErrWanted(t testing.TB, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want one containing %q", err, want)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}
