package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelgate/apitest"
)

// keyEventLog records what the API tells its KeyEvents.
type keyEventLog struct{ apitest.Notes }

func (l *keyEventLog) KeyIssued(_ context.Context, id, team, name string, exp *time.Time) {
	e := "issued " + team + "/" + name
	if exp != nil {
		e += " expiring " + exp.UTC().Format(time.RFC3339)
	}
	l.Note(e)
}

func (l *keyEventLog) KeyRevoked(_ context.Context, id, team, name string) {
	l.Note("revoked " + team + "/" + name)
}

// Every key issued or revoked through the API is told once, after the store has it; refused
// requests and config keys are not.
func TestKeyEventsAreTold(t *testing.T) {
	events := &keyEventLog{}
	r := startReplica(t, envOptions{keyEvents: events})
	exp := r.now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	id, _ := r.issue(t, "alpha", "bot", map[string]any{"expires_at": exp.Format(time.RFC3339)})
	r.issue(t, "beta", "plain", nil)
	if status, _, _ := r.do(t, "POST", "/admin/keys", adminKey, map[string]any{"team": "alpha", "name": "bot"}); status != http.StatusConflict {
		t.Fatalf("a second key of one name: %d", status)
	}
	if status, _, _ := r.do(t, "DELETE", "/admin/keys/config:alpha:alpha-cfg", adminKey, nil); status != http.StatusConflict {
		t.Fatalf("revoking a config key: %d, want 409", status)
	}
	if status, _, _ := r.do(t, "DELETE", "/admin/keys/"+id, adminKey, nil); status != http.StatusOK {
		t.Fatalf("revoke: %d", status)
	}
	if status, _, _ := r.do(t, "DELETE", "/admin/keys/"+id, adminKey, nil); status != http.StatusNotFound {
		t.Fatalf("revoke twice: %d", status)
	}
	want := "issued alpha/bot expiring " + exp.Format(time.RFC3339) + "; issued beta/plain; revoked alpha/bot"
	if got := strings.Join(events.Got(), "; "); got != want {
		t.Fatalf("told %q\nwant %q", got, want)
	}
}
