package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// browserTimeout bounds the whole page run: starting Chromium and seven calls.
const browserTimeout = 90 * time.Second

// chromiumPath finds the browser. Only a missing browser outside CI skips the browser tests:
// in CI (CI set, as CI=true) a missing browser is a failure, so they cannot silently stop running.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("CI=true but no chromium on PATH: install it (.ci/run does)")
	}
	t.Skip("chromium is not installed: the browser CORS test did not run")
	return ""
}

func browserConfig(p *platform, origins string) string {
	return gatewayYAML{
		models: chatAlias,
		teams:  alphaTeam("{requests_per_minute: 1000}"),
		more:   "server:\n  cors_origins: " + origins + "\n",
	}.render(p)
}

// pageServer serves the test page and the openai npm package's files from one loopback
// origin, other than modelgate's.
func pageServer(t *testing.T) *httptest.Server {
	t.Helper()
	page, err := os.ReadFile(filepath.Join("testdata", "cors_page.html"))
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := filepath.Abs(filepath.Join("node", "node_modules", "openai"))
	if err != nil {
		t.Fatal(err)
	}
	ensureNodeModules(t, filepath.Dir(filepath.Dir(pkg)))
	files := http.StripPrefix("/openai/", http.FileServer(http.Dir(pkg)))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /page.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	})
	mux.HandleFunc("GET /openai/", func(w http.ResponseWriter, r *http.Request) {
		// Module scripts must come with a JavaScript type, whatever the system's mime table says.
		if strings.HasSuffix(r.URL.Path, ".mjs") {
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		}
		files.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// pageResult is one check the page ran.
type pageResult struct {
	OK    bool            `json:"ok"`
	Value json.RawMessage `json:"value"`
	Error string          `json:"error"`
}

// runPage opens url in a fresh headless Chromium and returns what the page left in
// window.__result.
func runPage(t *testing.T, browser, url string) map[string]pageResult {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(browser),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	}
	// No timeout on the browser's own context (it would stop the browser); the page run has one.
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bc, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	if err := chromedp.Do(bc); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	err := chromedp.Listen(bc, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			desc := ""
			if d.Exception != nil {
				desc = d.Exception.Description
			}
			t.Logf("page exception at %s:%d: %s %s", d.URL, d.LineNumber, d.Text, desc)
		case *runtime.EventConsoleAPICalled:
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			t.Logf("page console.%s: %s", ev.Type, strings.Join(parts, " "))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(bc, browserTimeout)
	defer cancel()
	if err := chromedp.Do(c, chromedp.Navigate(url)); err != nil {
		t.Fatalf("opening the page in Chromium: %v", err)
	}
	raw, err := chromedp.Run(c, chromedp.Poll[string](`window.__result`, chromedp.WithPollingTimeout(browserTimeout-10*time.Second)))
	if err != nil {
		t.Fatalf("waiting for the page's checks: %v", err)
	}
	t.Logf("page results: %s", raw)
	results := map[string]pageResult{}
	if err := json.Unmarshal([]byte(raw), &results); err != nil {
		t.Fatalf("page result %q: %v", raw, err)
	}
	return results
}

// TestBrowserCORS: a page on another loopback origin calls modelgate from a real browser,
// with fetch and with the official openai npm client, streaming included; the same page is
// refused by a modelgate that does not list its origin, and nothing of that reaches the
// platform.
func TestBrowserCORS(t *testing.T) {
	browser := chromiumPath(t)
	page := pageServer(t)
	p := startPlatform(t)
	allowed := startGateway(t, gatewayOptions{ConfigYAML: browserConfig(p, `["`+page.URL+`"]`), Env: keysEnv(p)})
	other := startPlatform(t)
	refused := startGateway(t, gatewayOptions{ConfigYAML: browserConfig(other, `["http://127.0.0.1:1"]`), Env: keysEnv(other)})

	url := page.URL + "/page.html?allowed=" + allowed.URL + "&refused=" + refused.URL + "&key=" + alphaKey
	results := runPage(t, browser, url)

	want := simAnswer("sim-chat", "from the browser")
	value := func(name string) map[string]any {
		r, ok := results[name]
		if !ok {
			t.Fatalf("%s did not run (page: %+v)", name, results["page"])
		}
		if !r.OK {
			t.Fatalf("%s failed in the browser: %s", name, r.Error)
		}
		var v map[string]any
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("%s: %s", name, r.Value)
		}
		return v
	}
	for _, name := range []string{"fetch_chat", "fetch_stream", "sdk_chat", "sdk_chat_stream", "sdk_responses_stream"} {
		if v := value(name); v["text"] != want {
			t.Errorf("%s: text %q, want %q", name, v["text"], want)
		}
	}
	if v := value("fetch_chat"); v["requestID"] == nil || v["remaining"] == nil {
		t.Errorf("fetch_chat: the page cannot read x-request-id or the rate-limit headers: %v", v)
	}
	if v := value("fetch_stream"); v["done"] != true {
		t.Errorf("fetch_stream did not end with [DONE]: %v", v)
	}
	if v := value("sdk_chat"); v["requestID"] == nil {
		t.Errorf("sdk_chat: x-request-id not readable: %v", v)
	}
	if v := value("sdk_chat_stream"); v["chunks"].(float64) < 3 {
		t.Errorf("sdk_chat_stream: %v chunks", v["chunks"])
	}
	if v := value("sdk_responses_stream"); v["last"] != "response.completed" {
		t.Errorf("sdk_responses_stream ended with %v", v["last"])
	}
	for _, name := range []string{"refused_fetch", "refused_sdk"} {
		if r := results[name]; r.OK || r.Error == "" {
			t.Errorf("%s: an unlisted origin got through: %+v", name, r)
		}
	}
	if n := len(upstreamCalls(other, 0)); n != 0 {
		t.Errorf("the refused page reached the platform %d times", n)
	}
	allowed.assertNoSecret(t, p.Key)
}
