// Package auth turns an Authorization header into the Principal a request runs as.
//
// Header rules (decided here; OpenAI SDKs send exactly "Bearer <key>"):
//   - the scheme is "Bearer", matched case-insensitively, followed by exactly one space;
//   - the token is taken as is: nothing is trimmed, so a key with a trailing space, tab or NUL
//     is malformed rather than silently accepted (net/http already strips leading and trailing
//     blanks from header values before they reach us);
//   - the token is 1-4096 bytes of printable ASCII without spaces (config.TokenProblem).
//
// Keys are held only as SHA-256 digests; a presented token is hashed first and the bytes
// from the header never reach anything but the hash function and the token-syntax check.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"modelgate/config"
)

// Errors from Authenticate. All of them mean 401; they differ only so the answer can say
// what to fix. None of them carries any part of the presented token.
var (
	ErrMissing   = errors.New("no bearer token: send Authorization: Bearer <key>")
	ErrMalformed = errors.New("malformed bearer token")
	ErrUnknown   = errors.New("unknown API key")
)

// Mode is how callers are authenticated, fixed by the config.
type Mode int

const (
	// ModeKeys: callers present local keys, swapped for their team's platform key.
	ModeKeys Mode = iota
	// ModePassthrough: no team keys configured; the caller's token is the platform key.
	ModePassthrough
)

func (m Mode) String() string {
	if m == ModePassthrough {
		return "passthrough"
	}
	return "keys"
}

// PassthroughKeyName is Principal.KeyName for every passthrough caller.
const PassthroughKeyName = "passthrough"

// Principal is who a request runs as. Authenticate returns a fresh copy each time, but its
// Models slice is shared: treat it as read-only.
type Principal struct {
	Team        string // "" in passthrough
	KeyName     string // PassthroughKeyName in passthrough
	ScopeID     string // limiter scope of the key: "key:<team>/<key>" or "caller:<sha256 hex>"
	TeamScopeID string // "team:<name>"; "" in passthrough
	PlatformKey Secret // what goes upstream: the team's platform key, or the caller's own token
	KeyLimits   config.Limits
	TeamLimits  config.Limits
	Models      []string // client-facing model ids the team may use; nil = all
	// KeyModels is the key's own narrower list (teams[].keys[].models, or an issued key's);
	// nil = the team's. Both lists apply, so a key never reaches a model its team lost.
	KeyModels []string
	Shadow    bool // team in shadow mode: refusals are reported, not enforced
	// Tags are the key's default request tags (teams[].keys[].tags, or an issued key's);
	// nil when none. Read-only, shared.
	Tags map[string]string
	// EndUserLimits bound each end user of the team (teams[].end_user_limits).
	EndUserLimits config.EndUserLimits
	// Runtime: the team was created through the admin API; its calls go with the config's
	// default platform keys (upstream's runtime pool).
	Runtime bool
}

// AllowsModel reports whether the allow-lists admit the client-facing model id: the team's
// and the key's. It is the one model check; every route and fallback asks it.
func (p *Principal) AllowsModel(id string) bool {
	return (p.Models == nil || slices.Contains(p.Models, id)) &&
		(p.KeyModels == nil || slices.Contains(p.KeyModels, id))
}

// Format keeps the platform key redacted even where fmt skips a field's own methods (fmt
// prints a struct behind a bad verb, e.g. %s of a struct holding a *Principal, without them).
func (p Principal) Format(f fmt.State, verb rune) {
	type plain Principal // same fields, no methods: no recursion into Format
	switch {
	case verb == 'v' && f.Flag('#'):
		fmt.Fprintf(f, "%#v", plain(p))
	case f.Flag('+'):
		fmt.Fprintf(f, "%+v", plain(p))
	default:
		fmt.Fprintf(f, "%v", plain(p))
	}
}

// LogValue lets a Principal be logged directly; it carries names only, never credentials.
func (p *Principal) LogValue() slog.Value {
	return slog.GroupValue(slog.String("team", p.Team), slog.String("key", p.KeyName))
}

type digest = [sha256.Size]byte

type entry struct {
	digest    digest
	principal Principal
}

