package config

import (
	"fmt"
	"net/url"
	"strings"
)

// Summary describes what this config would enforce, for `modelgate check`. It names keys but
// never prints a key, a platform key or a store password.
func (c *Config) Summary() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }

	keys := 0
	for _, t := range c.Teams {
		keys += len(t.Keys)
	}
	if c.KeysMode() {
		w("mode: keys (%d teams, %d keys); unknown keys get 401", len(c.Teams), keys)
	} else {
		w("mode: passthrough (no team keys); each caller's bearer token is forwarded as the platform key")
	}
	w("listen: %s", c.Listen)

	u := c.Upstream
	w("upstream:")
	w("  gateway_url: %s", orUnset(u.GatewayURL, "(unset: needs --gateway-url or --simulate)"))
	w("  base_url: %s", orUnset(u.BaseURL, "(unset: needs --base-url or --simulate)"))
	w("  http2: %s", http2Text(u.HTTP2))
	if u.TLS.CAFile != "" {
		w("  tls.ca_file: %s (trusted besides the system's roots)", u.TLS.CAFile)
	} else {
		w("  tls.ca_file: none (the system's roots)")
	}
	switch {
	case len(u.UpstreamAPIKeys) > 0 && c.KeysMode():
		w("  upstream_api_keys: %d keys (default platform key pool)", len(u.UpstreamAPIKeys))
	case len(u.UpstreamAPIKeys) > 0:
		w("  upstream_api_keys: set but unused in passthrough mode")
	case u.APIKey != "" && c.KeysMode():
		w("  api_key: set (default platform key)")
	case u.APIKey != "":
		w("  api_key: set but unused in passthrough mode")
	default:
		w("  api_key: not set")
	}
	retries := "default"
	if u.MaxRetries != nil {
		retries = fmt.Sprint(*u.MaxRetries)
	}
	keepalive := "off"
	if u.KeepAliveInterval > 0 {
		keepalive = u.KeepAliveInterval.String()
	}
	w("  timeouts: dial %s, response header %s, stream idle %s, request %s; stream keep-alive %s",
		u.DialTimeout, u.ResponseHeaderTimeout, u.StreamIdleTimeout, u.RequestTimeout, keepalive)
	w("  retries: %s; health probe every %s", retries, u.HealthInterval)
	if b := u.Breaker; b.BreakersOn() && b.Failures != nil {
		w("  breaker: %d failures within %s open a model's or platform key's breaker for %s, then one probe (doubling per failed probe up to %s)",
			*b.Failures, b.Window, b.Cooldown, max(b.Cooldown, BreakerMaxCooldown))
	} else {
		w("  breaker: off (failures: 0)")
	}

	if len(c.Models) == 0 {
		w("models: none configured (/v1/models is empty; any model name is forwarded)")
	} else {
		w("models:")
		for _, m := range c.Models {
			if len(m.Routes) > 0 {
				w("  %s -> %s", m.ID, routesText(m))
			} else if m.Upstream != "" && m.Upstream != m.ID {
				w("  %s -> %s", m.ID, m.Upstream)
			} else {
				w("  %s", m.ID)
			}
			if r := routingText(m); r != "" {
				w("    %s", r)
			}
		}
	}
	if c.RefusesUnlisted() {
		w("unlisted models: refused (404); a platform model an entry sends to is that entry")
	} else {
		w("unlisted models: allowed, forwarded as named and unpriced; a platform model an entry sends to is that entry")
	}

	if !c.KeysMode() {
		w("limits per caller: %s", limitsText(c.Limits))
	}
	for _, t := range c.Teams {
		mode := t.Mode
		if mode == "" {
			mode = defaultTeamMode
		}
		w("team %s (%s):", t.Name, mode)
		if len(t.UpstreamAPIKeys) > 0 {
			w("  platform keys: team's own upstream_api_keys (%d)", len(t.UpstreamAPIKeys))
		} else if t.UpstreamAPIKey != "" {
			w("  platform key: team's own upstream_api_key")
		} else if len(u.UpstreamAPIKeys) > 0 {
			w("  platform keys: upstream.upstream_api_keys (%d)", len(u.UpstreamAPIKeys))
		} else {
			w("  platform key: upstream.api_key")
		}
		if len(t.Models) == 0 {
			w("  models: all")
		} else {
			w("  models: %s", strings.Join(t.Models, ", "))
		}
		w("  team limits: %s", limitsText(t.Limits))
		if t.Limits.OnBudgetExceeded != "" {
			w("  on budget exceeded: %s", t.Limits.OnBudgetExceeded)
		}
		if t.EndUserLimits.Limited() {
			w("  end-user limits: %s", endUserLimitsText(t.EndUserLimits))
		}
		for _, k := range t.Keys {
			form := "key"
			if k.KeySHA256 != "" {
				form = "key_sha256"
			}
			models := "" // a key without a list of its own uses the team's, shown above
			if len(k.Models) > 0 {
				models = "; models: " + strings.Join(k.Models, ", ")
			}
			w("  key %s (%s): %s%s%s", k.Name, form, limitsText(k.Limits), models, tagsText(k.Tags))
		}
	}
	w("admin keys: %d", len(c.AdminKeys))

	r := c.Ratelimit
	if r.Store == "" || r.Store == "memory" {
		w("ratelimit store: memory (daily usage kept in %s)", orUnset(r.DataPath, defaultDataPath))
	} else {
		w("ratelimit store: %s; on store error: %s", redactedStore(r.Store), orUnset(r.OnStoreError, defaultOnStoreError))
		if r.Store == "redis" {
			w("  redis: %s", r.Redis.topology())
		}
	}
	w("default max output tokens reserved: %d", r.DefaultMaxOutputTokens)
	w("on budget exceeded: %s", budgetActionText(c.Limits.OnBudgetExceeded))

	s := c.Server
	w("server: max body %d bytes, max upload %d bytes, read header timeout %s, upload idle timeout %s, drain %s",
		s.MaxBodyBytes, s.MaxUploadBytes, s.ReadHeaderTimeout, s.UploadIdleTimeout, s.DrainTimeout)
	w("request bodies: read within %s; gzip bodies inflated at once share %d bytes; bodies held and queued WebSocket messages share %d bytes",
		s.BodyReadTimeout, s.MaxInflatingBytes, s.MaxInflightBodyBytes)
	w("translate: reasoning field %s, drop extra fields %t, server tools %s", c.Translate.ReasoningField, c.Translate.DropExtraFields, c.Translate.ServerTools)
	w("sidecar: balance cached %s", c.Sidecar.BalanceCacheTTL)
	w("browsers: %s; chat n at most %d", corsText(s.CORSOrigins), c.Translate.MaxN)
	holder := "caller"
	if c.KeysMode() {
		holder = "key"
	}
	w("websocket (GET /v1/responses): at most %d connections open per %s in this process, %d lanes each; each closed after %s; pinged every %s",
		c.WebSocketConnections(), holder, c.WebSocketLanes(), s.WebSocketMaxAge, s.WebSocketPingInterval)
	if c.Responses.StoreLocal() {
		owner := "team"
		if c.Responses.KeyScoped() {
			owner = "key (scope: key)"
		}
		w("responses: kept by modelgate for %s, at most %d per %s (oldest evicted first), visible to the creating %s",
			c.Responses.StoreTTL, c.Responses.StoreMaxPerTeam, strings.Fields(owner)[0], owner)
		w("background responses: run by modelgate, at most %d unfinished per team", c.Responses.BackgroundMaxQueuedPerTeam)
	} else {
		w("responses: not kept by modelgate (store: off)")
	}
	priced := 0
	for _, m := range c.Models {
		if m.Price != nil {
			priced++
		}
	}
	history := "off"
	if c.HistoryEnabled() {
		history = fmt.Sprintf("kept %s, naming at most %d end users and values of each tag key per team and day",
			c.UsageHistory.Retention, c.UsageHistory.DistinctValues)
	}
	if c.Metrics.BearerToken != "" {
		w("metrics: /metrics needs its bearer token")
	} else {
		w("metrics: /metrics open to whoever reaches the listener")
	}
	w("pricing: %d of %d models priced, in %s; usage history %s", priced, len(c.Models), c.Pricing.Currency, history)
	w("usage tag keys recorded: %s", c.Usage.tagKeysText())
	w("%s", c.alertsSummary())
	return b.String()
}

