package admin_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// gzipBytes is p gzipped; writing to a bytes.Buffer cannot fail.
func gzipBytes(p []byte) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(p)
	zw.Close()
	return b.String()
}

// TestCreateKeyBodyEncodings: the admin API reads its bodies as the /v1 routes do: gzip is
// inflated under the same size limit (a bomb is refused once past it), other encodings get
// 415, and each refusal is in the API's own shape with no key issued.
func TestCreateKeyBodyEncodings(t *testing.T) {
	r := startReplica(t, envOptions{})
	valid := []byte(`{"team":"alpha","name":"zipped"}`)
	tests := []struct {
		name, encoding, body string
		status               int
		code                 string
	}{
		{"gzip", "gzip", gzipBytes(valid), http.StatusCreated, ""},
		{"bomb", "gzip", gzipBytes([]byte(`{"team":"alpha","name":"` + strings.Repeat("x", 1<<20) + `"}`)), 413, "body_too_large"},
		{"not_gzip", "gzip", string(valid), 400, "invalid_body"},
		{"brotli", "br", string(valid), 415, "unsupported_content_encoding"},
		{"gzip_twice", "gzip, gzip", gzipBytes([]byte(gzipBytes(valid))), 415, "unsupported_content_encoding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, b := r.do(t, "POST", "/admin/keys", adminKey, tt.body, "Content-Encoding", tt.encoding)
			if status != tt.status {
				t.Fatalf("%d %.300s, want %d", status, b, tt.status)
			}
			if tt.code == "" {
				return
			}
			var e struct {
				Error struct{ Message, Type, Code string }
			}
			if json.Unmarshal(b, &e) != nil || e.Error.Code != tt.code || e.Error.Message == "" || e.Error.Type == "" {
				t.Fatalf("%.300s, want code %s in the API's shape", b, tt.code)
			}
		})
	}
	if n := len(r.list(t, "").Keys); n != 3 { // the two config keys and the gzip one
		t.Fatalf("%d keys listed, want 3", n)
	}
}
