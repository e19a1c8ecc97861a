package alerts

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Headers of every delivery.
const (
	// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256>", the HMAC keyed with
	// the webhook's secret over "<unix seconds>.<body>".
	SignatureHeader = "X-Modelgate-Signature"
	EventHeader     = "X-Modelgate-Event"    // the event's type
	EventIDHeader   = "X-Modelgate-Event-Id" // the event's id, the same on every retry
)

// Sign returns the SignatureHeader value for body sent at t. The timestamp is signed with
// the body, so a captured delivery cannot be replayed later as new: receivers refuse an old t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, ts, body)
}

func mac(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Errors of Verify.
var (
	ErrBadSignature = errors.New("alerts: signature does not match")
	ErrStale        = errors.New("alerts: signature timestamp outside the tolerance")
	ErrMalformed    = errors.New("alerts: malformed signature header")
)

// maxSignatureHeader bounds what Verify parses: a real header is under 100 bytes.
const maxSignatureHeader = 1024

// Verify checks a SignatureHeader value against body, as a receiver written in Go would:
// the HMAC must match (compared in constant time) and t must be within tolerance of now.
// Several v1 values are accepted (any one matching), so a sender may sign with an old and a
// new secret while they are rotated.
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if len(header) > maxSignatureHeader {
		return ErrMalformed
	}
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrMalformed
		}
		switch k {
		case "t":
			if ts != "" {
				return ErrMalformed
			}
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrMalformed
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return ErrBadSignature
}
