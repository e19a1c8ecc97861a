package admin

import (
	_ "embed"
	"net/http"
)

// dashboardHTML is the whole dashboard: markup, style and script in one file, so the page
// needs nothing from outside modelgate.
//
//go:embed ui/index.html
var dashboardHTML []byte

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
	// Nothing but this page's own inline code and same-origin API calls may run or load.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(dashboardHTML)
}
