package admin

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
)

// dashboardHTML is the whole dashboard: markup, style and script in one file, so the page
// needs nothing from outside modelgate.
//
//go:embed ui/index.html
var dashboardHTML []byte

// dashboardCSP lets the page run its own inline script and style, named by their hashes,
// talk to this origin and load nothing else: no CDN, font or image from anywhere.
var dashboardCSP = "default-src 'none'; script-src " + inlineHash("script") + "; style-src " + inlineHash("style") +
	"; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// inlineHash is the CSP source for the content of the page's one <tag> element.
func inlineHash(tag string) string {
	open, end := []byte("<"+tag+">"), []byte("</"+tag+">")
	i := bytes.Index(dashboardHTML, open)
	j := bytes.Index(dashboardHTML, end)
	if i < 0 || j < i {
		panic("admin: the dashboard has no <" + tag + "> element")
	}
	sum := sha256.Sum256(dashboardHTML[i+len(open) : j])
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// dashboard serves the page. It holds no data: the page asks for the admin key and calls the
// admin API with it, so serving it needs no credential.
func (a *API) dashboard(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/admin/ui/" {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(dashboardHTML)
}
