// Package config loads and validates modelgate's YAML configuration.
package config

import "time"

// Config is the whole of config.yaml after ${VAR} expansion and validation.
type Config struct {
	Listen       string       `yaml:"listen"`
	Upstream     Upstream     `yaml:"upstream"`
	Models       []Model      `yaml:"models"`
	Ratelimit    Ratelimit    `yaml:"ratelimit"`
	Limits       Limits       `yaml:"limits"` // defaults for passthrough callers, per distinct caller key
	Teams        []Team       `yaml:"teams"`
	AdminKeys    []string     `yaml:"admin_keys"`
	Server       Server       `yaml:"server"`
	Translate    Translate    `yaml:"translate"`
	Sidecar      SidecarConf  `yaml:"sidecar"`
	Responses    Responses    `yaml:"responses"`
	Pricing      Pricing      `yaml:"pricing"`
	UsageHistory UsageHistory `yaml:"usage_history"`
	Usage        Usage        `yaml:"usage"` // request attribution (issue 28)
	Tracing      Tracing      `yaml:"tracing"`
	Metrics      Metrics      `yaml:"metrics"`
	Alerts       Alerts       `yaml:"alerts"` // budget and key events over webhooks (config/alerts.go)
}

// Metrics guards GET /metrics.
type Metrics struct {
	// BearerToken, when set, is what a scraper must send as "Authorization: Bearer <it>";
	// empty leaves /metrics open to whoever reaches the listener.
	BearerToken string `yaml:"bearer_token"`
}

// Upstream describes the platform: where it lives, the default credential, and how to talk to it.
type Upstream struct {
	GatewayURL string `yaml:"gateway_url"` // {gateway_url}: POST /v1/responses lives here
	BaseURL    string `yaml:"base_url"`    // {base_url}: /api/open/v2/... lives here
	APIKey     string `yaml:"api_key"`     // default platform key (keys mode)

	DialTimeout           time.Duration `yaml:"dial_timeout"`            // default 5s
	ResponseHeaderTimeout time.Duration `yaml:"response_header_timeout"` // first byte; default 60s
	StreamIdleTimeout     time.Duration `yaml:"stream_idle_timeout"`     // max gap between stream events; default 5m
	RequestTimeout        time.Duration `yaml:"request_timeout"`         // whole non-stream call incl. retries; default 10m
	KeepAliveInterval     time.Duration `yaml:"keepalive_interval"`      // keep-alive frame on idle client streams; default 15s, an explicit 0s = off
	MaxRetries            *int          `yaml:"max_retries"`             // default 2
	HealthInterval        time.Duration `yaml:"health_interval"`         // readiness probe period; default 15s

	// UpstreamAPIKeys is a pool of default platform keys, an alternative to APIKey: requests
	// are spread over them and fail over from a rejected or rate-limited one.
	UpstreamAPIKeys []string `yaml:"upstream_api_keys"`

	// Breaker sets the circuit breakers of every upstream model and platform key (issue 27).
	Breaker Breaker `yaml:"breaker"`

	// TLS adds trust for a platform whose certificate a private CA signed.
	TLS UpstreamTLS `yaml:"tls"`
	// HTTP2 is how modelgate talks HTTP/2 to the platform: HTTP2Auto (the default) when TLS
	// negotiates it, HTTP2Cleartext with prior knowledge over plain TCP, or HTTP2Off.
	HTTP2 string `yaml:"http2"`
}

// The values of upstream.http2.
const (
	HTTP2Auto      = "auto" // HTTP/2 when the platform's TLS offers it (ALPN), else HTTP/1.1
	HTTP2Cleartext = "h2c"  // HTTP/2 with prior knowledge over plain TCP; http:// URLs only
	HTTP2Off       = "off"  // HTTP/1.1 always, even when TLS offers HTTP/2
)

// UpstreamTLS is upstream.tls.
type UpstreamTLS struct {
	// CAFile is a PEM file of CA certificates trusted for the platform's certificate, in
	// addition to the system's roots.
	CAFile string `yaml:"ca_file"`
}