func orUnset(s, unset string) string {
	if s == "" {
		return unset
	}
	return s
}

func limitsText(l Limits) string {
	part := func(n int64, unit string) string {
		if n == 0 {
			return "unlimited " + unit
		}
		return fmt.Sprintf("%d %s", n, unit)
	}
	// A policy and a connection cap, not request limits: each is summarized on a line of
	// its own.
	l.OnBudgetExceeded, l.WebSocketConnections, l.WebSocketLanes = "", 0, 0
	if l == (Limits{}) {
		return "unlimited"
	}
	parts := []string{
		part(l.RequestsPerMinute, "requests/min"),
		part(l.TokensPerMinute, "tokens/min"),
		part(l.ConcurrentRequests, "concurrent"),
		part(l.TokensPerDay, "tokens/day (UTC)"),
	}
	if l.SpendPerDay > 0 {
		parts = append(parts, fmt.Sprintf("spend %g/day (UTC)", l.SpendPerDay))
	}
	if l.SpendPerMonth > 0 {
		parts = append(parts, fmt.Sprintf("spend %g/month (UTC)", l.SpendPerMonth))
	}
	return strings.Join(parts, ", ")
}

// budgetActionText says what a call that does not fit a budget gets.
func budgetActionText(action string) string {
	if action == BudgetClamp {
		return "clamp (the output cap is lowered to what a spend or daily token budget has left; refused below 16 tokens)"
	}
	return "refuse"
}