// Authenticator checks bearer tokens against the configured keys. It is immutable after New
// and safe for concurrent use; a config reload builds a new one.
type Authenticator struct {
	mode        Mode
	keys        map[digest]*entry
	admin       map[digest]digest
	passthrough config.Limits
	// teams holds each team's principal without a key, for keys issued at run time.
	teams  map[string]*Principal
	issued *Issued
	// runtimeKey is the platform key of teams created at run time ("": none can be served).
	runtimeKey Secret
}

// New builds an Authenticator from a validated config. It re-checks what it relies on, so a
// config changed in code after loading cannot yield a gateway that fails open.
func New(cfg *config.Config) (*Authenticator, error) {
	if cfg == nil {
		return nil, errors.New("auth: nil config")
	}
	a := &Authenticator{
		mode:        ModePassthrough,
		keys:        map[digest]*entry{},
		admin:       map[digest]digest{},
		passthrough: cfg.Limits,
		teams:       map[string]*Principal{},
		runtimeKey:  defaultPlatformKey(cfg),
	}
	for i, t := range cfg.Teams {
		// A team with a pool of keys calls the platform through proxy's pool; the principal
		// carries the first key for code that needs one credential per team.
		pool := cfg.TeamPlatformKeys(&cfg.Teams[i])
		platformKey := ""
		if len(pool) > 0 {
			platformKey = pool[0]
		}
		if len(t.Keys) > 0 {
			a.mode = ModeKeys
			if len(pool) == 0 {
				pool = []string{""}
			}
			for _, k := range pool {
				if p := config.TokenProblem(k); p != "" {
					return nil, fmt.Errorf("auth: teams[%d] (%s): platform key %s: set upstream.api_key or upstream_api_key", i, t.Name, p)
				}
			}
		}
		var models []string
		if len(t.Models) > 0 {
			models = slices.Clone(t.Models)
		}
		if len(t.Keys) > 0 {
			a.teams[t.Name] = &Principal{Team: t.Name, TeamScopeID: "team:" + t.Name, PlatformKey: Secret(platformKey),
				TeamLimits: t.Limits, Models: models, Shadow: t.Mode == "shadow", EndUserLimits: t.EndUserLimits}
		}
		for j, k := range t.Keys {
			d, err := keyDigest(k)
			if err != nil {
				return nil, fmt.Errorf("auth: teams[%d].keys[%d] (%s/%s): %w", i, j, t.Name, k.Name, err)
			}
			if _, dup := a.keys[d]; dup {
				return nil, fmt.Errorf("auth: teams[%d].keys[%d] (%s/%s): the same key is configured twice", i, j, t.Name, k.Name)
			}
			a.keys[d] = &entry{digest: d, principal: Principal{
				Team:          t.Name,
				KeyName:       k.Name,
				ScopeID:       "key:" + t.Name + "/" + k.Name,
				TeamScopeID:   "team:" + t.Name,
				PlatformKey:   Secret(platformKey),
				KeyLimits:     k.Limits,
				TeamLimits:    t.Limits,
				Models:        models,
				KeyModels:     keyModels(k.Models),
				Shadow:        t.Mode == "shadow",
				Tags:          keyTags(k.Tags),
				EndUserLimits: t.EndUserLimits,
			}}
		}
	}
	for i, k := range cfg.AdminKeys {
		if p := config.TokenProblem(k); p != "" {
			return nil, fmt.Errorf("auth: admin_keys[%d]: %s", i, p)
		}
		d := sha256.Sum256([]byte(k))
		if _, clash := a.keys[d]; clash {
			return nil, fmt.Errorf("auth: admin_keys[%d] is also a team key", i)
		}
		a.admin[d] = d
	}
	return a, nil
}

// keyTags is a key's default tags as a Principal holds them: a copy, nil when none.
func keyTags(tags map[string]string) map[string]string {
	if len(tags) == 0 {
		return nil
	}
	return maps.Clone(tags)
}

// keyModels is a key's own list as a Principal holds it: nil when the key has none, so that
// an empty list never reads as "no model at all".
func keyModels(models []string) []string {
	if len(models) == 0 {
		return nil
	}
	return slices.Clone(models)
}