// Breaker is upstream.breaker: how many failures within a window open a breaker, and how
// long it stays open before one probe may go. Defaults are applied by the loader.
type Breaker struct {
	Failures *int          `yaml:"failures"` // default 5; 0 turns breakers off
	Window   time.Duration `yaml:"window"`   // default 60s
	Cooldown time.Duration `yaml:"cooldown"` // default 30s; doubles per failed probe up to BreakerMaxCooldown
}

// BreakerMaxCooldown caps the cool-down of a breaker whose probes keep failing (or the
// configured cool-down, when that is longer): a model down for an hour is still probed
// every five minutes.
const BreakerMaxCooldown = 5 * time.Minute

// BreakersOn reports whether breakers count failures.
func (b Breaker) BreakersOn() bool { return b.Failures == nil || *b.Failures > 0 }

// Model is one entry of what /v1/models lists.
type Model struct {
	ID       string `yaml:"id"`       // name clients send
	Upstream string `yaml:"upstream"` // name sent upstream; default ID
	Price    *Price `yaml:"price"`    // per 1M tokens in pricing.currency; nil = unpriced

	// Weighted routes (issue 27, slice D): a split of this model's calls between upstream
	// models, for a canary or an A/B test (docs/routing.md), instead of Upstream.
	Routes []Route `yaml:"routes"` // nil = every call goes to Upstream
	Sticky string  `yaml:"sticky"` // StickyUser, StickyConversation or "" (a fresh draw per call)
	// Fallbacks (issue 27, slice C): where a call goes when this model fails before the
	// first byte reaches the client (docs/routing.md).
	Fallbacks         []string      `yaml:"fallbacks"`           // configured model ids, tried in order
	ContextWindow     int64         `yaml:"context_window"`      // tokens; 0 = unknown
	FirstTokenTimeout time.Duration `yaml:"first_token_timeout"` // 0 = no bound of its own
	// Retries is how many times a call to this model is retried (upstream's retry policy)
	// before its fallback is tried. nil: none while a fallback is left to try, so the
	// fallback is not kept waiting; upstream.max_retries otherwise.
	Retries *int `yaml:"retries"`
	// CompactInstructions are the instructions of the summarising call that emulates POST
	// /v1/responses/compact for this model (issue 44); "" = modelgate's own
	// (translate.DefaultCompactInstructions).
	CompactInstructions string `yaml:"compact_instructions"`
}

// MaxCompactInstructions bounds models[].compact_instructions, in bytes: they are sent with
// every compaction of the model, and a summary prompt needs far less.
const MaxCompactInstructions = 32 << 10

// MaxModelRetries bounds models[].retries: each retry may wait up to the platform's
// Retry-After, and the call's deadline bounds them anyway.
const MaxModelRetries = 10

// Route is one share of a model's weighted routes.
type Route struct {
	Upstream string `yaml:"upstream"` // the platform's model name
	Weight   int64  `yaml:"weight"`   // this route's share: weight / the sum of the weights
}

// The sticky choices of models[].sticky.
const (
	StickyUser         = "user"         // the request's end user, or the caller's key when it names none
	StickyConversation = "conversation" // the conversation the request continues
)

// MaxRoutes and MaxRouteWeight bound a model's routes: a few shares suffice for any split,
// and the bounds keep the choice's arithmetic exact.
const (
	MaxRoutes      = 32
	MaxRouteWeight = 1_000_000
)

// Ratelimit selects the limiter's store.
type Ratelimit struct {
	Store string `yaml:"store"` // "memory" (default) or redis://host:port/db
	// OnStoreError decides what happens when a shared store (Redis) cannot be reached:
	// "allow" (default, fail open for availability) or "deny" (fail closed, 503).
	OnStoreError string `yaml:"on_store_error"`
	// DataPath is the embedded durable store (daily usage, asset owners) used with the memory store.
	DataPath string `yaml:"data_path"` // default "modelgate-data"
	// DefaultMaxOutputTokens is reserved at admission when a request names no output cap.
	DefaultMaxOutputTokens int64 `yaml:"default_max_output_tokens"` // default 4096
	// PassthroughCallers caps how many passthrough callers get a limit scope of their own;
	// past it, new callers share one overflow scope. 0 means the default, 10000.
	PassthroughCallers int64 `yaml:"passthrough_callers"`
	// PassthroughLimits are budgets shared by all passthrough callers together, checked
	// with each caller's own (top-level limits). All 0 (the default): none.
	PassthroughLimits Limits `yaml:"passthrough_limits"`
	// Redis addresses a single server, Sentinel or Cluster when Store is "redis".
	Redis Redis `yaml:"redis"`
}

