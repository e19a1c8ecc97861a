package admin

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"net/http"
	"path"
	"regexp"
)

// uiFiles are the dashboard's sources: the page (ui/index.html), whose one script includes
// each view's script (ui/*.js) where a line says "// @include name.js". The views live in
// files of their own to keep each file small; the page is served whole, assembled once.
//
//go:embed ui/index.html ui/*.js
var uiFiles embed.FS

// dashboardHTML is the whole dashboard: markup, style and script in one page, so it needs
// nothing from outside modelgate. Assembled at start and never changed.
var dashboardHTML = assembleDashboard(uiFiles)

// includeLine is a line of the page's script that includes a view's script.
var includeLine = regexp.MustCompile(`(?m)^[ \t]*// @include ([a-z-]+\.js)[ \t]*$`)

// assembleDashboard is ui/index.html with each include line replaced by the file it names. A
// missing file is a bug of the build, found by the tests at once.
func assembleDashboard(files embed.FS) []byte {
	page, err := files.ReadFile("ui/index.html")
	if err != nil {
		panic("admin: " + err.Error())
	}
	return includeLine.ReplaceAllFunc(page, func(line []byte) []byte {
		name := includeLine.FindSubmatch(line)[1]
		view, err := files.ReadFile(path.Join("ui", string(name)))
		if err != nil {
			panic("admin: the dashboard includes a missing " + string(name))
		}
		return bytes.TrimRight(view, "\n")
	})
}

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
