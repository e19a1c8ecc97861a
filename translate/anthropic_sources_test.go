package translate

import (
	"encoding/base64"
	"strings"
	"testing"
)

// Image and document sources that Anthropic's API would refuse are refused here too, naming
// the field, rather than sent upstream as a data URL or a file URL.
func TestMessagesSourcesChecked(t *testing.T) {
	block := func(b string) string {
		return `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[` + b + `]}]}`
	}
	img := func(src string) string { return block(`{"type":"image","source":` + src + `}`) }
	doc := func(src string) string { return block(`{"type":"document","source":` + src + `}`) }
	inToolResult := func(src string) string {
		return `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":` + src + `}]}]}]}`
	}
	const src = "messages.0.content.0.source"
	tests := []struct{ name, body, param string }{
		{"image_html_media_type", img(`{"type":"base64","media_type":"text/html","data":"PGI+"}`), src + ".media_type"},
		{"image_bad_base64", img(`{"type":"base64","media_type":"image/png","data":"!!!"}`), src + ".data"},
		{"image_empty_data", img(`{"type":"base64","media_type":"image/png","data":""}`), src + ".data"},
		{"image_data_url_inside", img(`{"type":"base64","media_type":"image/png","data":"x;base64,AAAA"}`), src + ".data"},
		{"image_bad_padding", img(`{"type":"base64","media_type":"image/png","data":"AAA=="}`), src + ".data"},
		{"image_media_type_with_params", img(`{"type":"base64","media_type":"image/png;x=\"y\"","data":"AAAA"}`), src + ".media_type"},
		{"image_file_url", img(`{"type":"url","url":"file:///etc/passwd"}`), src + ".url"},
		{"image_javascript_url", img(`{"type":"url","url":"javascript:alert(1)"}`), src + ".url"},
		{"image_data_url", img(`{"type":"url","url":"data:text/html;base64,PGI+"}`), src + ".url"},
		{"image_relative_url", img(`{"type":"url","url":"/etc/passwd"}`), src + ".url"},
		{"document_file_url", doc(`{"type":"url","url":"file:///etc/passwd"}`), src + ".url"},
		{"document_gopher_url", doc(`{"type":"url","url":"gopher://h/"}`), src + ".url"},
		{"document_html", doc(`{"type":"base64","media_type":"text/html","data":"PGI+"}`), src + ".media_type"},
		{"document_bad_base64", doc(`{"type":"base64","media_type":"application/pdf","data":"%%%"}`), src + ".data"},
		{"tool_result_image_file_url", inToolResult(`{"type":"url","url":"file:///etc/passwd"}`), "messages.1.content.0.content.0.source.url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMessages([]byte(tt.body))
			e, ok := err.(*Error)
			if !ok || e.HTTPStatus() != 400 || e.Param != tt.param {
				t.Fatalf("error %v, want a 400 on %s", err, tt.param)
			}
		})
	}
	for name, body := range map[string]string{
		"png":            img(`{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}`),
		"webp_unpadded":  img(`{"type":"base64","media_type":"image/webp","data":"UklGRg"}`),
		"https_image":    img(`{"type":"url","url":"https://example.com/cat.jpg"}`),
		"http_upper":     img(`{"type":"url","url":"HTTP://example.com/cat.jpg"}`),
		"pdf_default":    doc(`{"type":"base64","data":"JVBERi0xLjQ="}`),
		"text_document":  doc(`{"type":"text","media_type":"text/plain","data":"!!! not base64, plain words"}`),
		"https_document": doc(`{"type":"url","url":"https://example.com/a.pdf"}`),
	} {
		if _, err := ParseMessages([]byte(body)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestValidBase64(t *testing.T) {
	for n := 1; n < 12; n++ {
		raw := strings.Repeat("\xfa", n)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
			if s := enc.EncodeToString([]byte(raw)); !validBase64(s) {
				t.Errorf("%q refused", s)
			}
		}
		if s := base64.URLEncoding.EncodeToString([]byte(raw)); validBase64(s) {
			t.Errorf("base64url %q accepted", s)
		}
	}
	for _, s := range []string{"", "=", "A", "A===", "AB=C", "AAAAA", "AA=", "AA AA", "AAA\n"} {
		if validBase64(s) {
			t.Errorf("%q accepted", s)
		}
	}
}