func redactedStore(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable)"
	}
	hidden := ""
	if u.User != nil {
		// Some clients take a bare password in the user-name position, so hide all of it.
		u.User = nil
		hidden = " (credentials hidden)"
	}
	u.RawQuery = ""
	return u.String() + hidden
}

// routesText names a model's weighted routes with each one's share, and its sticky choice:
// "model-a 90% (weight 9), model-b 10% (weight 1); sticky per user".
func routesText(m Model) string {
	var total int64
	for _, r := range m.Routes {
		total += r.Weight
	}
	parts := make([]string, 0, len(m.Routes))
	for _, r := range m.Routes {
		parts = append(parts, fmt.Sprintf("%s %.4g%% (weight %d)", r.Upstream, 100*float64(r.Weight)/float64(max(total, 1)), r.Weight))
	}
	sticky := "a fresh draw per call"
	if m.Sticky != "" {
		sticky = "sticky per " + m.Sticky
	}
	return strings.Join(parts, ", ") + "; " + sticky
}

// routingText says where a model's calls go when it fails (fallbacks, context_window, retries,
// first_token_timeout), or "" when it names none of them.
func routingText(m Model) string {
	var parts []string
	if len(m.Fallbacks) > 0 {
		parts = append(parts, "fallbacks: "+strings.Join(m.Fallbacks, ", "))
	}
	if m.ContextWindow > 0 {
		parts = append(parts, fmt.Sprintf("context_window: %d tokens", m.ContextWindow))
	}
	if m.FirstTokenTimeout > 0 {
		parts = append(parts, "first_token_timeout: "+m.FirstTokenTimeout.String())
	}
	if m.Retries != nil {
		parts = append(parts, fmt.Sprintf("retries: %d", *m.Retries))
	}
	if m.CompactInstructions != "" {
		parts = append(parts, fmt.Sprintf("compact_instructions: %d bytes", len(m.CompactInstructions)))
	}
	return strings.Join(parts, "; ")
}

// http2Text says what an upstream.http2 value makes modelgate speak.
func http2Text(mode string) string {
	switch mode {
	case HTTP2Cleartext:
		return "h2c (cleartext HTTP/2 with prior knowledge)"
	case HTTP2Off:
		return "off (HTTP/1.1 always)"
	}
	return "auto (HTTP/2 when the platform's TLS offers it, else HTTP/1.1)"
}
