package platformsim

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"modelgate/apitest"
	"net/http"
	"strings"
	"testing"
	"time"
)

type env struct {
	Code    *int            `json:"code"`
	Msg     string          `json:"msg"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func parseEnvelope(t *testing.T, b []byte) env {
	t.Helper()
	var e env
	if err := json.Unmarshal(b, &e); err != nil || e.Code == nil {
		t.Fatalf("not an envelope: %s", b)
	}
	return e
}

// getEnvelope GETs url with the test key and stops the test unless the answer is an envelope
// of the given HTTP status and code.
func getEnvelope(t *testing.T, url string, status, code int) (env, []byte) {
	t.Helper()
	got, _, b := call(t, "GET", url, testKey, nil)
	e := parseEnvelope(t, b)
	if got != status || *e.Code != code {
		t.Fatalf("%d %s", got, b)
	}
	return e, b
}

func TestBalanceExactBody(t *testing.T) {
	_, srv := newSim(t, Options{})
	status, _, b := call(t, "GET", srv.URL+"/api/open/v2/balance/info", testKey, nil)
	if want := `{"code":0,"msg":"success","data":{"balance":123.45,"card_balance":10}}`; status != 200 || string(b) != want {
		t.Errorf("%d %s", status, b)
	}
}

func TestSidecarAuthAndRouting(t *testing.T) {
	sim, srv := newSim(t, Options{})
	tests := []struct {
		name, method, path, key string
		status, code            int
	}{
		{"balance_no_key", "GET", "/api/open/v2/balance/info", "", 401, codeNotLoggedIn},
		{"runs_bad_key", "GET", "/api/open/v2/model-runs/info?run_id=run_000001", "nope", 401, codeNotLoggedIn},
		{"asset_no_key", "GET", "/api/open/v2/assets/ast_000001", "", 401, codeNotLoggedIn},
		{"upload_no_key", "POST", "/api/open/v2/assets", "", 401, codeNotLoggedIn},
		{"unknown_open_api", "GET", "/api/open/v2/instance/list", testKey, 404, codeBusiness},
		{"unknown_root", "GET", "/v1/models", testKey, 404, codeBusiness},
		{"escaped_slash_id", "GET", "/api/open/v2/assets/..%2F..%2Finstance%2Flist", testKey, 404, codeBusiness},
		{"nested_asset_path", "GET", "/api/open/v2/assets/a/b", testKey, 404, codeBusiness},
		{"wrong_method", "POST", "/api/open/v2/balance/info", testKey, 405, codeBusiness},
		{"upload_wrong_method", "GET", "/api/open/v2/assets", testKey, 405, codeBusiness},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, tc.method, srv.URL+tc.path, tc.key, nil)
			if e := parseEnvelope(t, b); status != tc.status || *e.Code != tc.code {
				t.Errorf("%d %s", status, b)
			}
		})
	}
	reqs := sim.Requests()
	if len(reqs) != len(tests) {
		t.Fatalf("recorded %d, want %d", len(reqs), len(tests))
	}
	if reqs[6].Path != "/api/open/v2/assets/..%2F..%2Finstance%2Flist" {
		t.Errorf("escaped path recorded as %q", reqs[6].Path)
	}
}

func TestModelRunInfo(t *testing.T) {
	_, srv := newSim(t, Options{})
	tests := []struct {
		name, query string
		status      int
		code        int
		wantStatus  string // data.status
	}{
		{"completed", "run_id=run_000001", 200, 0, "completed"},
		{"running", "run_id=run_000002", 200, 0, "running"},
		{"failed", "run_id=run_000004", 200, 0, "failed"},
		{"unknown", "run_id=run_404", 200, 1, ""},
		{"code_minus_1", "run_id=run_err_m1", 200, -1, ""},
		{"code_minus_2", "run_id=run_err_m2", 200, -2, ""},
		{"alt_shape", "run_id=run_alt", 400, 1, ""},
		{"missing_run_id", "", 400, 1, ""},
		{"bad_query", "run_id=%zz", 400, 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, b := getEnvelope(t, srv.URL+"/api/open/v2/model-runs/info?"+tc.query, tc.status, tc.code)
			if tc.code != 0 {
				if e.Msg == "" && e.Message == "" {
					t.Errorf("no message: %s", b)
				}
				return
			}
			var run map[string]any
			_ = json.Unmarshal(e.Data, &run)
			if run["status"] != tc.wantStatus {
				t.Errorf("data %s", e.Data)
			}
			for _, money := range []string{"frozen_amount", "final_amount", "released_amount"} {
				s, ok := run[money].(string)
				if !ok || len(s) < 10 || s[len(s)-9] != '.' {
					t.Errorf("%s = %v, want a decimal string with 8 fraction digits", money, run[money])
				}
			}
			if _, ok := run["created_at"]; ok {
				t.Error("created_at is a list-only field")
			}
		})
	}
	t.Run("alt_shape_fields", func(t *testing.T) {
		_, _, b := call(t, "GET", srv.URL+"/api/open/v2/model-runs/info?run_id=run_alt", testKey, nil)
		var alt struct {
			Message string
			Data    struct{ Error, Field string }
		}
		if json.Unmarshal(b, &alt) != nil || alt.Message == "" || alt.Data.Error == "" || alt.Data.Field != "run_id" {
			t.Errorf("%s", b)
		}
	})
	t.Run("completed_has_output", func(t *testing.T) {
		_, _, b := call(t, "GET", srv.URL+"/api/open/v2/model-runs/info?run_id=run_000001", testKey, nil)
		if !strings.Contains(string(b), `"video_url":"https://`) || !strings.Contains(string(b), `"final_amount":"0.42000000"`) {
			t.Errorf("%s", b)
		}
	})
}

