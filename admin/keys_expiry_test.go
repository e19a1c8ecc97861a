package admin_test

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/admin"
)

// The expires_at bound is a calendar date: the issue instant 100 years on, as docs/admin.md
// says. It was 100 × 365 days, which refused keys dated up to 25 days before that date.
func TestMaxKeyExpiryIsTheDateDocsGive(t *testing.T) {
	tests := []struct{ now, want string }{
		{"2026-12-06T08:00:00Z", "2126-12-06T08:00:00Z"},
		{"2028-02-29T23:59:59Z", "2128-02-29T23:59:59Z"}, // 2128 is a leap year
		{"2096-02-29T00:00:00Z", "2196-02-29T00:00:00Z"},
		{"2099-02-28T12:00:00+05:00", "2199-02-28T07:00:00Z"}, // UTC, whatever zone the clock reads in
	}
	for _, tt := range tests {
		now, _ := time.Parse(time.RFC3339, tt.now)
		if got := admin.MaxKeyExpiry(now).Format(time.RFC3339); got != tt.want {
			t.Errorf("MaxKeyExpiry(%s) = %s, want %s", tt.now, got, tt.want)
		}
	}
	doc, err := os.ReadFile("../docs/admin.md")
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(string(doc)), " ")
	if want := "at most 100 calendar years away"; !strings.Contains(flat, want) {
		t.Errorf("docs/admin.md does not say %q", want)
	}
}

// Over the API: the bound itself is accepted, a second past it is refused with the date named.
func TestIssuedKeyExpiryBound(t *testing.T) {
	issued := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	r := startReplica(t, envOptions{now: func() time.Time { return issued }})
	for _, tt := range []struct {
		name, at string
		status   int
	}{
		{"old_365_day_bound_plus_a_day", "2126-11-13T08:00:00Z", http.StatusCreated},
		{"the_date_100_years_on", "2126-12-06T08:00:00Z", http.StatusCreated},
		{"a_second_past_it", "2126-12-06T08:00:01Z", http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, _, b := r.do(t, "POST", "/admin/keys", adminKey, map[string]any{"team": "alpha", "name": tt.name, "expires_at": tt.at})
			if status != tt.status {
				t.Fatalf("expires_at %s: %d %s, want %d", tt.at, status, b, tt.status)
			}
			if status == http.StatusBadRequest {
				e := gjson.GetBytes(b, "error")
				if e.Get("code").Str != "invalid_expiry" || !strings.Contains(e.Get("message").Str, "2126-12-06T08:00:00Z") {
					t.Errorf("refusal %s, want invalid_expiry naming 2126-12-06T08:00:00Z", b)
				}
			}
		})
	}
}
