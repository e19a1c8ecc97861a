package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

const teamsUsage = `usage: modelgate teams list
       modelgate teams create --name N [--model ID ...] [--limit name=value ...] [--end-user-limit name=value ...]
       modelgate teams update NAME [--model ID ... | --all-models] [--limit name=value ...] [--end-user-limit name=value ...]
       modelgate teams delete NAME
--limit takes the config's names (requests_per_minute, tokens_per_minute, concurrent_requests,
tokens_per_day, spend_per_day, spend_per_month, on_budget_exceeded=refuse|clamp); in update,
name= (no value) removes that limit. Teams of the config file are listed but changed there.
every subcommand takes --url (default http://127.0.0.1:8080) and --json; the admin key is
read from $MODELGATE_ADMIN_KEY; modelgate teams SUBCOMMAND --help lists its flags`

// teamsCommand lists, creates, updates and deletes teams through a running modelgate's admin
// API, as keysCommand does keys.
func teamsCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintln(stdout, teamsUsage)
		return 0
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, teamsUsage)
		return 2
	}
	sub := args[0]
	fs := pflag.NewFlagSet("modelgate teams "+sub, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(stdout, "%s\n\nflags of teams %s:\n%s", teamsUsage, sub, fs.FlagUsages()) }
	base := fs.String("url", "http://127.0.0.1:8080", "modelgate's base URL")
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
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
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "modelgate teams %s: %v (see modelgate teams --help)\n", sub, err)
		return 2
	}
	var method, path string
	var body map[string]any
	switch sub {
	case "list":
		method, path = "GET", "/admin/teams"
	case "create", "update":
		var problem string
		if body, problem = teamBody(*limits, *endUser, *models, sub == "update"); problem != "" {
			fmt.Fprintf(stderr, "modelgate teams %s: %s\n", sub, problem)
			return 2
		}
		if sub == "create" {
			body["name"] = *name
			method, path = "POST", "/admin/teams"
			break
		}
		if fs.NArg() != 1 {
			fmt.Fprintln(stderr, "modelgate teams update: give exactly one team name")
			return 2
		}
		if *allModels {
			if len(*models) > 0 {
				fmt.Fprintln(stderr, "modelgate teams update: give --model or --all-models, not both")
				return 2
			}
			body["models"] = nil
		}
		method, path = "PATCH", "/admin/teams/"+url.PathEscape(fs.Arg(0))
	case "delete":
		if fs.NArg() != 1 {
			fmt.Fprintln(stderr, "modelgate teams delete: give exactly one team name")
			return 2
		}
		method, path = "DELETE", "/admin/teams/"+url.PathEscape(fs.Arg(0))
	default:
		fmt.Fprintln(stderr, teamsUsage)
		return 2
	}
	adminKey := os.Getenv(adminKeyEnv)
	if adminKey == "" {
		fmt.Fprintf(stderr, "modelgate teams: set %s to an admin key\n", adminKeyEnv)
		return 2
	}
	var payload any
	if body != nil {
		payload = body
	}
	status, answer, err := newAdminClient(*base, adminKey).do(method, path, payload)
	if err != nil {
		fmt.Fprintln(stderr, "modelgate teams:", err)
		return 1
	}
	if status/100 != 2 {
		fmt.Fprintf(stderr, "modelgate teams %s: %d %s\n", sub, status, apiMessage(answer))
		return 1
	}
	if *asJSON {
		_, _ = stdout.Write(answer)
		return 0
	}
	return printTeams(sub, answer, stdout, stderr)
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
