package alerts

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docsVerify is the receiver's check printed in docs/alerts.md, kept here word for word so
// the docs cannot drift from what Sign makes.
func docsVerify(secret string, r *http.Request, body []byte) bool {
	var ts string
	var sigs []string
	for _, part := range strings.Split(r.Header.Get("X-Modelgate-Signature"), ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := hex.EncodeToString(mac.Sum(nil))
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return true
		}
	}
	return false
}

func TestDocsVerifierAcceptsSign(t *testing.T) {
	body := []byte(`{"type":"key.issued"}`)
	req := httptest.NewRequest("POST", "/hook", nil)
	req.Header.Set(SignatureHeader, Sign("s3", time.Now(), body))
	if !docsVerify("s3", req, body) {
		t.Fatal("the docs' verifier refuses a fresh signature")
	}
	if docsVerify("other", req, body) || docsVerify("s3", req, append(body, ' ')) {
		t.Fatal("the docs' verifier accepts a wrong secret or body")
	}
	req.Header.Set(SignatureHeader, Sign("s3", time.Now().Add(-10*time.Minute), body))
	if docsVerify("s3", req, body) {
		t.Fatal("the docs' verifier accepts an old signature")
	}
}
