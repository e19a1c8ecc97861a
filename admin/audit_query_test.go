package admin

import (
	"net/url"
	"testing"

	"modelgate/audit"
)

// FuzzAuditQuery: any query string is a page size from 1 to MaxPage and a cursor that
// parses, or a refusal naming the parameter.
func FuzzAuditQuery(f *testing.F) {
	for _, s := range []string{"", "limit=10", "limit=0", "limit=501", "limit=-1", "limit=1e2", "before=aud_0000000000000012",
		"before=aud_12", "limit=5&before=aud_0000000000000001&limit=x", "before=%00", "limit=%2B5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		limit, before, bad := auditQuery(q)
		if bad != nil {
			if bad.param != "limit" && bad.param != "before" {
				t.Fatalf("%q refused naming %q", raw, bad.param)
			}
			return
		}
		if limit < 1 || limit > audit.MaxPage {
			t.Fatalf("%q: limit %d", raw, limit)
		}
		if before != "" {
			if _, err := audit.ParseID(before); err != nil {
				t.Fatalf("%q: cursor %q accepted", raw, before)
			}
		}
	})
}
