package apitest

import (
	"os"
	"os/exec"
	"testing"
)

// RunInChild runs the calling top-level test again, alone, in a child process of the same
// test binary with envVar set, for checks that may kill the process (a stack overflow
// under debug.SetMaxStack) and must fail the test instead of the suite. In the child it
// returns inChild true and the test goes on with its body; in the parent it returns the
// child's combined output and its exit error, and the test returns after judging them.
func RunInChild(t testing.TB, envVar string) (inChild bool, out []byte, err error) {
	t.Helper()
	if os.Getenv(envVar) != "" {
		return true, nil, nil
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envVar+"=1")
	out, err = cmd.CombinedOutput()
	return false, out, err
}
