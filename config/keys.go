package config

import "fmt"

// TeamPlatformKeys is the pool of platform keys team t calls the platform with: its own
// upstream_api_keys or upstream_api_key, else upstream's. The slice is fresh.
func (c *Config) TeamPlatformKeys(t *Team) []string {
	switch {
	case len(t.UpstreamAPIKeys) > 0:
		return append([]string(nil), t.UpstreamAPIKeys...)
	case t.UpstreamAPIKey != "":
		return []string{t.UpstreamAPIKey}
	case len(c.Upstream.UpstreamAPIKeys) > 0:
		return append([]string(nil), c.Upstream.UpstreamAPIKeys...)
	case c.Upstream.APIKey != "":
		return []string{c.Upstream.APIKey}
	}
	return nil
}

// keyPool checks one place that may hold a single platform key or a list of them: not both,
// every key well formed, none twice (a duplicate would double its share of the traffic).
// It reports whether any key is given there.
func (v *validator) keyPool(singlePath, single, listPath string, list []string) bool {
	if single != "" && len(list) > 0 {
		v.fail(listPath, "set %s or %s, not both", singlePath, listPath)
	}
	if single != "" {
		v.secret(singlePath, single)
	}
	seen := map[string]int{}
	for i, k := range list {
		p := fmt.Sprintf("%s[%d]", listPath, i)
		v.secret(p, k)
		if j, dup := seen[k]; dup && k != "" {
			v.fail(p, "the same platform key is listed twice (also %s[%d])", listPath, j)
		}
		seen[k] = i
	}
	return single != "" || len(list) > 0
}
