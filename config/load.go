package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// maxFileBytes bounds what Load reads; a real config is a few kilobytes.
const maxFileBytes = 4 << 20

// Load reads, expands, validates and completes the config at path, taking ${VAR}s from the
// process environment.
func Load(path string) (*Config, error) {
	data, err := readBounded(path, maxFileBytes)
	if errors.Is(err, errTooLarge) {
		return nil, &Error{File: path, Msg: fmt.Sprintf("file is larger than %d bytes", maxFileBytes)}
	}
	if err != nil {
		return nil, err
	}
	return Parse(data, path, os.LookupEnv)
}

// errTooLarge is readBounded's answer for a file over its bound.
var errTooLarge = errors.New("file too large")

// readBounded reads the file at path, refusing one over most bytes without reading past them:
// a path pointed at a device or a huge file must not fill memory.
func readBounded(path string, most int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, most+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(data)) > most {
		return nil, errTooLarge
	}
	return data, nil
}

// Parse is Load for bytes already in hand. source names the file in error messages; getenv
// resolves ${NAME} (os.LookupEnv in production, a map in tests).
func Parse(data []byte, source string, getenv func(string) (string, bool)) (*Config, error) {
	if getenv == nil {
		getenv = func(string) (string, bool) { return "", false }
	}
	root, err := parseDocument(data, source)
	if err != nil {
		return nil, err
	}
	cfg := &Config{}
	d := newDecoder(source, getenv)
	if root != nil {
		d.value(root, reflect.ValueOf(cfg).Elem(), "")
	}
	d.reportUnset()
	// Validation runs even when decoding failed, on what did decode, so that one run of
	// check reports every problem; what a failed value would make it say is left out.
	if errs := append(d.errs, d.relevant(validate(cfg, d))...); len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	keepAlive := cfg.Upstream.KeepAliveInterval
	applyDefaults(cfg)
	if _, set := d.lines["upstream.keepalive_interval"]; set {
		// Written in the file: an explicit 0s turns keep-alives off, so it must survive
		// applyDefaults, which cannot tell it from an absent key.
		cfg.Upstream.KeepAliveInterval = keepAlive
	}
	return cfg, nil
}

// Default is the config used when there is no file: passthrough mode with every default.
func Default() *Config {
	c := &Config{}
	applyDefaults(c)
	return c
}

// Validate checks a config built or changed in code (after flag overrides, in tests) with the
// same rules Parse applies; messages carry key paths but no line numbers.
func (c *Config) Validate() error {
	d := newDecoder("config", nil)
	return joinErrors(validate(c, d))
}

