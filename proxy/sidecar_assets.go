package proxy

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/platform"
	"modelgate/ratelimit"
)

// ownerStoreTimeout bounds one read or write of the asset ownership record.
const ownerStoreTimeout = 5 * time.Second

// maxOwnershipTTL caps how long an ownership record is kept, whatever expiry the platform
// reports for an asset; temporary assets live hours, not years.
const maxOwnershipTTL = 366 * 24 * time.Hour

// defaultAssetTTL is the platform's default asset lifetime (ttl_hours 48).
const defaultAssetTTL = 48 * time.Hour

// assetNotFound is the one answer for an asset the caller may not see, whether it does not
// exist or belongs to another team, so ids cannot be probed across teams.
func assetNotFound(c *gin.Context) {
	abortEnvelope(c, http.StatusNotFound, platform.CodeBusiness, "asset not found")
}

// getAsset serves GET assets/{asset_id}. With shared platform keys the platform cannot tell
// teams apart, so modelgate only asks it about assets the calling team uploaded.
func (sc *sidecar) getAsset(c *gin.Context) {
	id := c.Param("asset_id")
	if !validID(id) {
		abortEnvelope(c, http.StatusBadRequest, platform.CodeBusiness, "invalid asset_id: expected 1 to 128 letters, digits, '_' or '-'")
		return
	}
	if !noQuery(c) {
		return
	}
	st, p, ri := requestState(c), principal(c), info(c)
	if keysMode(st) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), ownerStoreTimeout)
		owner, ok, err := sc.s.limiter.Owner(ctx, id)
		cancel()
		if err != nil {
			sc.s.log.Error("asset ownership lookup failed", "request_id", ri.requestID, "error", err)
			abortEnvelope(c, http.StatusServiceUnavailable, platform.CodeFailure, "asset ownership could not be checked; try again shortly")
			return
		}
		if !ok || owner.Team != p.Team {
			assetNotFound(c)
			return
		}
		// The platform may show an asset only to the key that uploaded it: ask with that key
		// while the team still has it, with the team's pool otherwise.
		keys := keysFor(st, p)
		if keys.pool != nil {
			keys.pin = keys.pool.byFingerprint(owner.KeyFingerprint)
		}
		sc.fetchWith(c.Request.Context(), st, p, ri, keys, assetsPath+"/"+url.PathEscape(id), nil).write(c)
		return
	}
	sc.fetchPlatform(c.Request.Context(), st, p, ri, assetsPath+"/"+url.PathEscape(id), nil).write(c)
}

// recordOwner notes which team (and which of its keys) uploaded the asset in a successful upload answer, until the
// asset expires. It returns a reply to send instead when that is not possible: an asset the
// team could not read back would be worse than a failed upload it can retry.
func (sc *sidecar) recordOwner(ctx context.Context, team, keyFingerprint string, ri *requestInfo, body []byte, ttl time.Duration) (sidecarReply, bool) {
	f := gjson.GetManyBytes(body, "data.asset_id", "data.expires_at")
	id, expires := f[0], f[1]
	if id.Type != gjson.String || !validID(id.Str) {
		sc.s.log.Error("platform upload answer has no usable asset_id", "request_id", ri.requestID)
		r := envelopeReply(http.StatusBadGateway, platform.CodeSystem, "the platform returned an invalid response")
		r.upstreamEr = "invalid_body"
		return r, false
	}
	now := sc.now()
	until := now.Add(ttl)
	if expires.Type == gjson.String {
		if t, ok := parseAssetTime(expires.Str); ok && t.After(now) {
			until = t
		}
	}
	until = minTime(until, now.Add(maxOwnershipTTL))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ownerStoreTimeout)
	defer cancel()
	owner := ratelimit.AssetOwner{Team: team, KeyFingerprint: keyFingerprint}
	if err := sc.s.limiter.PutOwner(ctx, id.Str, owner, until); err != nil {
		sc.s.log.Error("asset ownership could not be recorded", "request_id", ri.requestID, "error", err)
		return envelopeReply(http.StatusServiceUnavailable, platform.CodeSystem, "the upload could not be recorded; try again shortly"), false
	}
	return sidecarReply{}, true
}

// parseAssetTime reads expires_at, which the specification calls a date-time without
// fixing the form: RFC 3339, or the platform's "YYYY-MM-DD hh:mm:ss" (taken as UTC).
func parseAssetTime(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, time.DateTime} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
