package apitest

import (
	"strings"
	"testing"
)

const childTestEnv = "MODELGATE_APITEST_CHILD"

// The child's body runs only in the child, and what it prints comes back to the parent.
func TestRunInChild(t *testing.T) {
	inChild, out, err := RunInChild(t, childTestEnv)
	if inChild {
		t.Log("hello from the child")
		return
	}
	if err != nil {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "hello from the child") || !strings.Contains(string(out), "PASS") {
		t.Errorf("child output:\n%s", out)
	}
}