// Redis is the shared store's connection: one server, a Sentinel-managed master or a Cluster.
type Redis struct {
	Addrs          []string `yaml:"addrs"`           // host:port; Sentinels' when SentinelMaster is set
	Cluster        bool     `yaml:"cluster"`         // addrs are Redis Cluster nodes
	SentinelMaster string   `yaml:"sentinel_master"` // set: addrs are Sentinels serving this master
	Username       string   `yaml:"username"`
	Password       string   `yaml:"password"`
	DB             int      `yaml:"db"` // single server and Sentinel only; Cluster has just 0
	TLS            bool     `yaml:"tls"`
}

// Limits are one scope's budgets. Zero means unlimited; negative values are rejected.
type Limits struct {
	RequestsPerMinute  int64 `yaml:"requests_per_minute"`
	TokensPerMinute    int64 `yaml:"tokens_per_minute"`
	ConcurrentRequests int64 `yaml:"concurrent_requests"`
	TokensPerDay       int64 `yaml:"tokens_per_day"` // UTC day
	// Spend budgets in pricing.currency, charged at the models' prices.
	SpendPerDay   float64 `yaml:"spend_per_day"`   // UTC day
	SpendPerMonth float64 `yaml:"spend_per_month"` // UTC calendar month
	// OnBudgetExceeded is what happens to a call whose output cap does not fit what is left
	// of a spend budget or of tokens_per_day: "refuse" (default) or "clamp" (lower the cap
	// to what is left). Read at the top-level limits and a team's limits only.
	OnBudgetExceeded string `yaml:"on_budget_exceeded"`
	// WebSocketConnections caps the Responses WebSocket connections one key holds open at
	// once (in this process). Read at the top-level limits only; default 16.
	WebSocketConnections int64 `yaml:"websocket_connections"`
	// WebSocketLanes caps the lanes (stream_id) one Responses WebSocket connection runs side
	// by side. Read at the top-level limits only; default 4.
	WebSocketLanes int64 `yaml:"websocket_lanes"`
	// UnlistedModels is what happens to a call naming a model no models[] entry names (by
	// its id, its upstream or one of its routes): "refuse" (404) or "allow" (forwarded,
	// unpriced). Read at the top-level limits only; default refuse with team keys, allow in
	// passthrough mode (Config.RefusesUnlisted).
	UnlistedModels string `yaml:"unlisted_models"`
}

// DefaultWebSocketConnections is limits.websocket_connections when it is not set.
const DefaultWebSocketConnections = 16

// DefaultWebSocketLanes is limits.websocket_lanes when it is not set.
const DefaultWebSocketLanes = 4

// WebSocketLanes is the per-connection cap on Responses WebSocket lanes running at once.
func (c *Config) WebSocketLanes() int64 {
	if c.Limits.WebSocketLanes > 0 {
		return c.Limits.WebSocketLanes
	}
	return DefaultWebSocketLanes
}

// WebSocketConnections is the per-key cap on open Responses WebSocket connections.
func (c *Config) WebSocketConnections() int64 {
	if c.Limits.WebSocketConnections > 0 {
		return c.Limits.WebSocketConnections
	}
	return DefaultWebSocketConnections
}

// Values of Limits.OnBudgetExceeded.
const (
	BudgetRefuse = "refuse"
	BudgetClamp  = "clamp"
)

// ClampsBudgets reports whether calls of a team with these limits (the zero Limits for a
// passthrough caller) lower their output cap to what a budget has left instead of being
// refused: the team's on_budget_exceeded when set, the top-level one otherwise.
func (c *Config) ClampsBudgets(team Limits) bool {
	if team.OnBudgetExceeded != "" {
		return team.OnBudgetExceeded == BudgetClamp
	}
	return c.Limits.OnBudgetExceeded == BudgetClamp
}

