package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// MaxTokenBytes is the longest key or bearer token accepted; auth enforces the same bound, so
// any key the config accepts can also be presented.
const MaxTokenBytes = 4096

// TokenProblem says why s cannot be a key or bearer token ("" when it can): it must be
// printable ASCII without spaces, at most MaxTokenBytes long. auth applies the same rule to
// presented tokens, and it keeps platform keys from smuggling bytes into an HTTP header.
func TokenProblem(s string) string {
	if s == "" {
		return "is empty"
	}
	if len(s) > MaxTokenBytes {
		return fmt.Sprintf("is longer than %d bytes", MaxTokenBytes)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return "contains a space, control or non-ASCII character"
		}
	}
	return ""
}

// nameRE keeps team and key names free of '/' and ':' because they become parts of limiter
// scope ids ("key:<team>/<key>"), where such characters could make two scopes collide.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

const nameRule = "want 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"

// validator collects problems for one config; d supplies line numbers and env-var origins.
type validator struct {
	d    *decoder
	errs []*Error
}

// line finds the line of path, or of its nearest ancestor present in the file.
func (v *validator) line(path string) int {
	for p := path; p != ""; {
		if l, ok := v.d.lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

func (v *validator) fail(path, format string, args ...any) {
	v.errs = append(v.errs, &Error{File: v.d.file, Line: v.line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

// emptyHint explains an empty value that came from a set-but-empty variable.
func (v *validator) emptyHint(path string) string {
	if vars := v.d.envVars[path]; len(vars) > 0 {
		return fmt.Sprintf(" (environment variable %s is set but empty)", strings.Join(vars, ", "))
	}
	return ""
}

// secret checks a credential value without ever putting it into the message.
func (v *validator) secret(path, value string) {
	if p := TokenProblem(value); p != "" {
		if value == "" {
			p += v.emptyHint(path)
		}
		v.fail(path, "%s", p)
	}
}

func validate(c *Config, d *decoder) []*Error {
	v := &validator{d: d}
	v.listen(c.Listen)
	v.upstream(&c.Upstream)
	modelIDs := v.models(c.Models)
	v.ratelimit(&c.Ratelimit)
	v.limits("limits", c.Limits)
	v.budgetAction("limits", c.Limits)
	v.unlistedModels(c)
	digests := v.teams(c, modelIDs)
	v.adminKeys(c.AdminKeys, digests)
	v.server(&c.Server)
	v.either("translate.reasoning_field", c.Translate.ReasoningField, "reasoning_content", "reasoning")
	v.either("translate.server_tools", c.Translate.ServerTools, ServerToolsDrop, ServerToolsRefuse)
	v.nonNegativeDuration("sidecar.balance_cache_ttl", c.Sidecar.BalanceCacheTTL)
	v.corsOrigins(c.Server.CORSOrigins)
	v.maxN(c.Translate.MaxN)
	v.responses(&c.Responses)
	v.pricing(c)
	v.alerts(&c.Alerts)
	if c.Metrics.BearerToken != "" {
		v.secret("metrics.bearer_token", c.Metrics.BearerToken)
	}
	if c.Tracing.ContentMaxBytes < 0 || c.Tracing.ContentMaxBytes > 1<<20 {
		v.fail("tracing.content_max_bytes", "want 0 (the default, 4096) to 1048576, got %d", c.Tracing.ContentMaxBytes)
	}
	return v.errs
}

func (v *validator) listen(addr string) {
	if addr == "" {
		return
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.fail("listen", "want host:port such as 127.0.0.1:8080, got %q", addr)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.fail("listen", "want a port number 0-65535, got %q", port)
	}
}

func (v *validator) upstream(u *Upstream) {
	// Both URLs may be left out of the file: --gateway-url/--base-url or --simulate supply them.
	if u.GatewayURL != "" {
		v.httpURL("upstream.gateway_url", u.GatewayURL)
	}
	if u.BaseURL != "" {
		v.httpURL("upstream.base_url", u.BaseURL)
	}
	v.keyPool("upstream.api_key", u.APIKey, "upstream.upstream_api_keys", u.UpstreamAPIKeys)
	v.nonNegativeDuration("upstream.dial_timeout", u.DialTimeout)
	v.nonNegativeDuration("upstream.response_header_timeout", u.ResponseHeaderTimeout)
	v.nonNegativeDuration("upstream.stream_idle_timeout", u.StreamIdleTimeout)
	v.nonNegativeDuration("upstream.request_timeout", u.RequestTimeout)
	v.nonNegativeDuration("upstream.keepalive_interval", u.KeepAliveInterval)
	v.nonNegativeDuration("upstream.health_interval", u.HealthInterval)
	if u.MaxRetries != nil && *u.MaxRetries < 0 {
		v.fail("upstream.max_retries", "must not be negative, got %d", *u.MaxRetries)
	}
	if b := u.Breaker.Failures; b != nil && (*b < 0 || *b > 1000000) {
		v.fail("upstream.breaker.failures", "must be between 0 (off) and 1000000, got %d", *b)
	}
	v.nonNegativeDuration("upstream.breaker.window", u.Breaker.Window)
	v.nonNegativeDuration("upstream.breaker.cooldown", u.Breaker.Cooldown)
	v.upstreamHTTP2(u)
	if u.TLS.CAFile != "" {
		if _, err := readCAPEM(u.TLS.CAFile); err != nil {
			v.fail("upstream.tls.ca_file", "%v", err)
		}
	}
}

// upstreamHTTP2 checks upstream.http2. h2c speaks HTTP/2 in the clear, so it cannot reach an
// https:// platform: that is a mistake in the file, not something to fall back from.
func (v *validator) upstreamHTTP2(u *Upstream) {
	switch u.HTTP2 {
	case "", HTTP2Auto, HTTP2Off:
	case HTTP2Cleartext:
		for _, f := range []struct{ path, url string }{{"upstream.gateway_url", u.GatewayURL}, {"upstream.base_url", u.BaseURL}} {
			if strings.HasPrefix(strings.ToLower(f.url), "https://") {
				v.fail("upstream.http2", "h2c is HTTP/2 without TLS, but %s is https://", f.path)
			}
		}
	default:
		v.fail("upstream.http2", "want auto, h2c or off, got %q", u.HTTP2)
	}
}

// URLProblem says why raw cannot be an upstream URL ("" when it can). The platform key is sent
// there, so only a plain absolute http(s) address is accepted: credentials in the URL would
// end up in logs, and a query or fragment would be silently dropped when paths are joined.
func URLProblem(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Sprintf("not a valid URL: %q", raw)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return fmt.Sprintf("want an absolute http:// or https:// URL, got %q", raw)
	}
	switch {
	case u.Opaque != "" || u.Hostname() == "":
		return fmt.Sprintf("URL has no host: %q", raw)
	case u.User != nil:
		return "URL must not contain user info; put credentials in api_key"
	case u.RawQuery != "" || u.ForceQuery:
		return fmt.Sprintf("URL must not have a query: %q", raw)
	case u.Fragment != "":
		return fmt.Sprintf("URL must not have a fragment: %q", raw)
	}
	return ""
}

func (v *validator) httpURL(path, raw string) {
	if p := URLProblem(raw); p != "" {
		v.fail(path, "%s", p)
	}
}

func (v *validator) nonNegativeDuration(path string, d time.Duration) {
	if d < 0 {
		v.fail(path, "must not be negative, got %s", d)
	}
}

// either checks a setting that takes one of two values, or is left empty for its default.
func (v *validator) either(path, got, a, b string) {
	if got != "" && got != a && got != b {
		v.fail(path, "want %s or %s, got %q", a, b, got)
	}
}

func (v *validator) nonNegative(path string, n int64) {
	if n < 0 {
		v.fail(path, "must not be negative, got %d", n)
	}
}

// modelIDProblem rejects ids that could not round-trip through a URL path or a log line.
func modelIDProblem(id string) string {
	if id == "" {
		return "is empty"
	}
	if len(id) > 256 {
		return "is longer than 256 bytes"
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c == 0x7f {
			return fmt.Sprintf("contains a space or control character: %q", id)
		}
	}
	return ""
}

func (v *validator) models(models []Model) map[string]bool {
	ids := make(map[string]bool, len(models))
	first := make(map[string]int, len(models))
	for i, m := range models {
		p := fmt.Sprintf("models[%d]", i)
		if prob := modelIDProblem(m.ID); prob != "" {
			v.fail(p+".id", "%s", prob)
		} else if j, dup := first[m.ID]; dup {
			v.fail(p+".id", "duplicate model id %q (also models[%d])", m.ID, j)
		} else {
			first[m.ID] = i
		}
		ids[m.ID] = true
		if m.Upstream != "" {
			if prob := modelIDProblem(m.Upstream); prob != "" {
				v.fail(p+".upstream", "%s", prob)
			}
		}
		v.routes(p, m)
		if m.ContextWindow < 0 {
			v.fail(p+".context_window", "must not be negative")
		}
		if m.FirstTokenTimeout < 0 {
			v.fail(p+".first_token_timeout", "must not be negative")
		}
		if m.Retries != nil && (*m.Retries < 0 || *m.Retries > MaxModelRetries) {
			v.fail(p+".retries", "must be between 0 and %d, got %d", MaxModelRetries, *m.Retries)
		}
		v.compactInstructions(p, m.CompactInstructions)
	}
	for i, m := range models {
		v.fallbacks(fmt.Sprintf("models[%d].fallbacks", i), m, ids)
	}
	return ids
}

// compactInstructions checks a model's compact_instructions: unset, or text of at most
// MaxCompactInstructions bytes that says something (a blank value would ask the model for a
// summary with no instructions at all).
func (v *validator) compactInstructions(p, s string) {
	switch {
	case s == "":
	case strings.TrimSpace(s) == "":
		v.fail(p+".compact_instructions", "is blank: leave it unset for modelgate's own instructions")
	case len(s) > MaxCompactInstructions:
		v.fail(p+".compact_instructions", "is %d bytes long, more than %d", len(s), MaxCompactInstructions)
	}
}

// routes checks a model's weighted routes and its sticky choice: routes replace upstream,
// each names a distinct platform model with a positive weight, and sticky needs routes to
// choose between.
func (v *validator) routes(p string, m Model) {
	switch m.Sticky {
	case "", StickyUser, StickyConversation:
	default:
		v.fail(p+".sticky", "want user, conversation or empty, got %q", m.Sticky)
	}
	if m.Routes == nil {
		if m.Sticky != "" {
			v.fail(p+".sticky", "sticky chooses between routes: set routes too")
		}
		return
	}
	switch {
	case m.Upstream != "":
		v.fail(p+".routes", "set upstream or routes, not both")
	case len(m.Routes) == 0:
		v.fail(p+".routes", "want at least one route")
	case len(m.Routes) > MaxRoutes:
		v.fail(p+".routes", "at most %d routes, got %d", MaxRoutes, len(m.Routes))
	}
	seen := make(map[string]int, len(m.Routes))
	for j, r := range m.Routes {
		rp := fmt.Sprintf("%s.routes[%d]", p, j)
		if prob := modelIDProblem(r.Upstream); prob != "" {
			v.fail(rp+".upstream", "%s", prob)
		} else if k, dup := seen[r.Upstream]; dup {
			v.fail(rp+".upstream", "%q is routed twice (also routes[%d]): give it one route with the sum of the weights", r.Upstream, k)
		} else {
			seen[r.Upstream] = j
		}
		if r.Weight < 1 || r.Weight > MaxRouteWeight {
			v.fail(rp+".weight", "want a whole number from 1 to %d, got %d", MaxRouteWeight, r.Weight)
		}
	}
}

// fallbacks checks a model's fallback chain: configured ids, not the model itself, each
// once (a repeat would only try a failing model twice).
func (v *validator) fallbacks(p string, m Model, ids map[string]bool) {
	seen := make(map[string]bool, len(m.Fallbacks))
	for j, f := range m.Fallbacks {
		fp := fmt.Sprintf("%s[%d]", p, j)
		switch {
		case f == m.ID:
			v.fail(fp, "a model cannot fall back to itself (%q)", f)
		case !ids[f]:
			v.fail(fp, "unknown model id %q (each fallback must be listed under models)", f)
		case seen[f]:
			v.fail(fp, "%q is listed twice", f)
		}
		seen[f] = true
	}
}

func (v *validator) ratelimit(r *Ratelimit) {
	if r.Store != "" && r.Store != "memory" && r.Store != "redis" {
		if p := storeProblem(r.Store); p != "" {
			v.fail("ratelimit.store", "%s", p)
		}
	}
	v.redis(r)
	v.either("ratelimit.on_store_error", r.OnStoreError, "allow", "deny")
	v.nonNegative("ratelimit.default_max_output_tokens", r.DefaultMaxOutputTokens)
	v.nonNegative("ratelimit.passthrough_callers", r.PassthroughCallers)
	v.limits("ratelimit.passthrough_limits", r.PassthroughLimits)
	v.noBudgetAction("ratelimit.passthrough_limits", r.PassthroughLimits)
}

// storeProblem checks a redis:// or rediss:// URL without echoing it: it may carry a password.
func storeProblem(raw string) string {
	const want = "want memory, redis://host:port/db or rediss://host:port/db, or redis with a ratelimit.redis block"
	u, err := url.Parse(raw)
	if err != nil {
		return want
	}
	switch u.Scheme {
	case "redis", "rediss":
	default:
		return want
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return want + " (no host given)"
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		if n, err := strconv.Atoi(db); err != nil || n < 0 {
			return want + " (the database must be a number)"
		}
	}
	return ""
}

func (v *validator) limits(path string, l Limits) {
	v.nonNegative(path+".requests_per_minute", l.RequestsPerMinute)
	v.nonNegative(path+".tokens_per_minute", l.TokensPerMinute)
	v.nonNegative(path+".concurrent_requests", l.ConcurrentRequests)
	v.nonNegative(path+".tokens_per_day", l.TokensPerDay)
	v.money(path+".spend_per_day", l.SpendPerDay)
	v.money(path+".spend_per_month", l.SpendPerMonth)
	v.nonNegative(path+".websocket_connections", l.WebSocketConnections)
	v.nonNegative(path+".websocket_lanes", l.WebSocketLanes)
}

// budgetAction checks on_budget_exceeded where it may be set: the top-level limits and a
// team's.
func (v *validator) budgetAction(path string, l Limits) {
	v.either(path+".on_budget_exceeded", l.OnBudgetExceeded, BudgetRefuse, BudgetClamp)
}

// noBudgetAction refuses on_budget_exceeded where nothing would read it: a key follows its
// team, and the budgets shared by all passthrough callers follow the top-level limits.
func (v *validator) noBudgetAction(path string, l Limits) {
	if l.OnBudgetExceeded != "" {
		v.fail(path+".on_budget_exceeded", "set it at limits or teams[].limits; a key follows its team")
	}
	v.noSocketCap(path, l)
}

// noSocketCap refuses websocket_connections anywhere but the top-level limits, which cap
// every key, and unlisted_models, which decides for every caller.
func (v *validator) noSocketCap(path string, l Limits) {
	if l.WebSocketConnections != 0 {
		v.fail(path+".websocket_connections", "set it at the top-level limits: it caps every key")
	}
	if l.WebSocketLanes != 0 {
		v.fail(path+".websocket_lanes", "set it at the top-level limits: it caps every connection")
	}
	if l.UnlistedModels != "" {
		v.fail(path+".unlisted_models", "set it at the top-level limits: it decides for every caller")
	}
}

// maxMoney keeps amounts convertible to integer micro-units without overflow.
const maxMoney = 1e12

func (v *validator) money(path string, f float64) {
	if f < 0 || f > maxMoney || f != f {
		v.fail(path, "want an amount from 0 to %g, got %g", float64(maxMoney), f)
	}
}

func (v *validator) pricing(c *Config) {
	for i, m := range c.Models {
		if m.Price == nil {
			continue
		}
		p := fmt.Sprintf("models[%d].price", i)
		v.money(p+".input", m.Price.Input)
		v.money(p+".output", m.Price.Output)
		if m.Price.CachedInput != nil {
			v.money(p+".cached_input", *m.Price.CachedInput)
		}
	}
	if cur := c.Pricing.Currency; cur != "" && !currencyRE.MatchString(cur) {
		v.fail("pricing.currency", "want 1-8 letters such as USD, got %q", cur)
	}
	v.nonNegativeDuration("usage_history.retention", c.UsageHistory.Retention)
	v.nonNegativeDuration("usage_history.hourly_retention", c.UsageHistory.HourlyRetention)
	if n := c.UsageHistory.DistinctValues; n < 0 || n > MaxDistinctValues {
		v.fail("usage_history.distinct_values", "want 1 to %d (0: the default, %d), got %d", MaxDistinctValues, DefaultDistinctValues, n)
	}
	v.usage(&c.Usage)
}

var currencyRE = regexp.MustCompile(`^[A-Za-z]{1,8}$`)

// SpendWarnings lists teams that have a spend budget but may use a model without a price:
// such calls cost nothing as far as the budget can tell.
func (c *Config) SpendWarnings() []string {
	var out []string
	for _, t := range c.Teams {
		spend := t.Limits.SpendPerDay > 0 || t.Limits.SpendPerMonth > 0
		for _, k := range t.Keys {
			spend = spend || k.Limits.SpendPerDay > 0 || k.Limits.SpendPerMonth > 0
		}
		if !spend {
			continue
		}
		if len(c.Models) == 0 {
			out = append(out, fmt.Sprintf("team %s has a spend limit but no models are listed, so none has a price: its spend is not counted", t.Name))
			continue
		}
		allowed := map[string]bool{}
		for _, m := range t.Models {
			allowed[m] = true
		}
		var unpriced []string
		for _, m := range c.Models {
			if m.Price == nil && (len(t.Models) == 0 || allowed[m.ID]) {
				unpriced = append(unpriced, m.ID)
			}
		}
		if len(unpriced) > 0 {
			out = append(out, fmt.Sprintf("team %s has a spend limit but may use models without a price (%s): their calls cost nothing against it", t.Name, strings.Join(unpriced, ", ")))
		}
	}
	return out
}

// keyDigest is how keys are compared for duplicates: the same digest auth will hold.
func keyDigest(k Key) ([32]byte, bool) {
	if k.Key != "" {
		return sha256.Sum256([]byte(k.Key)), true
	}
	var d [32]byte
	if len(k.KeySHA256) != 64 {
		return d, false
	}
	if _, err := hex.Decode(d[:], []byte(k.KeySHA256)); err != nil {
		return d, false
	}
	return d, true
}

func (v *validator) teams(c *Config, modelIDs map[string]bool) map[[32]byte]string {
	digests := map[[32]byte]string{}
	teamFirst := map[string]int{}
	for i, t := range c.Teams {
		tp := fmt.Sprintf("teams[%d]", i)
		if !nameRE.MatchString(t.Name) {
			v.fail(tp+".name", "%s, got %q", nameRule, t.Name)
		} else if j, dup := teamFirst[t.Name]; dup {
			v.fail(tp+".name", "duplicate team name %q (also teams[%d])", t.Name, j)
		} else {
			teamFirst[t.Name] = i
		}
		own := v.keyPool(tp+".upstream_api_key", t.UpstreamAPIKey, tp+".upstream_api_keys", t.UpstreamAPIKeys)
		if !own && c.Upstream.APIKey == "" && len(c.Upstream.UpstreamAPIKeys) == 0 {
			v.fail(tp, "no platform key for this team: set upstream.api_key or %s.upstream_api_key%s",
				tp, v.emptyHint(tp+".upstream_api_key")+v.emptyHint("upstream.api_key"))
		}
		for j, m := range t.Models {
			mp := fmt.Sprintf("%s.models[%d]", tp, j)
			if prob := modelIDProblem(m); prob != "" {
				v.fail(mp, "%s", prob)
			} else if len(c.Models) > 0 && !modelIDs[m] {
				v.fail(mp, "model %q is not listed under models", m)
			}
		}
		v.limits(tp+".limits", t.Limits)
		v.budgetAction(tp+".limits", t.Limits)
		v.noSocketCap(tp+".limits", t.Limits)
		v.either(tp+".mode", t.Mode, "enforce", "shadow")
		v.endUserLimits(tp+".end_user_limits", t.EndUserLimits)
		if len(t.Keys) == 0 {
			// Without this a config whose teams all lack keys would quietly run in passthrough
			// mode, forwarding any caller's token: fail closed instead.
			v.fail(tp+".keys", "a team needs at least one key")
		}
		v.keys(tp, t.Keys, digests)
		for j := range t.Keys {
			v.keyModels(c, i, j)
			v.keyTags(fmt.Sprintf("%s.keys[%d].tags", tp, j), t.Keys[j].Tags)
		}
	}
	return digests
}

func (v *validator) keys(tp string, keys []Key, digests map[[32]byte]string) {
	keyFirst := map[string]int{}
	for j, k := range keys {
		kp := fmt.Sprintf("%s.keys[%d]", tp, j)
		if !nameRE.MatchString(k.Name) {
			v.fail(kp+".name", "%s, got %q", nameRule, k.Name)
		} else if first, dup := keyFirst[k.Name]; dup {
			v.fail(kp+".name", "duplicate key name %q in this team (also %s.keys[%d])", k.Name, tp, first)
		} else {
			keyFirst[k.Name] = j
		}
		switch {
		case k.Key != "" && k.KeySHA256 != "":
			v.fail(kp, "set key or key_sha256, not both")
			continue
		case k.Key == "" && k.KeySHA256 == "":
			v.fail(kp+".key", "set key or key_sha256%s", v.emptyHint(kp+".key")+v.emptyHint(kp+".key_sha256"))
			continue
		case k.Key != "":
			if p := TokenProblem(k.Key); p != "" {
				v.fail(kp+".key", "%s", p)
				continue
			}
		default:
			if _, ok := keyDigest(k); !ok {
				got := fmt.Sprintf("%d characters", len(k.KeySHA256))
				if len(k.KeySHA256) == 64 {
					got = "a non-hex character"
				}
				v.fail(kp+".key_sha256", "want 64 hex digits (sha256 of the key), got %s", got)
				continue
			}
		}
		d, _ := keyDigest(k)
		if other, dup := digests[d]; dup {
			v.fail(kp, "same key as %s: every key must be distinct", other)
			continue
		}
		digests[d] = kp
		v.limits(kp+".limits", k.Limits)
		v.noBudgetAction(kp+".limits", k.Limits)
	}
}

func (v *validator) adminKeys(keys []string, teamDigests map[[32]byte]string) {
	seen := map[[32]byte]int{}
	for i, k := range keys {
		p := fmt.Sprintf("admin_keys[%d]", i)
		if prob := TokenProblem(k); prob != "" {
			if k == "" {
				prob += v.emptyHint(p)
			}
			v.fail(p, "%s", prob)
			continue
		}
		d := sha256.Sum256([]byte(k))
		if first, dup := seen[d]; dup {
			v.fail(p, "same key as admin_keys[%d]", first)
			continue
		}
		seen[d] = i
		// An admin key must never double as a data-plane key, or a team could reach admin routes.
		if other, dup := teamDigests[d]; dup {
			v.fail(p, "same key as %s: admin keys must differ from team keys", other)
		}
	}
}

func (v *validator) server(s *Server) {
	v.nonNegative("server.max_body_bytes", s.MaxBodyBytes)
	v.nonNegative("server.max_upload_bytes", s.MaxUploadBytes)
	v.nonNegativeDuration("server.drain_timeout", s.DrainTimeout)
	v.nonNegativeDuration("server.read_header_timeout", s.ReadHeaderTimeout)
	v.nonNegativeDuration("server.upload_idle_timeout", s.UploadIdleTimeout)
	v.nonNegativeDuration("server.body_read_timeout", s.BodyReadTimeout)
	v.nonNegative("server.max_inflating_bytes", s.MaxInflatingBytes)
	v.nonNegative("server.max_inflight_body_bytes", int64(s.MaxInflightBodyBytes))
	// A negative age or interval would quietly mean the default.
	v.nonNegativeDuration("server.websocket_max_age", s.WebSocketMaxAge)
	v.nonNegativeDuration("server.websocket_ping_interval", s.WebSocketPingInterval)
}

func (v *validator) responses(r *Responses) {
	v.either("responses.store", r.Store, "local", "off")
	v.either("responses.scope", r.Scope, "team", "key")
	v.nonNegativeDuration("responses.store_ttl", r.StoreTTL)
	v.nonNegative("responses.store_max_per_team", r.StoreMaxPerTeam)
	v.nonNegative("responses.background_max_queued_per_team", r.BackgroundMaxQueuedPerTeam)
}
