package apitest

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// RunInChild runs the calling test (a top-level test or a subtest) again, alone, in a child
// process of the same test binary with envVar set, for checks that may kill the process (a stack overflow
// under debug.SetMaxStack) and must fail the test instead of the suite. In the child it
// returns inChild true and the test goes on with its body; in the parent it returns the
// child's combined output and its exit error, and the test returns after judging them.
func RunInChild(t testing.TB, envVar string) (inChild bool, out []byte, err error) {
	t.Helper()
	if os.Getenv(envVar) != "" {
		return true, nil, nil
	}
	cmd := exec.Command(os.Args[0], "-test.run="+exactRunPattern(t.Name()), "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envVar+"=1")
	out, err = cmd.CombinedOutput()
	return false, out, err
}

// exactRunPattern is a -test.run pattern that selects the test named name and no other:
// each level of a subtest's name matched whole, so "h2" does not select "h2c" beside it.
func exactRunPattern(name string) string {
	levels := strings.Split(name, "/")
	for i, l := range levels {
		levels[i] = "^" + regexp.QuoteMeta(l) + "$"
	}
	return strings.Join(levels, "/")
}