func TestModelRunList(t *testing.T) {
	_, srv := newSim(t, Options{})
	tests := []struct {
		name, query string
		status      int
		code        int
		total       int
		ids         string
	}{
		{"all", "", 200, 0, 7, "run_000007 run_000006 run_000005 run_000004 run_000003 run_000002 run_000001"},
		{"page_2_of_3", "page=2&page_size=3", 200, 0, 7, "run_000004 run_000003 run_000002"},
		{"last_page", "page=3&page_size=3", 200, 0, 7, "run_000001"},
		{"past_end", "page=9&page_size=3", 200, 0, 7, ""},
		{"completed", "status=completed", 200, 0, 2, "run_000007 run_000001"},
		{"failed", "status=failed&page=1&page_size=100", 200, 0, 1, "run_000004"},
		{"page_size_clamped", "page_size=1000", 200, 0, 7, "run_000007 run_000006 run_000005 run_000004 run_000003 run_000002 run_000001"},
		{"bad_status", "status=done", 400, 1, 0, ""},
		{"bad_page", "page=0", 400, 1, 0, ""},
		{"page_not_number", "page_size=x", 400, 1, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := getEnvelope(t, srv.URL+"/api/open/v2/model-runs/list?"+tc.query, tc.status, tc.code)
			if tc.code != 0 {
				return
			}
			var data struct {
				Total int
				Items []struct {
					RunID        string `json:"run_id"`
					Model        string `json:"model"`
					Status       string `json:"status"`
					Settlement   string `json:"settlement_status"`
					FrozenAmount string `json:"frozen_amount"`
					CreatedAt    string `json:"created_at"`
				}
			}
			if err := json.Unmarshal(e.Data, &data); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, it := range data.Items {
				ids = append(ids, it.RunID)
				if _, err := time.Parse(time.DateTime, it.CreatedAt); err != nil || it.Model == "" || it.Settlement == "" || it.FrozenAmount == "" {
					t.Errorf("item %+v", it)
				}
			}
			if data.Total != tc.total || strings.Join(ids, " ") != tc.ids {
				t.Errorf("total %d ids %v", data.Total, ids)
			}
		})
	}
}

