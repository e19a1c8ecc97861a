package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// adminKeyEnv names the environment variable the keys command reads the admin key from: a
// flag would leave it in shell history and in the process list.
const adminKeyEnv = "MODELGATE_ADMIN_KEY"

const keysUsage = `usage: modelgate keys create --team T --name N [--expires-at RFC3339] [--limit name=value ...] [--model ID ...]
       modelgate keys list [--team T]
       modelgate keys revoke ID`

// keysCommand issues, lists and revokes keys through a running modelgate's admin API.
func keysCommand(args []string, stdout, stderr io.Writer) int {
	cli, code, done := newAdminCLI("keys", keysUsage, args, stdout, stderr)
	if done {
		return code
	}
	fs := cli.fs
	team := fs.String("team", "", "team name")
	var name, expires *string
	var limits, models *[]string
	if cli.sub == "create" {
		name = fs.String("name", "", "key name (unique in the team)")
		expires = fs.String("expires-at", "", "expiry as RFC 3339, e.g. 2026-12-31T00:00:00Z (default: never)")
		limits = fs.StringArray("limit", nil, "a limit as name=value, e.g. requests_per_minute=60 or spend_per_day=5; repeatable")
		models = fs.StringArray("model", nil, "a model the key may use, one of its team's; repeatable (default: the team's models)")
	}
	if code, done := cli.parse(args[1:]); done {
		return code
	}
	switch cli.sub {
	case "create":
		req := map[string]any{"team": *team, "name": *name}
		if *expires != "" {
			t, perr := time.Parse(time.RFC3339, *expires)
			if perr != nil {
				return cli.misuse("--expires-at: want RFC 3339, e.g. 2026-12-31T00:00:00Z")
			}
			req["expires_at"] = t
		}
		if len(*limits) > 0 {
			lim := map[string]float64{}
			for _, l := range *limits {
				k, v, ok := strings.Cut(l, "=")
				f, perr := strconv.ParseFloat(v, 64)
				if !ok || perr != nil {
					return cli.misuse("--limit %q: want name=number", l)
				}
				lim[k] = f
			}
			req["limits"] = lim
		}
		if len(*models) > 0 {
			req["models"] = *models
		}
		return cli.call("POST", "/admin/keys", req, printKeys)
	case "list":
		path := "/admin/keys"
		if *team != "" {
			path += "?team=" + url.QueryEscape(*team)
		}
		return cli.call("GET", path, nil, printKeys)
	case "revoke":
		if fs.NArg() != 1 {
			return cli.misuse("give exactly one key id")
		}
		return cli.call("DELETE", "/admin/keys/"+url.PathEscape(fs.Arg(0)), nil, printKeys)
	}
	return cli.unknown()
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
