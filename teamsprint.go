package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"modelgate/admin"
)

// teamLimits are a team's limits as the admin API lists them: a key's, and what a call
// that does not fit a budget gets.
type teamLimits struct {
	keyLimits
	OnBudgetExceeded string `json:"on_budget_exceeded"`
}

// String writes the limits as teams create's --limit takes them; "-" for none.
func (l teamLimits) String() string {
	s := l.keyLimits.String()
	if l.OnBudgetExceeded == "" {
		return s
	}
	if s == "-" {
		s = ""
	} else {
		s += ","
	}
	return s + "on_budget_exceeded=" + l.OnBudgetExceeded
}

// endUserLimits are the limits of each end user of a team.
type endUserLimits admin.EndUserLimits

// String writes the limits as --end-user-limit takes them; "-" for none.
func (l endUserLimits) String() string {
	parts := admin.EndUserLimits(l).Pairs(money)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// teamListed is a team as GET /admin/teams lists it and POST and PATCH answer.
type teamListed struct {
	Name          string        `json:"name"`
	Source        string        `json:"source"`
	Models        []string      `json:"models"`
	Keys          int           `json:"keys"`
	Limits        teamLimits    `json:"limits"`
	EndUserLimits endUserLimits `json:"end_user_limits"`
	Usage         struct {
		SpendDay   float64 `json:"spend_day"`
		SpendMonth float64 `json:"spend_month"`
	} `json:"usage"`
}

func (t teamListed) models() string {
	if len(t.Models) == 0 {
		return "(all)"
	}
	return strings.Join(t.Models, ",")
}

func printTeams(sub string, body []byte, stdout, stderr io.Writer) int {
	unexpected := func() int {
		fmt.Fprintln(stderr, "modelgate teams: unexpected answer")
		return 1
	}
	switch sub {
	case "list":
		var l struct{ Teams []teamListed }
		if err := json.Unmarshal(body, &l); err != nil {
			return unexpected()
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSOURCE\tMODELS\tLIMITS\tEND USER LIMITS\tKEYS\tSPEND TODAY\tSPEND THIS MONTH")
		for _, t := range l.Teams {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", t.Name, t.Source, t.models(), t.Limits, t.EndUserLimits, t.Keys,
				spentToday(t.Usage.SpendDay, t.Limits.keyLimits), money(math.Round(t.Usage.SpendMonth*1e6)/1e6))
		}
		tw.Flush()
	case "create", "update":
		var t teamListed
		if err := json.Unmarshal(body, &t); err != nil || t.Name == "" {
			return unexpected()
		}
		verb := map[string]string{"create": "created", "update": "updated"}[sub]
		fmt.Fprintf(stdout, "%s team %s: models %s, limits %s, end user limits %s\n", verb, t.Name, t.models(), t.Limits, t.EndUserLimits)
	case "delete":
		var d struct{ Name string }
		if err := json.Unmarshal(body, &d); err != nil || d.Name == "" {
			return unexpected()
		}
		fmt.Fprintf(stdout, "deleted team %s\n", d.Name)
	}
	return 0
}
