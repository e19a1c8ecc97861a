package config

import (
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
