package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"modelgate/admin"
)

// keyLimits are a key's own limits as the admin API lists them; zero is no limit of its own.
type keyLimits admin.Limits

// String writes the limits as keys create's --limit takes them, so a listed key can be
// recreated from what the list shows; "-" for none.
func (l keyLimits) String() string {
	var parts []string
	add := func(name, v string) { parts = append(parts, name+"="+v) }
	for _, f := range []struct {
		name string
		v    int64
	}{{"requests_per_minute", l.RequestsPerMinute}, {"tokens_per_minute", l.TokensPerMinute},
		{"concurrent_requests", l.ConcurrentRequests}, {"tokens_per_day", l.TokensPerDay}} {
		if f.v != 0 {
			add(f.name, strconv.FormatInt(f.v, 10))
		}
	}
	if l.SpendPerDay != 0 {
		add("spend_per_day", money(l.SpendPerDay))
	}
	if l.SpendPerMonth != 0 {
		add("spend_per_month", money(l.SpendPerMonth))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// money writes an amount without float noise (0.30000000000000004) and without zeros after
// its last significant cent fraction: spend is priced per token, so it has more than cents.
func money(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// spentToday is the SPEND TODAY column: the day's spend, and the key's daily budget if any.
// A few calls of a cheap model cost millionths, so six decimals are kept: fewer would show a
// key that has spent as one that has not.
func spentToday(spent float64, l keyLimits) string {
	s := money(math.Round(spent*1e6) / 1e6)
	if l.SpendPerDay != 0 {
		s += " of " + money(l.SpendPerDay)
	}
	return s
}

func printKeys(sub string, body []byte, stdout, stderr io.Writer) int {
	type key struct {
		ID, Team, Name, Source string
		Key                    string     `json:"key"`
		ExpiresAt              *time.Time `json:"expires_at"`
		LastUsedAt             *time.Time `json:"last_used_at"`
		Limits                 keyLimits  `json:"limits"`
		Usage                  *struct {
			DayRequests int64   `json:"day_requests"`
			SpendDay    float64 `json:"spend_day"`
		} `json:"usage"`
		Revoked bool `json:"revoked"`
	}
	var k key
	switch sub {
	case "create":
		if err := json.Unmarshal(body, &k); err != nil {
			fmt.Fprintln(stderr, "modelgate keys: unexpected answer")
			return 1
		}
		fmt.Fprintf(stdout, "id:  %s\nkey: %s\n(the key is shown only once: store it now)\n", k.ID, k.Key)
	case "list":
		var l struct{ Keys []key }
		if err := json.Unmarshal(body, &l); err != nil {
			fmt.Fprintln(stderr, "modelgate keys: unexpected answer")
			return 1
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTEAM\tNAME\tSOURCE\tLIMITS\tREQUESTS TODAY\tSPEND TODAY\tLAST USED\tEXPIRES")
		for _, k := range l.Keys {
			requests, spend := "-", "-"
			if k.Usage != nil { // a modelgate before usage was listed
				requests, spend = strconv.FormatInt(k.Usage.DayRequests, 10), spentToday(k.Usage.SpendDay, k.Limits)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Team, k.Name, k.Source, k.Limits,
				requests, spend, timeOrDash(k.LastUsedAt), timeOrDash(k.ExpiresAt))
		}
		tw.Flush()
	case "revoke":
		if err := json.Unmarshal(body, &k); err != nil || k.ID == "" {
			fmt.Fprintln(stderr, "modelgate keys: unexpected answer")
			return 1
		}
		if k.Team == "" { // a modelgate that answers with the id alone
			fmt.Fprintf(stdout, "revoked key %s\n", k.ID)
			return 0
		}
		fmt.Fprintf(stdout, "revoked key %s (team %s, name %s)\n", k.ID, k.Team, k.Name)
	}
	return 0
}