// KeysMode reports whether any team key is configured; otherwise callers' own tokens are
// forwarded upstream (passthrough).
func (c *Config) KeysMode() bool {
	for _, t := range c.Teams {
		if len(t.Keys) > 0 {
			return true
		}
	}
	return false
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseDocument returns the top-level node of the single YAML document in data, or nil for
// an empty file.
func parseDocument(data []byte, source string) (*yaml.Node, error) {
	masked, ok := maskRefs(data)
	if !ok {
		return nil, &Error{File: source, Msg: fmt.Sprintf("the file contains %q or %q, which modelgate reserves", envMarker, litMarker)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(masked))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(err, source, masked)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			return nil, syntaxError(err, source, nil)
		}
		return nil, &Error{File: source, Line: line, Msg: "only one YAML document is allowed (remove the extra ---)"}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	top := doc.Content[0]
	if isNull(top) {
		return nil, nil
	}
	if top.Kind != yaml.MappingNode {
		return nil, &Error{File: source, Line: top.Line, Msg: "want a mapping of keys at the top level, got " + kindName(top)}
	}
	return top, nil
}

// Defaults, applied after validation to values left unset (zero).
const (
	defaultListen                = "127.0.0.1:8080"
	defaultDialTimeout           = 5 * time.Second
	defaultResponseHeaderTimeout = 60 * time.Second
	defaultStreamIdleTimeout     = 5 * time.Minute
	defaultRequestTimeout        = 10 * time.Minute
	defaultMaxRetries            = 2
	defaultHealthInterval        = 15 * time.Second
	// Breakers: five failures in a minute is an upstream in trouble, not one unlucky call
	// (the retry policy and the key pool absorb those first); thirty seconds out is long
	// enough for an overloaded model to shed its queue and short enough that a blip costs
	// little. See docs/routing.md, "Circuit breakers".
	defaultBreakerFailures   = 5
	defaultBreakerWindow     = time.Minute
	defaultBreakerCooldown   = 30 * time.Second
	defaultStore             = "memory"
	defaultOnStoreError      = "allow"
	defaultDataPath          = "modelgate-data"
	defaultMaxOutputTokens   = 4096
	defaultMaxBodyBytes      = 32 << 20
	defaultMaxUploadBytes    = 100 * 1000 * 1000
	defaultDrainTimeout      = 30 * time.Second
	defaultReadHeaderTimeout = 10 * time.Second
	defaultBodyReadTimeout   = 30 * time.Second
	defaultMaxInflatingBytes = 64 << 20
	// defaultMaxInflightBodyBytes holds eight bodies of the default largest size at once, or
	// thousands of ordinary ones, and keeps a flood of stalled bodies far from a GiB.
	defaultMaxInflightBodyBytes ByteSize = 256 << 20
	defaultUploadIdleTimeout             = 2 * time.Minute
	// A WebSocket lives at most an hour, as the platform's peers close theirs; pings every
	// 30 s keep idle-cutting proxies from closing it and find a vanished client.
	defaultWebSocketMaxAge       = 60 * time.Minute
	defaultWebSocketPingInterval = 30 * time.Second
	defaultReasoningField        = "reasoning_content"
	defaultBalanceCacheTTL       = 5 * time.Second
	defaultTeamMode              = "enforce"
	// defaultKeepAliveInterval stays well under the 60 s idle limit common to nginx, cloud
	// load balancers and corporate proxies, which would otherwise cut a model that thinks.
	defaultKeepAliveInterval   = 15 * time.Second
	defaultResponsesStore      = "local"
	defaultResponsesStoreTTL   = 720 * time.Hour
	defaultResponsesMaxPerTeam = 10000
	defaultBackgroundMaxQueued = 16
)

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

func applyDefaults(c *Config) {
	setDefault(&c.Listen, defaultListen)
	u := &c.Upstream
	setDefault(&u.DialTimeout, defaultDialTimeout)
	setDefault(&u.ResponseHeaderTimeout, defaultResponseHeaderTimeout)
	setDefault(&u.StreamIdleTimeout, defaultStreamIdleTimeout)
	setDefault(&u.RequestTimeout, defaultRequestTimeout)
	setDefault(&u.HealthInterval, defaultHealthInterval)
	setDefault(&u.KeepAliveInterval, defaultKeepAliveInterval)
	if u.MaxRetries == nil {
		n := defaultMaxRetries
		u.MaxRetries = &n
	}
	if u.Breaker.Failures == nil {
		n := defaultBreakerFailures
		u.Breaker.Failures = &n
	}
	setDefault(&u.Breaker.Window, defaultBreakerWindow)
	setDefault(&u.Breaker.Cooldown, defaultBreakerCooldown)
	setDefault(&u.HTTP2, HTTP2Auto)
	for i := range c.Models {
		if c.Models[i].Routes == nil { // routes replace upstream: a default would clash with them
			setDefault(&c.Models[i].Upstream, c.Models[i].ID)
		}
	}
	r := &c.Ratelimit
	setDefault(&r.Store, defaultStore)
	setDefault(&r.OnStoreError, defaultOnStoreError)
	setDefault(&r.DataPath, defaultDataPath)
	setDefault(&r.DefaultMaxOutputTokens, defaultMaxOutputTokens)
	for i := range c.Teams {
		t := &c.Teams[i]
		setDefault(&t.Mode, defaultTeamMode)
		for j := range t.Keys {
			t.Keys[j].KeySHA256 = strings.ToLower(t.Keys[j].KeySHA256)
		}
	}
	s := &c.Server
	setDefault(&s.MaxBodyBytes, defaultMaxBodyBytes)
	setDefault(&s.MaxUploadBytes, defaultMaxUploadBytes)
	setDefault(&s.DrainTimeout, defaultDrainTimeout)
	setDefault(&s.ReadHeaderTimeout, defaultReadHeaderTimeout)
	setDefault(&s.UploadIdleTimeout, defaultUploadIdleTimeout)
	setDefault(&s.BodyReadTimeout, defaultBodyReadTimeout)
	setDefault(&s.MaxInflatingBytes, defaultMaxInflatingBytes)
	setDefault(&s.MaxInflightBodyBytes, defaultMaxInflightBodyBytes)
	setDefault(&s.WebSocketMaxAge, defaultWebSocketMaxAge)
	setDefault(&s.WebSocketPingInterval, defaultWebSocketPingInterval)
	setDefault(&c.Responses.Scope, "team")
	setDefault(&c.Translate.ReasoningField, defaultReasoningField)
	setDefault(&c.Translate.MaxN, DefaultMaxN)
	setDefault(&c.Translate.ServerTools, ServerToolsDrop)
	setDefault(&c.Sidecar.BalanceCacheTTL, defaultBalanceCacheTTL)
	setDefault(&c.Responses.Store, defaultResponsesStore)
	setDefault(&c.Responses.StoreTTL, defaultResponsesStoreTTL)
	setDefault(&c.Responses.StoreMaxPerTeam, defaultResponsesMaxPerTeam)
	setDefault(&c.Pricing.Currency, "USD")
	setDefault(&c.UsageHistory.Retention, 90*24*time.Hour)
	setDefault(&c.UsageHistory.HourlyRetention, 7*24*time.Hour)
	setDefault(&c.UsageHistory.DistinctValues, DefaultDistinctValues)
	setDefault(&c.Responses.BackgroundMaxQueuedPerTeam, defaultBackgroundMaxQueued)
	setDefault(&c.Alerts.CheckInterval, defaultAlertCheckInterval)
}
