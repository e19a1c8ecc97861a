// Package alerts tells people about budgets and keys before a 429 does: budget thresholds
// (50%, 80%, 100% of a team's or key's spend_per_day, spend_per_month and tokens_per_day)
// and keys issued, revoked or expired, POSTed as signed JSON events to the webhooks of
// alerts.webhooks.
//
// Nothing here runs on a request. The Watcher compares the shared figures with the budgets
// on a periodic loop and claims each crossing in the record store, so one threshold of one
// period of one scope is announced at most once, whichever replica sees it first and however
// often processes restart. The Sender delivers from a bounded queue with retries; a full
// queue drops, it never waits.
package alerts

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Event is the JSON body of one delivery. Key events name keys by team, name and id, never
// by secret or hash.
type Event struct {
	// ID is stable for one occurrence: a budget crossing's id is derived from its claim, so a
	// receiver that stores ids can drop a delivery it already took.
	ID   string    `json:"id"`
	Type string    `json:"type"` // config.EventBudgetThreshold, EventKeyIssued, ...
	Time time.Time `json:"time"` // when modelgate saw it, UTC

	Scope string `json:"scope,omitempty"` // budget events: "team" or "key"
	Team  string `json:"team"`
	Key   string `json:"key,omitempty"`    // the key's name
	KeyID string `json:"key_id,omitempty"` // key events: the admin API's id of an issued key

	// Budget events.
	Budget    string  `json:"budget,omitempty"`    // BudgetSpendDay, BudgetSpendMonth, BudgetTokensDay
	Period    string  `json:"period,omitempty"`    // "2026-11-26" or "2026-11" (UTC)
	Threshold int     `json:"threshold,omitempty"` // percent: 50, 80 or 100
	Used      float64 `json:"used,omitempty"`      // when the crossing was seen
	Limit     float64 `json:"limit,omitempty"`
	Currency  string  `json:"currency,omitempty"` // spend budgets only
	// Refused: the budget refused a call before its settled use reached the threshold
	// (reservations of calls in flight count against a budget, and a call that could cost
	// more than is left is refused), so the threshold is announced as crossed.
	Refused bool `json:"refused,omitempty"`

	// Key events: the key's expiry, when it has one.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// The budgets a threshold event names, as the config spells them. There is no monthly token
// budget in the config, so none is watched.
const (
	BudgetSpendDay   = "spend_per_day"
	BudgetSpendMonth = "spend_per_month"
	BudgetTokensDay  = "tokens_per_day"
)

// Thresholds are the percentages of a budget that are announced.
var Thresholds = [...]int{50, 80, 100}

// eventID derives an event's id from what makes it unique (a claim key).
func eventID(unique string) string {
	sum := sha256.Sum256([]byte(unique))
	return "evt_" + hex.EncodeToString(sum[:12])
}
