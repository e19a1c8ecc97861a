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

// signatureKind is what parseSignature made of a signature.
type signatureKind int

const (
	signatureForeign   signatureKind = iota // not modelgate's: the block is dropped
	signatureOurs                           // modelgate's, decoded
	signatureMalformed                      // modelgate's prefix over something it never issued
)

// parseSignature decodes a signature made by makeSignature. Its JSON is checked with the
// same bounded validator as every body: the signature is the client's, and gjson's own
// validator on a signature holding 20 MB of '[' overflows the stack and ends the process.
func parseSignature(sig string) (id, encrypted string, kind signatureKind) {
	rest, found := strings.CutPrefix(sig, signaturePrefix)
	if !found {
		return "", "", signatureForeign
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || !ValidJSON(raw) {
		return "", "", signatureMalformed
	}
	v := gjson.ParseBytes(raw)
	idv, enc := v.Get("id"), v.Get("enc")
	if idv.Type != gjson.String || idv.Str == "" || enc.Type != gjson.String {
		return "", "", signatureMalformed
	}
	return idv.Str, enc.Str, signatureOurs
}

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
