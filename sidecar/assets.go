package sidecar

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/platform"
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
	abort(c, http.StatusNotFound, platform.CodeBusiness, "asset not found")
}

// getAsset serves GET assets/{asset_id}. With shared platform keys the platform cannot tell
// teams apart, so modelgate only asks it about assets the calling team uploaded.
func (r *Routes) getAsset(c *gin.Context) {
	id := c.Param("asset_id")
	if !ValidID(id) {
		abort(c, http.StatusBadRequest, platform.CodeBusiness, "invalid asset_id: expected 1 to 128 letters, digits, '_' or '-'")
		return
	}
	if !noQuery(c) {
		return
	}
	call := callOf(c)
	path := AssetsPath + "/" + url.PathEscape(id)
	if !call.Shared {
		r.fetch(c.Request.Context(), call, "", path, nil).write(c)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), ownerStoreTimeout)
	owner, ok, err := r.owners.Owner(ctx, id)
	cancel()
	if err != nil {
		r.log.Error("asset ownership lookup failed", "request_id", call.RequestID, "error", err)
		abort(c, http.StatusServiceUnavailable, platform.CodeFailure, "asset ownership could not be checked; try again shortly")
		return
	}
	if !ok || owner.Team != call.Team {
		assetNotFound(c)
		return
	}
	// The platform may show an asset only to the key that uploaded it: ask with that key
	// while the team still has it, with the team's pool otherwise.
	r.fetch(c.Request.Context(), call, owner.KeyFingerprint, path, nil).write(c)
}

// recordOwner notes which team (and which of its keys) uploaded the asset in a successful
// upload answer, until the asset expires. It returns a reply to send instead when that is
// not possible: an asset the team could not read back would be worse than a failed upload
// it can retry.
func (r *Routes) recordOwner(ctx context.Context, call *Call, keyFingerprint string, body []byte, ttl time.Duration) (reply, bool) {
	f := gjson.GetManyBytes(body, "data.asset_id", "data.expires_at")
	id, expires := f[0], f[1]
	if id.Type != gjson.String || !ValidID(id.Str) {
		r.log.Error("platform upload answer has no usable asset_id", "request_id", call.RequestID)
		out := envelopeReply(http.StatusBadGateway, platform.CodeSystem, "the platform returned an invalid response")
		out.upstreamEr = "invalid_body"
		return out, false
	}
	now := r.now()
	until := now.Add(ttl)
	if expires.Type == gjson.String {
		if t, ok := parseAssetTime(expires.Str); ok && t.After(now) {
			until = t
		}
	}
	// The record's lifetime crosses to the store as a duration on the injected clock (see
	// docs/architecture.md, "Time").
	keep := min(until.Sub(now), maxOwnershipTTL)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ownerStoreTimeout)
	defer cancel()
	owner := Owner{Team: call.Team, KeyFingerprint: keyFingerprint}
	if err := r.owners.PutOwner(ctx, id.Str, owner, keep); err != nil {
		r.log.Error("asset ownership could not be recorded", "request_id", call.RequestID, "error", err)
		return envelopeReply(http.StatusServiceUnavailable, platform.CodeSystem, "the upload could not be recorded; try again shortly"), false
	}
	return reply{}, true
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
