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

// A subtest's child runs that subtest alone: each level of its name is matched whole, so a
// sibling whose name starts with the same letters is not run beside it.
func TestExactRunPattern(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"TestX", "^TestX$"},
		{"TestX/h2", "^TestX$/^h2$"},
		{"TestX/h2/chat", "^TestX$/^h2$/^chat$"},
		{"TestX/a.b+c", `^TestX$/^a\.b\+c$`},
	} {
		if got := exactRunPattern(c.name); got != c.want {
			t.Errorf("exactRunPattern(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}
