package apierr

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"modelgate/translate"
)

// The Gemini API's routes (issue 43) answer in Google's shape,
// {"error":{"code":N,"message":"...","status":"INVALID_ARGUMENT"}}, and their clients may
// send their key in the query string (?key=), which must never reach a log line, a trace or
// an error message: MarkGoogle, first in their chain, names the shape and takes the key out
// of the request's URL before anything else reads it.

// googleKeyParam is the query parameter Google's REST API takes a key in.
const googleKeyParam = "key"

// queryKeyKey is the gin context key of the key a Gemini client sent as ?key=.
const queryKeyKey = "modelgate.querykey"

// MarkGoogle runs first on the Gemini routes: their error shape, and their query key moved
// from the URL into the context (QueryKey), so alt=sse and the other parameters stay
// readable and the key is nowhere in the URL.
func MarkGoogle(c *gin.Context) {
	Mark(c, Google)
	key, rest, found := CutQueryKey(c.Request.URL.RawQuery)
	if !found {
		return
	}
	if key != "" {
		c.Set(queryKeyKey, key)
	}
	c.Request.URL.RawQuery = rest
	c.Request.RequestURI = c.Request.URL.RequestURI()
}

// QueryKey is the key a Gemini client sent as ?key=, "" when none.
func QueryKey(c *gin.Context) string { return c.GetString(queryKeyKey) }

// CutQueryKey takes the key parameter out of a raw query: its first value and the query
// without it. A query whose key= pair is malformed (a bad escape) is left with none of its
// parameters, rather than one that may hold the key.
func CutQueryKey(raw string) (key, rest string, found bool) {
	if !strings.Contains(raw, googleKeyParam) && !strings.Contains(raw, "%") {
		return "", raw, false // the common case: nothing parsed (%6bey is key too)
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return "", "", true
	}
	if _, ok := q[googleKeyParam]; !ok {
		return "", raw, false
	}
	key = q.Get(googleKeyParam)
	q.Del(googleKeyParam)
	return key, q.Encode(), true
}

// IsGoogleClient reports whether a request on a path Gemini shares with OpenAI (GET
// /v1/models) comes from a Gemini client: the SDKs send x-goog-api-client with every call,
// and their key as x-goog-api-key.
func IsGoogleClient(h http.Header) bool {
	return len(h["X-Goog-Api-Key"]) > 0 || len(h["X-Goog-Api-Client"]) > 0
}

// abortGoogle answers with Google's error object; code is what logs and metrics record, as
// on the other routes.
func abortGoogle(c *gin.Context, status int, code, msg string) {
	PeekLimits(c)
	refused(c, code)
	c.Data(status, "application/json", translate.GeminiError(status, msg))
	c.Abort()
}