// multipartBody builds an upload with fields (in order) and a file of size bytes.
func multipartBody(t *testing.T, fields [][2]string, filename string, size int) (io.Reader, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, f := range fields {
		if f[0] == "file" {
			fw, err := mw.CreateFormFile("file", filename)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = fw.Write(bytes.Repeat([]byte{'z'}, size))
			continue
		}
		_ = mw.WriteField(f[0], f[1])
	}
	_ = mw.Close()
	return &buf, mw.FormDataContentType()
}

func postUpload(t *testing.T, url, key string, body io.Reader, ctype string) (int, env) {
	t.Helper()
	status, _, b := apitest.Do(t, "POST", url+"/api/open/v2/assets", key, body, "Content-Type", ctype)
	return status, parseEnvelope(t, b)
}

func TestAssetUploadAndScope(t *testing.T) {
	now := time.Date(2025, 8, 1, 12, 0, 0, 0, time.UTC)
	clock := now
	sim, srv := newSim(t, Options{APIKeys: []string{testKey, "sk-other"}, Now: func() time.Time { return clock }})
	body, ctype := multipartBody(t, [][2]string{{"media_type", "image"}, {"file", ""}, {"ttl_hours", "2"}}, "cat.png", 4096)
	status, e := postUpload(t, srv.URL, testKey, body, ctype)
	if status != 200 || *e.Code != 0 {
		t.Fatalf("%d %+v", status, e)
	}
	var a assetJSON
	_ = json.Unmarshal(e.Data, &a)
	want := assetJSON{AssetID: "ast_000001", AssetURI: "asset://ast_000001", MediaType: "image", MimeType: "image/png",
		SizeBytes: 4096, Purpose: "temp_input", ExpiresAt: "2025-08-01T14:00:00Z", Status: "confirmed", OriginalFilename: "cat.png"}
	want.URL, want.ContentURL, want.SignedURL = a.URL, a.ContentURL, a.SignedURL
	if a != want || a.URL == "" || a.URL != a.ContentURL || !strings.HasPrefix(a.SignedURL, a.URL+"?") {
		t.Errorf("asset %+v", a)
	}
	rec := sim.Requests()[0]
	if rec.Body != nil || rec.FileSize != 4096 || rec.BodySize <= 4096 || strings.Join(rec.FormFields, ",") != "media_type,file,ttl_hours" {
		t.Errorf("upload record %+v", rec)
	}

	get := func(key, id string) env {
		_, _, b := call(t, "GET", srv.URL+"/api/open/v2/assets/"+id, key, nil)
		return parseEnvelope(t, b)
	}
	if e := get(testKey, "ast_000001"); *e.Code != 0 || !strings.Contains(string(e.Data), `"asset_id":"ast_000001"`) {
		t.Errorf("owner get: %+v", e)
	}
	other, missing := get("sk-other", "ast_000001"), get(testKey, "ast_999999")
	if *other.Code != 1 || other.Msg != missing.Msg {
		t.Errorf("other key sees %+v; missing %+v", other, missing)
	}
	clock = now.Add(2 * time.Hour)
	if e := get(testKey, "ast_000001"); *e.Code != 1 {
		t.Errorf("expired asset still visible: %+v", e)
	}
}

