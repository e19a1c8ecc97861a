package main

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"modelgate/auth"
	"modelgate/config"
	"modelgate/platform"
	"modelgate/platformsim"
	"modelgate/proxy"
	"modelgate/ratelimit"
	"modelgate/reqlog"
)

// TestDrainSettlesBeforeTheLimiterCloses: a SIGTERM drain that runs out of time closes the
// connections of requests still streaming. Their handlers then settle what they used, and
// the limiter stays open until they have: the persisted day holds what the stream read, not
// the reservation it was admitted with.
func TestDrainSettlesBeforeTheLimiterCloses(t *testing.T) {
	sim := platformsim.New(platformsim.Options{})
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	defer sim.Close()
	cfg, err := config.Parse([]byte(`
listen: 127.0.0.1:0
upstream: {gateway_url: `+simSrv.URL+`, base_url: `+simSrv.URL+`, api_key: sk-drain}
models: [{id: sim-slow}]
teams: [{name: d, keys: [{name: k, key: mg-drain-key-1}]}]
`), "drain.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := platform.New(cfg.Upstream.GatewayURL, cfg.Upstream.BaseURL, platform.NewTransport(platform.TransportOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	limiter, err := ratelimit.New(ratelimit.Options{DataPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer limiter.Close()
	logger := slog.New(slog.DiscardHandler)
	// A handler that takes a moment to finish after its connection was closed.
	slowEnd := reqlog.Hooks{StreamOpened: func(string) {}, StreamClosed: func(string) { time.Sleep(200 * time.Millisecond) }}
	srv, err := proxy.New(proxy.Deps{Config: cfg, Auth: a, Limiter: limiter, Platform: pc, Logger: logger, Hooks: slowEnd})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go func() { _ = hs.Serve(ln) }()

	req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/v1/responses",
		strings.NewReader(`{"model":"sim-slow","input":"a long enough question to stream for a while","stream":true}`))
	req.Header.Set("Authorization", "Bearer mg-drain-key-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for deltas := 0; deltas < 2; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, "response.output_text.delta") && strings.HasPrefix(line, "data:") {
			deltas++
		}
	}
	// The stream is under way; the drain has 50ms, far less than the stream needs.
	if err := drain(hs, srv, limiter, 50*time.Millisecond, logger, nil); err != nil {
		t.Fatal(err)
	}
	reopened, err := ratelimit.New(ratelimit.Options{DataPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	u, err := reopened.Usage(context.Background(), []ratelimit.Scope{{ID: "team:d"}})
	if err != nil {
		t.Fatal(err)
	}
	billed := sim.Totals("sk-drain")
	if u[0].DayOutputTokens >= cfg.Ratelimit.DefaultMaxOutputTokens || u[0].DayOutputTokens < billed.OutputTokens || u[0].DayInputTokens != billed.InputTokens {
		t.Errorf("persisted in=%d out=%d; the platform billed in=%d out=%d, the reservation's output was %d: the stream's settle was lost",
			u[0].DayInputTokens, u[0].DayOutputTokens, billed.InputTokens, billed.OutputTokens, cfg.Ratelimit.DefaultMaxOutputTokens)
	}
}