func keyDigest(k config.Key) (digest, error) {
	var d digest
	switch {
	case k.Key != "" && k.KeySHA256 != "":
		return d, errors.New("set key or key_sha256, not both")
	case k.Key != "":
		if p := config.TokenProblem(k.Key); p != "" {
			return d, errors.New("key " + p)
		}
		return sha256.Sum256([]byte(k.Key)), nil
	case len(k.KeySHA256) != 2*sha256.Size:
		return d, errors.New("key_sha256 must be 64 hex digits")
	}
	if _, err := hex.Decode(d[:], []byte(k.KeySHA256)); err != nil {
		return d, errors.New("key_sha256 must be 64 hex digits")
	}
	return d, nil
}

// Mode reports whether callers use local keys or their own platform keys.
func (a *Authenticator) Mode() Mode { return a.mode }

// Authenticate resolves an Authorization header value to a Principal. Admin keys are not
// data-plane keys: presenting one here is ErrUnknown, in either mode.
func (a *Authenticator) Authenticate(authorizationHeader string) (*Principal, error) {
	token, err := bearerToken(authorizationHeader)
	if err != nil {
		return nil, err
	}
	d := hashToken(token)
	if a.isAdminDigest(d) {
		return nil, ErrUnknown
	}
	if a.mode == ModePassthrough {
		return &Principal{
			KeyName:     PassthroughKeyName,
			ScopeID:     "caller:" + hex.EncodeToString(d[:]),
			PlatformKey: Secret(token),
			KeyLimits:   a.passthrough,
		}, nil
	}
	e, ok := a.keys[d]
	// The map finds the candidate by digest; the final equality is constant-time. What the
	// lookup's own comparison could leak is about the digest, which a caller cannot steer.
	if !ok || subtle.ConstantTimeCompare(e.digest[:], d[:]) != 1 {
		if p, ok := a.issuedPrincipal(d); ok {
			return p, nil
		}
		return nil, ErrUnknown
	}
	p := e.principal
	return &p, nil
}

// IsAdmin reports whether the header carries one of the configured admin keys.
func (a *Authenticator) IsAdmin(authorizationHeader string) bool {
	token, err := bearerToken(authorizationHeader)
	if err != nil {
		return false
	}
	return a.isAdminDigest(hashToken(token))
}

// AdminFingerprint names the admin key the header carries without revealing it: the first
// 8 hex digits of its sha256 (what `sha256sum` prints for the key, cut to 8), as platform
// keys are named in logs. "" when the header carries no admin key.
func (a *Authenticator) AdminFingerprint(authorizationHeader string) string {
	token, err := bearerToken(authorizationHeader)
	if err != nil {
		return ""
	}
	d := hashToken(token)
	if !a.isAdminDigest(d) {
		return ""
	}
	return hex.EncodeToString(d[:4])
}

// hashToken is sha256.Sum256([]byte(token)) without the heap copy Go makes for strings over
// 32 bytes, for tokens up to 128 bytes (real keys are usually 40-100).
func hashToken(token string) digest {
	var buf [128]byte
	if len(token) <= len(buf) {
		n := copy(buf[:], token)
		return sha256.Sum256(buf[:n])
	}
	return sha256.Sum256([]byte(token))
}

func (a *Authenticator) isAdminDigest(d digest) bool {
	stored, ok := a.admin[d]
	return ok && subtle.ConstantTimeCompare(stored[:], d[:]) == 1
}

const scheme = "bearer "

// maxHeaderLen lets an over-long header be refused before its bytes are scanned.
const maxHeaderLen = len(scheme) + config.MaxTokenBytes

// bearerToken extracts the token from "Bearer <token>" under the package's header rules.
func bearerToken(h string) (string, error) {
	if h == "" {
		return "", ErrMissing
	}
	if len(h) < len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", ErrMissing
	}
	if len(h) > maxHeaderLen {
		return "", ErrMalformed
	}
	token := h[len(scheme):]
	if config.TokenProblem(token) != "" {
		return "", ErrMalformed
	}
	return token, nil
}