func TestAssetUploadValidation(t *testing.T) {
	_, srv := newSim(t, Options{})
	tests := []struct {
		name     string
		fields   [][2]string
		filename string
		status   int
		media    string
	}{
		{"infer_video", [][2]string{{"file", ""}}, "clip.mp4", 200, "video"},
		{"infer_file", [][2]string{{"file", ""}}, "notes.unknownext", 200, "file"},
		{"fields_after_file", [][2]string{{"file", ""}, {"purpose", "temp_input"}, {"media_type", "audio"}}, "a.bin", 200, "audio"},
		{"no_file", [][2]string{{"media_type", "image"}}, "", 400, ""},
		{"bad_media_type", [][2]string{{"media_type", "movie"}, {"file", ""}}, "x.png", 400, ""},
		{"bad_purpose", [][2]string{{"purpose", "forever"}, {"file", ""}}, "x.png", 400, ""},
		{"ttl_zero", [][2]string{{"ttl_hours", "0"}, {"file", ""}}, "x.png", 400, ""},
		{"ttl_not_number", [][2]string{{"ttl_hours", "2h"}, {"file", ""}}, "x.png", 400, ""},
		{"two_files", [][2]string{{"file", ""}, {"file", ""}}, "x.png", 400, ""},
		{"field_too_long", [][2]string{{"purpose", strings.Repeat("p", 2000)}, {"file", ""}}, "x.png", 400, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body, ctype := multipartBody(t, tc.fields, tc.filename, 10)
			status, e := postUpload(t, srv.URL, testKey, body, ctype)
			if status != tc.status || (*e.Code == 0) != (tc.status == 200) {
				t.Fatalf("%d %+v", status, e)
			}
			if tc.media != "" && !strings.Contains(string(e.Data), `"media_type":"`+tc.media+`"`) {
				t.Errorf("data %s", e.Data)
			}
		})
	}
	t.Run("not_multipart", func(t *testing.T) {
		status, e := postUpload(t, srv.URL, testKey, strings.NewReader("{}"), "application/json")
		if status != 400 || *e.Code != 1 {
			t.Errorf("%d %+v", status, e)
		}
	})
}

// zeros yields n zero bytes without holding them.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	k := int(min(int64(len(p)), z.n))
	clear(p[:k])
	z.n -= int64(k)
	return k, nil
}

func TestAssetUploadSizeLimit(t *testing.T) {
	sim, srv := newSim(t, Options{})
	tests := []struct {
		name   string
		size   int64
		status int
	}{
		{"exactly_100MB", maxUpload, 200},
		{"one_byte_over", maxUpload + 1, 413},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const boundary = "simboundary"
			head := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
			tail := "\r\n--" + boundary + "--\r\n"
			body := io.MultiReader(strings.NewReader(head), &zeros{tc.size}, strings.NewReader(tail))
			status, e := postUpload(t, srv.URL, testKey, body, "multipart/form-data; boundary="+boundary)
			if status != tc.status {
				t.Fatalf("%d %+v", status, e)
			}
		})
	}
	if rec := sim.Requests(); len(rec) != 2 || rec[0].FileSize != maxUpload || rec[1].FileSize != maxUpload+1 {
		t.Errorf("records %+v", rec)
	}
}

func TestSidecarScripts(t *testing.T) {
	sim, srv := newSim(t, Options{})
	sim.Enqueue("/api/open/v2/model-runs/info", Reply{Status: 429, Header: map[string]string{"Retry-After": "7"}, Body: []byte(`{"code":-1,"msg":"slow"}`)})
	sim.Enqueue("/api/open/v2/balance/info", Reply{Fault: FaultInvalidJSON})
	sim.Enqueue("/api/open/v2/assets", Reply{Status: 500, Body: []byte("<html>boom</html>")})

	status, hdr, b := call(t, "GET", srv.URL+"/api/open/v2/model-runs/info?run_id=run_000001", testKey, nil)
	if status != 429 || hdr.Get("Retry-After") != "7" || string(b) != `{"code":-1,"msg":"slow"}` {
		t.Errorf("%d %s", status, b)
	}
	if status, _, b = call(t, "GET", srv.URL+"/api/open/v2/balance/info", testKey, nil); status != 200 || json.Valid(b) {
		t.Errorf("%d %s", status, b)
	}
	body, ctype := multipartBody(t, [][2]string{{"file", ""}}, "x.png", 100)
	req, _ := http.NewRequest("POST", srv.URL+"/api/open/v2/assets", body)
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", ctype)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || string(b) != "<html>boom</html>" {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
	if rec := sim.Requests()[2]; rec.FileSize != 100 {
		t.Errorf("scripted upload still counted: %+v", rec)
	}
	// Used up: the defaults again.
	if _, _, b = call(t, "GET", srv.URL+"/api/open/v2/model-runs/info?run_id=run_000001", testKey, nil); *parseEnvelope(t, b).Code != 0 {
		t.Errorf("%s", b)
	}
}
