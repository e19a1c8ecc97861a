package accounting

import (
	"strings"
	"testing"
	"time"

	"modelgate/auth"
	"modelgate/billing"
	"modelgate/config"
	"modelgate/reqlog"
)

// An entry keeps what charging the call after a kill needs: the record's fields (its model
// capped as logged) and, when the call holds spend, the scopes of its hold.
func TestJournalEntry(t *testing.T) {
	p := &auth.Principal{Team: "search", ScopeID: "key:search/app", TeamScopeID: "team:search",
		EndUserLimits: config.EndUserLimits{SpendPerDay: 1}}
	rec := &reqlog.Record{RequestID: "req_1", Route: "/v1/responses", Team: "search", Key: "app",
		Model: strings.Repeat("m", 300), EndUser: "u1", InputReserved: 42, Start: time.UnixMilli(1_700_000_000_000)}
	for _, tc := range []struct {
		name   string
		hold   *billing.Hold
		scopes string
		endUsr string
	}{
		{"no_hold", nil, "", ""},
		{"hold", &billing.Hold{}, "key:search/app,team:search", "enduser:search/u1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := JournalEntry(rec, tc.hold, p, nil, 128)
			if e.RequestID != "req_1" || e.Route != "/v1/responses" || len(e.Model) != 128 || e.InputReserved != 42 || e.StartedMs != 1_700_000_000_000 || e.EndUser != "u1" {
				t.Fatalf("entry %+v", e)
			}
			if got := strings.Join(e.SpendScopes, ","); got != tc.scopes || e.EndUserSpend != tc.endUsr {
				t.Errorf("spend scopes %q and %q, want %q and %q", got, e.EndUserSpend, tc.scopes, tc.endUsr)
			}
		})
	}
}