// Team groups local keys that share a platform credential, an allow-list and budgets.
type Team struct {
	Name           string   `yaml:"name"`
	UpstreamAPIKey string   `yaml:"upstream_api_key"` // default Upstream.APIKey
	Models         []string `yaml:"models"`           // allow-list of client-facing model ids; empty = all
	Limits         Limits   `yaml:"limits"`
	Mode           string   `yaml:"mode"` // "enforce" (default) or "shadow": report refusals without refusing
	Keys           []Key    `yaml:"keys"`
	// UpstreamAPIKeys is the team's own pool of platform keys, an alternative to
	// UpstreamAPIKey; default Upstream's key or keys.
	UpstreamAPIKeys []string `yaml:"upstream_api_keys"`
	// EndUserLimits bound each end user the team's requests name (issue 28), inside the
	// team's own limits; requests that name no end user are not limited by them.
	EndUserLimits EndUserLimits `yaml:"end_user_limits"`
}

// EndUserLimits are the limits of one end user of a team; 0 = no limit.
type EndUserLimits struct {
	RequestsPerMinute int64   `yaml:"requests_per_minute"`
	TokensPerDay      int64   `yaml:"tokens_per_day"` // UTC day
	SpendPerDay       float64 `yaml:"spend_per_day"`  // UTC day, in pricing.currency
}

// Limited reports whether any end-user limit is set.
func (l EndUserLimits) Limited() bool { return l != EndUserLimits{} }

// Key is one local key handed to a team. Exactly one of Key and KeySHA256 is set.
type Key struct {
	Name      string `yaml:"name"`
	Key       string `yaml:"key"`
	KeySHA256 string `yaml:"key_sha256"` // lowercase hex of sha256(key)
	Limits    Limits `yaml:"limits"`

	// Models narrows the team's allow-list for this key (issue 27): client-facing model ids,
	// each one the team may use. Empty = the team's list.
	Models []string `yaml:"models"`

	// Tags are the default tags of the key's requests (issue 28): a request's own tags of
	// the same key win.
	Tags map[string]string `yaml:"tags"`
}

// Server holds the local listener's knobs.
type Server struct {
	MaxBodyBytes      int64         `yaml:"max_body_bytes"`      // JSON routes; default 32 MiB
	MaxUploadBytes    int64         `yaml:"max_upload_bytes"`    // asset file part; default 100 MB (100*1000*1000)
	DrainTimeout      time.Duration `yaml:"drain_timeout"`       // default 30s
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"` // default 10s
	UploadIdleTimeout time.Duration `yaml:"upload_idle_timeout"` // asset upload with no byte received; default 2m
	OverheadHeader    bool          `yaml:"overhead_header"`     // x-modelgate-overhead-ms on answers; default off
	// BodyReadTimeout bounds reading one JSON request body, from the handler's first read to
	// its last byte; a body still arriving then is refused with 408. Default 30s.
	BodyReadTimeout time.Duration `yaml:"body_read_timeout"`
	// MaxInflatingBytes caps the gzip request bodies being inflated at once across the
	// process, in inflated bytes; a body that would take more is refused with 503. Default
	// 64 MiB.
	MaxInflatingBytes int64 `yaml:"max_inflating_bytes"`
	// MaxInflightBodyBytes is the memory the whole process gives to what requests hold of
	// their bodies: every JSON body being read or read and not yet sent to the platform, and
	// every response.create queued on a WebSocket. A request that finds no room waits up to
	// a second, then gets 503. Default 256 MiB.
	MaxInflightBodyBytes ByteSize `yaml:"max_inflight_body_bytes"`
	// CORSOrigins are the browser origins allowed to call /v1 ("scheme://host[:port]", or "*");
	// empty = no CORS at all, since modelgate holds platform keys.
	CORSOrigins []string `yaml:"cors_origins"`
	// WebSocketMaxAge is how long a Responses WebSocket connection may stay open; then it is
	// closed (the websocket_connection_limit_reached event, then code 1001) once its turn in
	// flight has finished. Default 60m.
	WebSocketMaxAge time.Duration `yaml:"websocket_max_age"`
	// WebSocketPingInterval is how often an open WebSocket connection is pinged; a client
	// that has not answered by the next ping is taken as gone. Default 30s.
	WebSocketPingInterval time.Duration `yaml:"websocket_ping_interval"`
}

