// Package sidecar serves the platform's REST routes that the application beside modelgate
// may use: model runs, the balance (cached briefly), asset upload and asset reads. Each
// route calls one fixed platform path with parameters rebuilt from validated values, and
// answers in the platform's envelope.
//
// The server in front (package proxy) authenticates and admits the caller, then hands the
// routes a Call: who asks, which settings apply, and Keys, through which every platform key
// is lent. The routes never see a key pool; they ask Keys to send a call (retries and
// failover are the server's policy) or to lend one key for an upload, and they report what
// happened in the Call for the access log.
package sidecar

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/platform"
)

// Prefix is where the platform's open API routes live, locally and upstream.
const Prefix = "/api/open/v2/"

// IsPath reports whether p is below the sidecar routes, so unknown paths there get a 404
// in the platform's envelope.
func IsPath(p string) bool { return strings.HasPrefix(p, Prefix) }

// The only platform paths modelgate ever calls for the sidecar. Ids are appended to
// AssetsPath after validation and escaping; nothing from the request is used otherwise.
const (
	ModelRunInfoPath = "/api/open/v2/model-runs/info"
	ModelRunListPath = "/api/open/v2/model-runs/list"
	BalancePath      = "/api/open/v2/balance/info"
	AssetsPath       = "/api/open/v2/assets"
)

// Settings are the config values the routes read, taken from the config serving the
// request (they may change on reload).
type Settings struct {
	RequestTimeout    time.Duration // bound on one call to the platform, retries included
	BalanceCacheTTL   time.Duration // 0: the balance is not cached
	MaxUploadBytes    int64         // largest asset file part
	UploadIdleTimeout time.Duration // 0: an upload may stall for ever
}

// Call is one admitted request as the routes see it, and what they report back about it.
type Call struct {
	RequestID string
	Route     string // the route pattern, for log lines
	Team      string
	// Shared is true when modelgate holds the platform keys (keys mode): assets are then
	// checked for ownership, and the platform refusing a key is modelgate's credential
	// failing, not the caller's. False when callers bring their own keys (passthrough).
	Shared   bool
	Keys     Keys
	Settings Settings

	// Filled in by the routes for the access log and metrics.
	ErrCode     string // the envelope code of a failed answer
	UpstreamErr string // the kind of upstream failure, a bounded word
	ClientGone  bool   // the client left before the answer
}

// Keys lends the platform keys one caller's calls go with. The server implements it over
// its key pools (or the caller's own key in passthrough), keeping their state.
type Keys interface {
	// Send sends one call built by build with the key it is handed, retrying and moving to
	// another key as the server's policy allows, within ctx's deadline. prefer, when not
	// "", is the fingerprint of the key to ask with while the team still holds it.
	Send(ctx context.Context, prefer string, build func(ctx context.Context, key string) (*http.Request, error)) (*http.Response, error)
	// Lease lends one key for a call that cannot be sent twice (a streamed upload). The
	// returned context is the one to send with.
	Lease(ctx context.Context) (context.Context, Lease)
	// Quoted reports whether b contains any platform key this caller's calls may go with.
	Quoted(b []byte) bool
	// Caller is the caller's own platform key, for per-key caches (never kept as it is).
	Caller() string
}

// Lease is one platform key lent for one call.
type Lease interface {
	Key() string
	// Fingerprint names the key in owner records; "" for a caller's own key.
	Fingerprint() string
	// Done reports the call's outcome (its answer or transport error) and ends the lease.
	Done(resp *http.Response, err error)
}

// Deps are what the routes are built from.
type Deps struct {
	Platform *platform.Client
	Owners   Owners
	Log      *slog.Logger
	Now      func() time.Time // clock of the balance cache and asset expiry; nil is time.Now
}

// Routes are the sidecar routes and what they keep between requests.
type Routes struct {
	platform *platform.Client
	owners   Owners
	log      *slog.Logger
	now      func() time.Time
	balance  *balanceCache
}

// New builds the routes.
func New(d Deps) *Routes {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	return &Routes{platform: d.Platform, owners: d.Owners, log: d.Log, now: d.Now, balance: newBalanceCache(d.Now)}
}

// Register adds the routes to g, a group at /api/open/v2 whose middleware has already
// authenticated and admitted the caller and stored its Call with WithCall.
func (r *Routes) Register(g *gin.RouterGroup) {
	g.GET("/model-runs/info", r.modelRunInfo)
	g.GET("/model-runs/list", r.modelRunList)
	g.GET("/balance/info", r.balanceInfo)
	g.POST("/assets", r.uploadAsset)
	g.GET("/assets/:asset_id", r.getAsset)
}

const callKey = "modelgate.sidecar.call"

// WithCall hands the routes the request's Call.
func WithCall(c *gin.Context, call *Call) { c.Set(callKey, call) }

func callOf(c *gin.Context) *Call { return c.MustGet(callKey).(*Call) }

// Envelope renders the platform's envelope with no data.
func Envelope(code int, msg string) []byte {
	b, _ := json.Marshal(platform.Envelope{Code: code, Msg: msg}) // plain strings cannot fail
	return b
}

// abort answers with the platform's envelope and stops the handler chain.
func abort(c *gin.Context, status, code int, msg string) {
	callOf(c).ErrCode = strconv.Itoa(code)
	c.Data(status, "application/json", Envelope(code, msg))
	c.Abort()
}
