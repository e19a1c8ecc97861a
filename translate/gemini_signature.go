package translate

import (
	"encoding/base64"

	"github.com/tidwall/gjson"
)

// reasoningItem writes the reasoning item a thought signature carries back, with the
// thought's text as its summary when the part is one.
func (w *geminiWriter) reasoningItem(id, enc string, text gjson.Result, thought bool, start int) {
	w.sep(start)
	w.b = append(w.b, `{"type":"reasoning","id":`...)
	w.b = appendString(w.b, id)
	w.b = append(w.b, `,"summary":[`...)
	if thought && text.Type == gjson.String && text.Str != "" {
		w.b = append(w.b, `{"type":"summary_text","text":`...)
		w.b = append(w.b, text.Raw...)
		w.b = append(w.b, '}')
	}
	w.b = append(w.b, `],"encrypted_content":`...)
	w.b = appendString(w.b, enc)
	w.b = append(w.b, '}')
}

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
