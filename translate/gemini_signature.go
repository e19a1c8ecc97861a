package translate

import "encoding/base64"

// A thought signature is how Gemini clients hand reasoning back on the next turn: opaque
// bytes, base64 in JSON. modelgate's are the standard base64 of a Messages signature
// (anthropic_signature.go), so they carry the reasoning item's id and encrypted content. One
// that does not decode to that came from Google or another gateway, and is dropped: it
// carries nothing this platform can resume.

// makeGeminiSignature encodes a reasoning item as a thought signature.
func makeGeminiSignature(id, encrypted string) string {
	return base64.StdEncoding.EncodeToString([]byte(makeSignature(id, encrypted)))
}

// geminiSignature decodes a thought signature modelgate issued.
func geminiSignature(sig string) (id, encrypted string, ok bool) {
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return "", "", false
	}
	id, encrypted, kind := parseSignature(str(raw))
	return id, encrypted, kind == signatureOurs && encrypted != ""
}
