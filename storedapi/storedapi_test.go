package storedapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/translate"
)

// TestMain puts gin in release mode once, as main does.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(m.Run())
}

// A page of input items is ordered, starts after the cursor (an unknown one: nothing), and
// says where it begins and ends and whether more follow.
func TestItemsPage(t *testing.T) {
	items := func() []json.RawMessage {
		return []json.RawMessage{[]byte(`{"id":"a"}`), []byte(`{"id":"b"}`), []byte(`{"id":"c"}`)}
	}
	for _, tc := range []struct {
		name, order, after string
		limit              int
		want               string // the ids, first_id, last_id, has_more
	}{
		{"desc_default", "desc", "", 20, "c,b,a c a false"},
		{"asc_limited", "asc", "", 2, "a,b a b true"},
		{"asc_after", "asc", "a", 20, "b,c b c false"},
		{"desc_after_last", "desc", "a", 20, " <nil> <nil> false"},
		{"unknown_cursor", "asc", "zz", 20, " <nil> <nil> false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := itemsPage(items(), tc.order, tc.after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, it := range gjson.GetBytes(b, "data").Array() {
				ids = append(ids, it.Get("id").Str)
			}
			str := func(r gjson.Result) string {
				if r.Type == gjson.Null {
					return "<nil>"
				}
				return r.Str
			}
			got := strings.Join(ids, ",") + " " + str(gjson.GetBytes(b, "first_id")) + " " + str(gjson.GetBytes(b, "last_id")) + " " + gjson.GetBytes(b, "has_more").Raw
			if !gjson.GetBytes(b, "data").IsArray() || got != tc.want {
				t.Errorf("page %s: %q, want %q", b, got, tc.want)
			}
		})
	}
}

func TestDeleteAll(t *testing.T) {
	out, err := DeleteAll([]byte(`{"a":1,"b":2,"a":3}`), "a")
	if err != nil || gjson.GetBytes(out, "a").Exists() || gjson.GetBytes(out, "b").Int() != 2 {
		t.Fatalf("%s, %v", out, err)
	}
}

// Asked reads store and previous_response_id, and refuses either of the wrong type in the
// route's shape.
func TestAsked(t *testing.T) {
	for _, tc := range []struct {
		body      string
		ok        bool
		keep      bool
		continued bool
		param     string
	}{
		{`{"input":"x"}`, true, true, false, ""},
		{`{"store":false,"previous_response_id":"resp_1"}`, true, false, true, ""},
		{`{"store":null,"previous_response_id":null}`, true, true, false, ""},
		{`{"store":"yes"}`, false, false, false, "store"},
		{`{"previous_response_id":5}`, false, false, false, "previous_response_id"},
	} {
		var f translate.ResponsesFields
		translate.ScanResponsesFields([]byte(tc.body), &f)
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest(http.MethodPost, "/v1/responses", nil)
		a, ok := Asked(c, &f)
		if ok != tc.ok || (ok && (a.Keep != tc.keep || a.Continued != tc.continued)) {
			t.Errorf("%s: %+v, %v", tc.body, a, ok)
		}
		if !ok && (w.Code != http.StatusBadRequest || gjson.Get(w.Body.String(), "error.param").Str != tc.param) {
			t.Errorf("%s: refused with %d %s", tc.body, w.Code, w.Body)
		}
	}
}
