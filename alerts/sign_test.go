package alerts

import (
	"errors"
	"testing"
	"time"
)

func TestVerify(t *testing.T) {
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"type":"budget.threshold"}`)
	good := Sign("s1", at, body)
	old := Sign("s0", at, body)
	cases := []struct {
		name, secret, header string
		body                 []byte
		now                  time.Time
		want                 error
	}{
		{"signed now", "s1", good, body, at, nil},
		{"within tolerance", "s1", good, body, at.Add(4 * time.Minute), nil},
		{"two signatures while rotating", "s1", old + ",v1=" + good[len("t=1795000000,v1="):], body, at, nil},
		{"other secret", "s2", good, body, at, ErrBadSignature},
		{"body changed", "s1", good, []byte(`{"type":"key.issued"}`), at, ErrBadSignature},
		{"too old", "s1", good, body, at.Add(6 * time.Minute), ErrStale},
		{"from the future", "s1", good, body, at.Add(-6 * time.Minute), ErrStale},
		{"no timestamp", "s1", "v1=abc", body, at, ErrMalformed},
		{"no signature", "s1", "t=1", body, at, ErrMalformed},
		{"two timestamps", "s1", good + ",t=1", body, at, ErrMalformed},
		{"not key=value", "s1", "garbage", body, at, ErrMalformed},
		{"empty", "s1", "", body, at, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := Verify(c.secret, c.header, c.body, c.now, 5*time.Minute); !errors.Is(err, c.want) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
		})
	}
}

// The header's format is what the docs promise: t=<unix seconds>,v1=<64 hex digits>.
func TestSignFormat(t *testing.T) {
	h := Sign("s", time.Unix(1795000000, 0), []byte("{}"))
	if len(h) != len("t=1795000000,v1=")+64 || h[:16] != "t=1795000000,v1=" {
		t.Fatalf("header %q", h)
	}
}

func FuzzVerify(f *testing.F) {
	at := time.Unix(1795000000, 0)
	f.Add(Sign("s", at, []byte("{}")), []byte("{}"))
	f.Add("t=1,v1=00,v1=zz", []byte("x"))
	f.Add("t=-9223372036854775808,v1=", []byte(""))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		err := Verify("s", header, body, at, 5*time.Minute)
		if err == nil && Sign("s", at, body) != header {
			// A header other than the one Sign makes may verify only by carrying that signature.
			if Verify("s", Sign("s", at, body), body, at, 5*time.Minute) != nil {
				t.Fatal("a fresh signature does not verify")
			}
		}
	})
}
