package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// adminKeyEnv names the environment variable the keys command reads the admin key from: a
// flag would leave it in shell history and in the process list.
const adminKeyEnv = "MODELGATE_ADMIN_KEY"

const keysUsage = `usage: modelgate keys create --team T --name N [--expires-at RFC3339] [--limit name=value ...] [--model ID ...]
       modelgate keys list [--team T]
       modelgate keys revoke ID
every subcommand takes --url (default http://127.0.0.1:8080) and --json; the admin key is
read from $MODELGATE_ADMIN_KEY; modelgate keys SUBCOMMAND --help lists its flags`

// keysCommand issues, lists and revokes keys through a running modelgate's admin API.
func keysCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintln(stdout, keysUsage)
		return 0
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, keysUsage)
		return 2
	}
	sub := args[0]
	fs := pflag.NewFlagSet("modelgate keys "+sub, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(stdout, "%s\n\nflags of keys %s:\n%s", keysUsage, sub, fs.FlagUsages()) }
	base := fs.String("url", "http://127.0.0.1:8080", "modelgate's base URL")
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	team := fs.String("team", "", "team name")
	var name, expires *string
	var limits, models *[]string
	if sub == "create" {
		name = fs.String("name", "", "key name (unique in the team)")
		expires = fs.String("expires-at", "", "expiry as RFC 3339, e.g. 2026-12-31T00:00:00Z (default: never)")
		limits = fs.StringArray("limit", nil, "a limit as name=value, e.g. requests_per_minute=60 or spend_per_day=5; repeatable")
		models = fs.StringArray("model", nil, "a model the key may use, one of its team's; repeatable (default: the team's models)")
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "modelgate keys %s: %v (see modelgate keys --help)\n", sub, err)
		return 2
	}
	adminKey := os.Getenv(adminKeyEnv)
	if adminKey == "" {
		fmt.Fprintf(stderr, "modelgate keys: set %s to an admin key\n", adminKeyEnv)
		return 2
	}
	c := newAdminClient(*base, adminKey)

	var status int
	var body []byte
	var err error
	switch sub {
	case "create":
		req := map[string]any{"team": *team, "name": *name}
		if *expires != "" {
			t, perr := time.Parse(time.RFC3339, *expires)
			if perr != nil {
				fmt.Fprintln(stderr, "modelgate keys create: --expires-at: want RFC 3339, e.g. 2026-12-31T00:00:00Z")
				return 2
			}
			req["expires_at"] = t
		}
		if len(*limits) > 0 {
			lim := map[string]float64{}
			for _, l := range *limits {
				k, v, ok := strings.Cut(l, "=")
				f, perr := strconv.ParseFloat(v, 64)
				if !ok || perr != nil {
					fmt.Fprintf(stderr, "modelgate keys create: --limit %q: want name=number\n", l)
					return 2
				}
				lim[k] = f
			}
			req["limits"] = lim
		}
		if len(*models) > 0 {
			req["models"] = *models
		}
		status, body, err = c.do("POST", "/admin/keys", req)
	case "list":
		path := "/admin/keys"
		if *team != "" {
			path += "?team=" + url.QueryEscape(*team)
		}
		status, body, err = c.do("GET", path, nil)
	case "revoke":
		if fs.NArg() != 1 {
			fmt.Fprintln(stderr, "modelgate keys revoke: give exactly one key id")
			return 2
		}
		status, body, err = c.do("DELETE", "/admin/keys/"+url.PathEscape(fs.Arg(0)), nil)
	default:
		fmt.Fprintln(stderr, keysUsage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "modelgate keys:", err)
		return 1
	}
	if status/100 != 2 {
		fmt.Fprintf(stderr, "modelgate keys %s: %d %s\n", sub, status, apiMessage(body))
		return 1
	}
	if *asJSON {
		_, _ = stdout.Write(body)
		return 0
	}
	return printKeys(sub, body, stdout, stderr)
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// newAdminClient talks to the admin API at base with the admin key (the keys and teams
// commands).
func newAdminClient(base, adminKey string) *adminClient {
	return &adminClient{base: strings.TrimRight(base, "/"), key: adminKey, http: &http.Client{Timeout: 30 * time.Second,
		// The admin key goes to --url and nowhere else: Go's client would carry the
		// Authorization header along a redirect to another port or scheme of the same host.
		// modelgate never redirects its admin API, so a redirect is reported, not followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// apiMessage is the message of an admin API error answer ("" when it has none).
func apiMessage(body []byte) string {
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Message
}

type adminClient struct {
	base, key string
	http      *http.Client
}

func (c *adminClient) do(method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 3 {
		return 0, nil, fmt.Errorf("%s answered %d with a redirect to %q, not followed: give the admin API's own address in --url",
			c.base, resp.StatusCode, resp.Header.Get("Location"))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b, err
}
