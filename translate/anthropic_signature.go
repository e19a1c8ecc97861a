package translate

import (
	"encoding/base64"
	"strings"

	"github.com/tidwall/gjson"
)

// A thinking block's signature is how Anthropic clients hand reasoning back on the next
// turn. modelgate's signatures carry what the platform needs to resume it: the reasoning
// item's id and its encrypted content. They are not secret (the encrypted content is the
// platform's own, and only the platform can read it) and not authenticated: a forged one can
// only send the platform reasoning it will refuse to decrypt. A signature without the prefix
// came from elsewhere (another gateway, Anthropic itself) and is dropped.
const signaturePrefix = "mgsig1."

// makeSignature encodes a reasoning item's id and encrypted content.
func makeSignature(id, encrypted string) string {
	b := make([]byte, 0, len(id)+len(encrypted)+24)
	b = append(b, `{"id":`...)
	b = appendString(b, id)
	b = append(b, `,"enc":`...)
	b = appendString(b, encrypted)
	b = append(b, '}')
	return signaturePrefix + base64.RawURLEncoding.EncodeToString(b)
}

// parseSignature decodes a signature made by makeSignature; ok is false for any other.
func parseSignature(sig string) (id, encrypted string, ok bool) {
	rest, found := strings.CutPrefix(sig, signaturePrefix)
	if !found {
		return "", "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || !gjson.ValidBytes(raw) {
		return "", "", false
	}
	v := gjson.ParseBytes(raw)
	idv, enc := v.Get("id"), v.Get("enc")
	if idv.Type != gjson.String || idv.Str == "" || enc.Type != gjson.String {
		return "", "", false
	}
	return idv.Str, enc.Str, true
}

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
