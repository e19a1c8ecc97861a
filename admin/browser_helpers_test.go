package admin_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browser is a headless Chromium tab a dashboard test drives, and the steps it takes in it.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// openBrowser starts Chromium (bin) with the flags the dashboard tests share plus extra, and
// a tab in it that lives at most timeout; both end with the test.
func openBrowser(t *testing.T, bin string, timeout time.Duration, extra ...chromedp.ExecAllocatorOption) *browser {
	opts := append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 800)}, extra...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancelTimeout)
	return &browser{t: t, ctx: ctx}
}

// must runs steps, failing the test with what they were for.
func (b *browser) must(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval is the string js evaluates to in the page.
func (b *browser) eval(js string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// text is the text of the element sel selects.
func (b *browser) text(sel string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return v
}