// Translate tunes the Chat Completions bridge.
type Translate struct {
	ReasoningField  string `yaml:"reasoning_field"`   // "reasoning_content" (default) or "reasoning"
	DropExtraFields bool   `yaml:"drop_extra_fields"` // drop unknown chat fields instead of forwarding them
	MaxN            int    `yaml:"max_n"`             // largest chat n fanned out; default 8, at most 128
	// ServerTools is what becomes of a tool the platform cannot run (Anthropic's server
	// tools, OpenAI's hosted tools): ServerToolsDrop (default) or ServerToolsRefuse.
	ServerTools string `yaml:"server_tools"`
}

// Choices is translate.max_n, or its default for a config built in code without it.
func (t Translate) Choices() int {
	if t.MaxN > 0 {
		return t.MaxN
	}
	return DefaultMaxN
}

// The choices of translate.server_tools.
const (
	ServerToolsDrop   = "drop"   // left out of the call, named in x-modelgate-dropped-tools
	ServerToolsRefuse = "refuse" // the call is answered with a 400
)

// SidecarConf tunes the platform REST routes.
type SidecarConf struct {
	BalanceCacheTTL time.Duration `yaml:"balance_cache_ttl"` // default 5s
}

// Responses tunes the responses modelgate keeps for previous_response_id and
// GET/DELETE /v1/responses/{id}.
type Responses struct {
	Store    string        `yaml:"store"`     // "local" (default): modelgate keeps responses; "off": forwarded untouched
	StoreTTL time.Duration `yaml:"store_ttl"` // how long a kept response lives; default 720h
	// StoreMaxPerTeam caps the responses kept per team (per caller in passthrough); the
	// oldest is evicted first. 0 means the default, 10000.
	StoreMaxPerTeam int64 `yaml:"store_max_per_team"`
	// BackgroundMaxQueuedPerTeam caps a team's background responses not yet finished
	// (queued or in progress) on one modelgate instance; one more is a 429. 0 means the
	// default, 16.
	BackgroundMaxQueuedPerTeam int64 `yaml:"background_max_queued_per_team"`
	// Scope is who may read, delete, cancel or continue a kept response: "team" (default,
	// any key of the team that created it) or "key" (only the key that created it).
	Scope string `yaml:"scope"`
}

// KeyScoped reports whether a kept response belongs to the key that created it alone.
func (r Responses) KeyScoped() bool { return r.Scope == "key" }

// StoreLocal reports whether modelgate keeps responses itself.
func (r Responses) StoreLocal() bool { return r.Store == "" || r.Store == "local" }

// Price is what a model costs per 1M tokens, in pricing.currency.
type Price struct {
	Input       float64  `yaml:"input"`
	CachedInput *float64 `yaml:"cached_input"` // input tokens served from the platform's cache; default Input
	Output      float64  `yaml:"output"`
}

// Pricing names the currency prices and spend budgets are given in.
type Pricing struct {
	Currency string `yaml:"currency"` // default "USD"; a label only, nothing is converted
}

// UsageHistory is the per-day usage record kept in the store for /admin/usage/history.
type UsageHistory struct {
	Enabled   *bool         `yaml:"enabled"`   // default true
	Retention time.Duration `yaml:"retention"` // how long a day's rows are kept; default 2160h (90 days)
	// HourlyRetention is how long the per-hour rows are kept; default 168h (7 days).
	HourlyRetention time.Duration `yaml:"hourly_retention"`
	// DistinctValues caps the distinct end users, and distinct values of each tag key, a
	// team's day records by name; the rest share one "(other)" row. Default 1000.
	DistinctValues int `yaml:"distinct_values"`
}

// HistoryEnabled reports whether usage history is recorded.
func (c *Config) HistoryEnabled() bool {
	return c.UsageHistory.Enabled == nil || *c.UsageHistory.Enabled
}

// Tracing holds what the OTEL_* environment variables do not say. Whether traces are exported,
// where, and how they are sampled and batched come from the standard variables alone.
type Tracing struct {
	// CaptureContent records prompts and completions as span events (default false; the
	// environment variable OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true also
	// turns it on).
	CaptureContent bool `yaml:"capture_content"`
	// ContentMaxBytes caps each recorded prompt or completion; 0 means 4096.
	ContentMaxBytes int `yaml:"content_max_bytes"`
}
