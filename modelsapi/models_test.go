package modelsapi

import (
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/apierr"
	"modelgate/reqlog"
)

// TestMain puts gin in release mode once, as main does.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(m.Run())
}

// record is the request's record as apierr reaches it.
type record struct{ rec reqlog.Record }

func (r *record) LogRecord() *reqlog.Record { return &r.rec }
func (r *record) PeekLimits(*gin.Context)   {}

// serve runs one request through the catalog's routes, as an Anthropic SDK when anthropic,
// and returns the answer and the route the request's record names.
func serve(path string, anthropic bool) (*httptest.ResponseRecorder, string) {
	rec := &record{}
	allowed := []string{"small", "big"}
	m := &Catalog{
		Allowed: func(*gin.Context) []string { return allowed },
		Allows:  func(_ *gin.Context, id string) bool { return slices.Contains(allowed, id) },
	}
	w := httptest.NewRecorder()
	e := gin.New()
	e.Use(func(c *gin.Context) { c.Set(apierr.RequestKey, rec) })
	if anthropic {
		e.Use(func(c *gin.Context) { apierr.Mark(c, apierr.Anthropic) })
	}
	e.GET("/v1/models", m.List)
	e.GET("/v1/models/:id", m.Get)
	e.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w, rec.rec.Route
}

func TestModelRoutes(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		anthropic  bool
		status     int
		check      func(b string) bool
	}{
		{"openai_list", "/v1/models", false, 200, func(b string) bool {
			return gjson.Get(b, "object").Str == "list" && gjson.Get(b, "data.#.id").Raw == `["small","big"]` && gjson.Get(b, "data.0.owned_by").Str == "modelgate"
		}},
		{"anthropic_list", "/v1/models", true, 200, func(b string) bool {
			return gjson.Get(b, "data.#.type").Raw == `["model","model"]` && gjson.Get(b, "first_id").Str == "small" && gjson.Get(b, "last_id").Str == "big" && !gjson.Get(b, "has_more").Bool()
		}},
		{"openai_one", "/v1/models/big", false, 200, func(b string) bool { return gjson.Get(b, "id").Str == "big" && gjson.Get(b, "object").Str == "model" }},
		{"anthropic_one", "/v1/models/big", true, 200, func(b string) bool {
			return gjson.Get(b, "type").Str == "model" && gjson.Get(b, "created_at").Str == "2025-08-01T00:00:00Z"
		}},
		{"openai_unknown", "/v1/models/secret", false, 404, func(b string) bool { return gjson.Get(b, "error.code").Str == "model_not_found" }},
		{"anthropic_unknown", "/v1/models/secret", true, 404, func(b string) bool { return gjson.Get(b, "error.type").Str == "not_found_error" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, route := serve(tc.path, tc.anthropic)
			if w.Code != tc.status || !tc.check(w.Body.String()) {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if want := map[bool]string{true: "/v1/models", false: "/v1/models/{id}"}[tc.path == "/v1/models"]; route != want {
				t.Errorf("route %q, want %q", route, want)
			}
		})
	}
}
