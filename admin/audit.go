package admin

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"modelgate/audit"
)

// auditPage is the default page of GET /admin/audit.
const auditPage = 50

// auditTimeout bounds the write of one audit entry; it runs after the action succeeded,
// on a context a client hanging up does not cancel.
const auditTimeout = 5 * time.Second

// auditLog answers GET /admin/audit: the log of admin actions, newest first, a page of
// ?limit= entries (default 50, at most 500) older than the entry ?before= names. The answer's
// next_before is the before of the next page; null at the end of the log. The route only
// reads: no route changes or deletes an entry.
func (a *API) auditLog(w http.ResponseWriter, r *http.Request) {
	if a.d.Audit == nil {
		writeError(w, http.StatusServiceUnavailable, "audit_unavailable", "", "This modelgate has no record store, so it keeps no audit log.")
		return
	}
	limit, before, bad := auditQuery(r.URL.Query())
	if bad != nil {
		writeError(w, http.StatusBadRequest, bad.code, bad.param, bad.msg)
		return
	}
	entries, next, err := a.d.Audit.List(r.Context(), before, limit)
	if err != nil {
		a.storeFailed(w, err)
		return
	}
	var nextBefore *string
	if next != "" {
		nextBefore = &next
	}
	writeJSON(w, http.StatusOK, struct {
		Entries    []audit.Entry `json:"entries"`
		NextBefore *string       `json:"next_before"`
	}{entries, nextBefore})
}

// badQuery is a refused query parameter, as writeError takes it.
type badQuery struct{ code, param, msg string }

// auditQuery reads GET /admin/audit's parameters: the page size and the cursor.
func auditQuery(q url.Values) (limit int, before string, bad *badQuery) {
	limit = auditPage
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > audit.MaxPage {
			return 0, "", &badQuery{"invalid_limit", "limit", "limit must be a whole number from 1 to " + strconv.Itoa(audit.MaxPage) + "."}
		}
		limit = n
	}
	before = q.Get("before")
	if before != "" {
		if _, err := audit.ParseID(before); err != nil {
			return 0, "", &badQuery{"invalid_cursor", "before", "before must be an entry id (aud_ and 16 digits), as next_before gives it."}
		}
	}
	return limit, before, nil
}

// audit records an admin action the request r made, named by the fingerprint of its admin
// key. The action has happened by now: a store that fails here is logged, and the answer
// to the action stands.
func (a *API) audit(r *http.Request, action, target string, details map[string]string) {
	a.record(r, audit.Entry{Action: action, Target: target, Details: details})
}

// record is audit for an entry with more than details (a team.updated's changed paths).
func (a *API) record(r *http.Request, e audit.Entry) {
	if a.d.Audit == nil {
		return
	}
	_, authn := a.d.State()
	e.Actor = "admin:" + authn.AdminFingerprint(r.Header.Get("Authorization"))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), auditTimeout)
	defer cancel()
	if _, err := a.d.Audit.Record(ctx, e); err != nil {
		a.d.Logger.Error("audit: entry not recorded", "action", e.Action, "target", e.Target, "actor", e.Actor, "err", err.Error())
	}
}
