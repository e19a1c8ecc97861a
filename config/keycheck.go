package config

import (
	"crypto/sha256"
	"fmt"
	"regexp"
)

// MinLocalKeyLength is the shortest local key `modelgate check` accepts without a warning:
// 32 characters of a random hex or base64 string carry 128 bits or more, beyond guessing
// even by a caller who may try keys as fast as modelgate answers.
const MinLocalKeyLength = 32

// SimulatePlaceholder is the value --simulate gives an unset ${NAME}, so the example config
// runs on a machine with no secrets.
func SimulatePlaceholder(name string) string { return "sim-" + name }

// placeholderRE matches every value SimulatePlaceholder can make from a variable name.
var placeholderRE = regexp.MustCompile(`^sim-[A-Za-z_][A-Za-z0-9_]*$`)

// KeyWarnings lists weak local keys of a valid config: team and admin keys shorter than
// MinLocalKeyLength, and local keys that are also a platform key, so whoever holds the one
// holds the other. The same key used twice among local keys (two teams, or a team key that
// is also an admin key) is already an error of Validate. Keys given as key_sha256 have no
// length to check. The placeholders of --simulate are exempt: they exist to be replaced.
// A warning names a key by its place in the config, never by its value.
func (c *Config) KeyWarnings() []string {
	platform := map[[32]byte]string{}
	if c.Upstream.APIKey != "" {
		platform[sha256.Sum256([]byte(c.Upstream.APIKey))] = "upstream.api_key"
	}
	for i, t := range c.Teams {
		if t.UpstreamAPIKey != "" {
			platform[sha256.Sum256([]byte(t.UpstreamAPIKey))] = fmt.Sprintf("teams[%d].upstream_api_key", i)
		}
	}
	var out []string
	check := func(where, secret string, digest [32]byte) {
		if placeholderRE.MatchString(secret) {
			return
		}
		if secret != "" && len(secret) < MinLocalKeyLength {
			out = append(out, fmt.Sprintf("%s is %d characters long; use at least %d random characters (e.g. openssl rand -hex 16)",
				where, len(secret), MinLocalKeyLength))
		}
		if p, ok := platform[digest]; ok {
			out = append(out, fmt.Sprintf("%s is the same secret as %s: a local key must not be a platform key", where, p))
		}
	}
	for i, t := range c.Teams {
		for j, k := range t.Keys {
			d, ok := keyDigest(k)
			if !ok {
				continue
			}
			check(fmt.Sprintf("teams[%d].keys[%d] (team %s, key %s)", i, j, t.Name, k.Name), k.Key, d)
		}
	}
	for i, k := range c.AdminKeys {
		check(fmt.Sprintf("admin_keys[%d]", i), k, sha256.Sum256([]byte(k)))
	}
	return out
}
