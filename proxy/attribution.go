package proxy

import (
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"

	"modelgate/reqlog"
	"modelgate/translate"
)

// attribute sets the request's end user and tags (issue 28) from what the dialect's check
// read: user, the end user the body names (a view of the body or a copy), and metadata, the
// body's metadata object (raw JSON, "" when none) already within OpenAI's bounds. A tags
// header past the bounds or malformed is refused (400, in the route's shape) and it returns
// false. The tags kept are the usage.tag_keys, each from the header, else the metadata,
// else the key's default tags; none without tag_keys. What is recorded is made a label
// (reqlog.Attribution): bounded, copied, safe as a history key part, the end user and the
// tags in one allocation.
//
// Out of line, so its work takes no room in the frames under a stream.
//
//go:noinline
func attribute(c *gin.Context, st *state, user, metadata string) bool {
	var fromHeader [reqlog.MaxTags]reqlog.Tag // the header holds at most MaxTags pairs: no allocation
	header, terr := reqlog.HeaderTags(fromHeader[:0], c.Request.Header)
	if terr != nil {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_tags", "x-modelgate-tags", terr.Msg)
		return false
	}
	ri := info(c)
	if len(st.tagKeys) == 0 {
		ri.EndUser, _ = reqlog.Attribution(user, nil, nil, nil, nil)
		return true
	}
	var kept [reqlog.MaxTags]reqlog.Tag // metadata holds at most MaxTags pairs: no allocation
	body := kept[:0]
	translate.EachMetadataString(metadata, func(k, v string) bool {
		if slices.Contains(st.tagKeys, k) && len(body) < len(kept) {
			body = append(body, reqlog.Tag{Key: k, Value: v})
		}
		return true
	})
	var defaults map[string]string
	if p := ri.principal; p != nil { // authenticate set it, as it set principalKey
		defaults = p.Tags
	}
	ri.EndUser, ri.Tags = reqlog.Attribution(user, st.tagKeys, header, body, defaults)
	return true
}

// attributeIdentity is attribute for a translated dialect, from what its parse read; the
// metadata, once read, is dropped, so a stream's minutes do not hold it. Out of line and
// taking a pointer, so the check that calls it keeps a small frame under the parse
// (TestOpenStreamStack).
//
//go:noinline
func attributeIdentity(c *gin.Context, st *state, id *translate.Identity) bool {
	ok := attribute(c, st, id.EndUser(), id.Metadata)
	id.Metadata = ""
	return ok
}
