package config

import (
	"net/url"
	"strconv"
	"strings"
)

const (
	// MaxN is the largest translate.max_n accepted: OpenAI's own bound on n.
	MaxN = 128
	// DefaultMaxN is translate.max_n when unset: each choice is a whole upstream call.
	DefaultMaxN = 8
)

// OriginProblem says why s cannot be an entry of server.cors_origins ("" when it can). An
// entry is compared byte for byte with the browser's Origin header, which is always the
// lowercase "scheme://host[:port]" with nothing after it, so anything else would never match
// and is refused rather than silently ignored.
func OriginProblem(s string) string {
	if s == "*" {
		return ""
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "":
		return "want an origin such as https://chat.example.com or http://localhost:5173, or \"*\""
	case u.User != nil || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "an origin is scheme://host[:port] only: no path, query, fragment or user info"
	case s != strings.ToLower(s):
		return "browsers send origins in lowercase; write it so"
	}
	return ""
}

func (v *validator) corsOrigins(origins []string) {
	for i, o := range origins {
		path := "server.cors_origins[" + strconv.Itoa(i) + "]"
		if p := OriginProblem(o); p != "" {
			v.fail(path, "%s, got %q", p, o)
			continue
		}
		if o == "*" && len(origins) > 1 {
			v.fail(path, "\"*\" allows every origin: list it alone")
		}
	}
}

func (v *validator) maxN(n int) {
	if n < 0 || n > MaxN {
		v.fail("translate.max_n", "want 1-%d (0 for the default 8), got %d", MaxN, n)
	}
}

// corsText is the summary's account of server.cors_origins.
func corsText(origins []string) string {
	switch {
	case len(origins) == 0:
		return "no CORS (browser pages on other origins cannot call /v1)"
	case origins[0] == "*":
		return "CORS for every origin"
	}
	return "CORS for " + strings.Join(origins, ", ")
}
