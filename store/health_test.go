package store

import (
	"errors"
	"testing"
)

// TestWriteHealth: failures are counted per writer, a writer is failing from a failed write
// until one succeeds, and the reason names the failing writers only.
func TestWriteHealth(t *testing.T) {
	h := &WriteHealth{}
	boom := errors.New("disk full at /secret/path")
	steps := []struct {
		w        Writer
		err      error
		degraded string
	}{
		{WriterLedger, nil, ""},
		{WriterResponses, boom, "the record store cannot write: responses"},
		{WriterLedger, boom, "the record store cannot write: responses, ledger"},
		{WriterResponses, boom, "the record store cannot write: responses, ledger"},
		{WriterResponses, nil, "the record store cannot write: ledger"},
		{Writer("unknown"), boom, "the record store cannot write: ledger"},
		{WriterLedger, nil, ""},
	}
	for i, s := range steps {
		h.Wrote(s.w, s.err)
		if got := h.Degraded(); got != s.degraded {
			t.Errorf("step %d: Degraded() = %q, want %q", i, got, s.degraded)
		}
	}
	got := map[Writer]uint64{}
	h.Failures(func(w Writer, n uint64) { got[w] = n })
	want := map[Writer]uint64{WriterResponses: 2, WriterLedger: 1, WriterUsage: 0}
	if len(got) != len(want) {
		t.Fatalf("Failures listed %v, want %v", got, want)
	}
	for w, n := range want {
		if got[w] != n {
			t.Errorf("failures of %s = %d, want %d", w, got[w], n)
		}
	}
	var none *WriteHealth // a nil one ignores what it is told
	none.Wrote(WriterLedger, boom)
	if none.Degraded() != "" {
		t.Error("a nil WriteHealth is degraded")
	}
}
