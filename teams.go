package main

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
)

const teamsUsage = `usage: modelgate teams list
       modelgate teams create --name N [--model ID ...] [--limit name=value ...] [--end-user-limit name=value ...]
       modelgate teams update NAME [--model ID ... | --all-models] [--limit name=value ...] [--end-user-limit name=value ...]
       modelgate teams delete NAME
--limit takes the config's names (requests_per_minute, tokens_per_minute, concurrent_requests,
tokens_per_day, spend_per_day, spend_per_month, on_budget_exceeded=refuse|clamp); in update,
name= (no value) removes that limit. Teams of the config file are listed but changed there.`

// teamsCommand lists, creates, updates and deletes teams through a running modelgate's admin
// API, as keysCommand does keys.
func teamsCommand(args []string, stdout, stderr io.Writer) int {
	cli, code, done := newAdminCLI("teams", teamsUsage, args, stdout, stderr)
	if done {
		return code
	}
	fs, sub := cli.fs, cli.sub
	var name *string
	var limits, endUser, models *[]string
	var allModels *bool
	if sub == "create" || sub == "update" {
		if sub == "create" {
			name = fs.String("name", "", "team name: 1-64 letters, digits, '.', '_' or '-'")
		} else {
			allModels = fs.Bool("all-models", false, "let the team use every model again (drop its list)")
		}
		limits = fs.StringArray("limit", nil, "a team limit as name=value, e.g. spend_per_day=25 or on_budget_exceeded=clamp; repeatable")
		endUser = fs.StringArray("end-user-limit", nil, "a limit of each end user as name=value (requests_per_minute, tokens_per_day, spend_per_day); repeatable")
		models = fs.StringArray("model", nil, "a model the team may use; repeatable (default: every model)")
	}
	if code, done := cli.parse(args[1:]); done {
		return code
	}
	switch sub {
	case "list":
		return cli.call("GET", "/admin/teams", nil, printTeams)
	case "create", "update":
		body, problem := teamBody(*limits, *endUser, *models, sub == "update")
		if problem != "" {
			return cli.misuse("%s", problem)
		}
		if sub == "create" {
			body["name"] = *name
			return cli.call("POST", "/admin/teams", body, printTeams)
		}
		if fs.NArg() != 1 {
			return cli.misuse("give exactly one team name")
		}
		if *allModels {
			if len(*models) > 0 {
				return cli.misuse("give --model or --all-models, not both")
			}
			body["models"] = nil
		}
		return cli.call("PATCH", "/admin/teams/"+url.PathEscape(fs.Arg(0)), body, printTeams)
	case "delete":
		if fs.NArg() != 1 {
			return cli.misuse("give exactly one team name")
		}
		return cli.call("DELETE", "/admin/teams/"+url.PathEscape(fs.Arg(0)), nil, printTeams)
	}
	return cli.unknown()
}

// teamBody builds the JSON body of teams create or update from the flags. In an update,
// "name=" with no value sends null: that limit goes back to none.
func teamBody(limits, endUser, models []string, update bool) (map[string]any, string) {
	body := map[string]any{}
	for _, group := range []struct {
		field, flag string
		pairs       []string
	}{{"limits", "--limit", limits}, {"end_user_limits", "--end-user-limit", endUser}} {
		if len(group.pairs) == 0 {
			continue
		}
		m := map[string]any{}
		for _, pair := range group.pairs {
			k, v, ok := strings.Cut(pair, "=")
			if !ok || k == "" {
				return nil, fmt.Sprintf("%s %q: want name=value", group.flag, pair)
			}
			switch {
			case v == "" && update:
				m[k] = nil
			case k == "on_budget_exceeded":
				m[k] = v
			default:
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return nil, fmt.Sprintf("%s %q: want name=number", group.flag, pair)
				}
				m[k] = f
			}
		}
		body[group.field] = m
	}
	if len(models) > 0 {
		body["models"] = models
	}
	return body, ""
}
