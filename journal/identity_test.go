package journal

import (
	"path/filepath"
	"testing"

	"modelgate/apitest"
)

// TestReplicaIDStable: the id is created on first start, read back by the next, and differs
// between data paths; a file that does not hold an id is refused, not replaced.
func TestReplicaIDStable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first, err := ReplicaID(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ReplicaID(dir)
	if err != nil || again != first {
		t.Fatalf("second start: %q, %v; want %q", again, err, first)
	}
	other, err := ReplicaID(t.TempDir())
	if err != nil || other == first {
		t.Fatalf("another data path: %q, %v", other, err)
	}
	apitest.WriteFile(t, filepath.Join(dir, IdentityFile), []byte("not an id"))
	if _, err := ReplicaID(dir); err == nil {
		t.Fatal("a damaged identity file was accepted")
	}
	if a, b := mustID(t, ""), mustID(t, ""); a == b {
		t.Error("two processes without a data path share an id")
	}
}

func mustID(t *testing.T, dir string) string {
	t.Helper()
	id, err := ReplicaID(dir)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestParseID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"0123456789abcdef\n", "0123456789abcdef", true},
		{"  deadbeef  ", "deadbeef", true},
		{"deadbee", "", false},
		{"DEADBEEF", "", false},
		{"dead/beef", "", false},
		{"", "", false},
		{string(make([]byte, 65)), "", false},
	} {
		got, err := ParseID(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseID(%q) = %q, %v", tc.in, got, err)
		}
	}
}
