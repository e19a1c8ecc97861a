package journal

import (
	"encoding/json"
	"errors"

	"modelgate/ratelimit"
)

// Entry is one admitted call as the journal keeps it: everything its settlement needs to
// charge the documented upper bound (its reservation) if the process dies before it settles.
// Every string in it is already bounded where it was set (ids modelgate made, configured
// names, labels the attribution bounded).
type Entry struct {
	RequestID     string `json:"rid"`
	Route         string `json:"route"`
	Team          string `json:"team,omitempty"`
	Key           string `json:"key,omitempty"`
	Model         string `json:"model"`
	UpstreamModel string `json:"upstream_model,omitempty"`
	Stream        bool   `json:"stream,omitempty"`
	EndUser       string `json:"end_user,omitempty"`
	Tags          string `json:"tags,omitempty"`
	InputReserved int64  `json:"input_reserved,omitempty"`
	// SpendScopes are the spend ledger scopes the call's hold was taken against (its key, its
	// team, its end user): the cost of its reservation is charged to them.
	SpendScopes []string `json:"spend,omitempty"`
	// EndUserSpend is the end user's daily spend scope when its team limits an end user's
	// spend_per_day: charged for the day alone, as the hold was (no monthly total is kept).
	EndUserSpend string `json:"end_user_spend,omitempty"`
	// StartedMs is when the call was admitted, in Unix milliseconds.
	StartedMs int64                 `json:"started_ms"`
	Ticket    ratelimit.TicketState `json:"ticket"`
}

// maxEntryBytes bounds what Decode reads: an entry is a few hundred bytes; anything much
// larger was not written by modelgate.
const maxEntryBytes = 64 << 10

// maxSpendScopes is how many ledger scopes a call holds at most (key, team, end user).
const maxSpendScopes = 3

// encode is appendJSON into a buffer of its own (tests; Admit appends to a pooled one).
func (e *Entry) encode() ([]byte, error) { return e.appendJSON(nil), nil }

// Decode reads an entry written by encode. It refuses what modelgate could not have written:
// too large, not the shape, or a ticket without scopes.
func Decode(b []byte) (Entry, error) {
	var e Entry
	if len(b) > maxEntryBytes {
		return e, errors.New("journal: entry too large")
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, err
	}
	if n := len(e.Ticket.Scopes); n == 0 || n > 3 {
		return Entry{}, errors.New("journal: entry's ticket names no scope or too many")
	}
	if len(e.SpendScopes) > maxSpendScopes {
		return Entry{}, errors.New("journal: entry names too many spend scopes")
	}
	if e.Ticket.Tokens < 0 || e.Ticket.Input < 0 || e.InputReserved < 0 {
		return Entry{}, errors.New("journal: entry holds a negative reservation")
	}
	return e, nil
}
