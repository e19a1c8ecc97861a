package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/auth"
	"modelgate/platformsim"
	"modelgate/reqlog"
	"modelgate/testclock"
	"modelgate/upstream"
)

// poolYAML gives team alpha a pool of two platform keys and leaves beta on the canary.
const poolYAML = apitest.SimUpstreamYAML + `models:
  - id: sim-chat
teams:
  - name: alpha
    upstream_api_keys: [${KEY_A}, ${KEY_B}]
    keys:
      - name: alpha-1
        key: mg-alpha-key-1
` + betaTeamYAML

type poolEnv struct {
	*testEnv
	clock      *fakeClock
	keyA, keyB string
}

// newPoolEnv starts modelgate with alpha's pool [keyA, keyB]. The sim accepts keyA and keyB
// unless acceptA/acceptB is false. Ties between keys go to the first one, so every test knows
// which key a request starts on.
func newPoolEnv(t *testing.T, acceptA, acceptB bool) *poolEnv {
	t.Helper()
	pe := &poolEnv{clock: testclock.New(), keyA: apitest.Canary(t) + "-A", keyB: apitest.Canary(t) + "-B"}
	var sim []string
	if acceptA {
		sim = append(sim, pe.keyA)
	}
	if acceptB {
		sim = append(sim, pe.keyB)
	}
	pe.testEnv = startEnv(t, envOptions{yaml: poolYAML, vars: map[string]string{"KEY_A": pe.keyA, "KEY_B": pe.keyB},
		simKeys: sim, now: pe.clock.Now})
	pe.pinTies(0)
	t.Cleanup(func() {
		for _, k := range []string{pe.keyA, pe.keyB} {
			if strings.Contains(pe.logs.String(), k) {
				t.Errorf("a pool key appears in the logs")
			}
		}
	})
	return pe
}

// pinTies makes the pool break ties with index i (of the tied keys, in config order).
func (pe *poolEnv) pinTies(i int) {
	pe.server.state().gateway.Pool("alpha").BreakTiesWith(func(n int) int { return min(i, n-1) })
}

// call sends one chat completion as alpha and checks that no pool key leaks into the answer.
func (pe *poolEnv) call(t *testing.T, stream bool) (int, []byte) {
	t.Helper()
	body := `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}]`
	if stream {
		body += `,"stream":true`
	}
	status, h, b := pe.do(t, "POST", "/v1/chat/completions", keyAlpha1, []byte(body+"}"))
	pe.assertNoPoolKey(t, h, b)
	return status, b
}

func (pe *poolEnv) assertNoPoolKey(t *testing.T, h http.Header, b []byte) {
	t.Helper()
	for _, k := range []string{pe.keyA, pe.keyB} {
		if bytes.Contains(b, []byte(k)) {
			t.Errorf("a pool key appears in an answer body")
		}
		for name, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, k) {
					t.Errorf("a pool key appears in answer header %s", name)
				}
			}
		}
	}
}

// sent counts the platform requests made with each key.
func (pe *poolEnv) sent() (a, b int) {
	for _, r := range pe.sim.Requests() {
		switch r.Header.Get("Authorization") {
		case "Bearer " + pe.keyA:
			a++
		case "Bearer " + pe.keyB:
			b++
		}
	}
	return a, b
}

func (pe *poolEnv) keyStates(t *testing.T) map[string]string {
	t.Helper()
	body := adminUsage(t, pe.testEnv)
	var u struct {
		Teams []struct {
			Name         string
			PlatformKeys []reqlog.KeyState `json:"platform_keys"`
		}
	}
	if err := json.Unmarshal(body, &u); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, team := range u.Teams {
		if team.Name == "alpha" {
			for _, k := range team.PlatformKeys {
				out[k.Fingerprint] = k.State
			}
		}
	}
	return out
}

func TestKeyPoolRejectedKeyCostsOneTry(t *testing.T) {
	pe := newPoolEnv(t, false, true) // the platform refuses key A
	for i := range 6 {
		stream := i%2 == 1
		status, body := pe.call(t, stream)
		want := "Hello from sim-chat"
		if stream {
			want = "data: [DONE]"
		}
		if status != http.StatusOK || !bytes.Contains(body, []byte(want)) {
			t.Fatalf("request %d: %d %s", i, status, body)
		}
	}
	a, b := pe.sent()
	if a != 1 || b != 6 {
		t.Errorf("platform saw key A %d times and key B %d times, want 1 and 6", a, b)
	}
	fpA, fpB := upstream.Fingerprint(pe.keyA), upstream.Fingerprint(pe.keyB)
	if got := pe.keyStates(t); got[fpA] != reqlog.KeyOut || got[fpB] != reqlog.KeyHealthy {
		t.Errorf("key states = %v, want A (%s) out and B (%s) healthy", got, fpA, fpB)
	}
	if !strings.Contains(pe.logs.String(), fpA) || !strings.Contains(pe.logs.String(), "platform key taken out of service") {
		t.Errorf("the rejected key is not logged by fingerprint:\n%s", pe.logs.String())
	}
	if status, _, _ := pe.do(t, "GET", "/readyz", "", nil); status != http.StatusOK {
		t.Errorf("readyz = %d with one good key left", status)
	}
}

// TestKeyPoolReprobeAndReload: a key taken out is tried again after its back-off (a failed
// probe doubles it), comes back when the platform accepts it, and a reload resets every key.
func TestKeyPoolReprobeAndReload(t *testing.T) {
	pe := newPoolEnv(t, true, true)
	pe.sim.SetKeyReply(pe.keyA, platformsim.Reply{Status: 401, Body: []byte(`{"error":{"message":"bad key","type":"invalid_request_error"}}`)})
	pe.call(t, false)
	pe.clock.Advance(upstream.OutBackoff - time.Second)
	pe.call(t, false)
	if a, _ := pe.sent(); a != 1 {
		t.Fatalf("key A was tried %d times before its back-off ended", a)
	}
	pe.clock.Advance(time.Second)
	if status, _ := pe.call(t, false); status != http.StatusOK {
		t.Fatalf("failed probe reached the client: %d", status)
	}
	if a, _ := pe.sent(); a != 2 {
		t.Fatalf("key A was not probed after its back-off: %d tries", a)
	}
	pe.clock.Advance(upstream.OutBackoff) // the back-off doubled: not yet
	pe.call(t, false)
	if a, _ := pe.sent(); a != 2 {
		t.Fatalf("key A probed again before its doubled back-off: %d tries", a)
	}
	pe.sim.ClearKeyReply(pe.keyA)
	pe.clock.Advance(upstream.OutBackoff)
	pe.call(t, false)
	if a, _ := pe.sent(); a != 3 {
		t.Fatalf("key A: %d tries, want the third probe", a)
	}
	if got := pe.keyStates(t)[upstream.Fingerprint(pe.keyA)]; got != reqlog.KeyHealthy {
		t.Errorf("key A after a good probe: %s", got)
	}

	pe.sim.SetKeyReply(pe.keyA, platformsim.Reply{Status: 403, Body: []byte(`{}`)})
	pe.call(t, false)
	if got := pe.keyStates(t)[upstream.Fingerprint(pe.keyA)]; got != reqlog.KeyOut {
		t.Fatalf("key A after a 403: %s", got)
	}
	a, err := auth.New(pe.cfg)
	if err != nil {
		t.Fatal(err)
	}
	pe.server.Reload(pe.cfg, a)
	if got := pe.keyStates(t)[upstream.Fingerprint(pe.keyA)]; got != reqlog.KeyHealthy {
		t.Errorf("key A after a reload: %s", got)
	}
}

func TestKeyPoolNoUsableKeyFailsReadiness(t *testing.T) {
	pe := newPoolEnv(t, false, false)
	status, body := pe.call(t, false)
	if status != http.StatusBadGateway || !bytes.Contains(body, []byte("upstream_auth_failed")) {
		t.Fatalf("every key rejected: %d %s", status, body)
	}
	if a, b := pe.sent(); a != 1 || b != 1 {
		t.Errorf("tries: A %d, B %d; want one each", a, b)
	}
	if status, _, _ := pe.do(t, "GET", "/readyz", "", nil); status != http.StatusServiceUnavailable {
		t.Errorf("readyz = %d with no usable key for alpha", status)
	}
}

func TestKeyPoolRateLimitedKeyMovesTraffic(t *testing.T) {
	pe := newPoolEnv(t, true, true)
	pe.sim.SetKeyReply(pe.keyA, platformsim.Reply{Status: 429, Header: map[string]string{"Retry-After": "30"},
		Body: []byte(`{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`)})
	for i := range 5 {
		if status, body := pe.call(t, i == 4); status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, status, body)
		}
	}
	if a, b := pe.sent(); a != 1 || b != 5 {
		t.Errorf("A %d, B %d; want the 429 once on A, then everything on B", a, b)
	}
	if got := pe.keyStates(t)[upstream.Fingerprint(pe.keyA)]; got != reqlog.KeyCooling {
		t.Errorf("key A after a 429: %s", got)
	}
	pe.sim.ClearKeyReply(pe.keyA)
	pe.clock.Advance(30 * time.Second)
	pe.call(t, false)
	if a, _ := pe.sent(); a != 2 {
		t.Errorf("key A unused after its Retry-After: %d tries", a)
	}
}

// TestKeyPoolSpreadsLoad: the key with fewer calls in flight is chosen, and ties spread.
func TestKeyPoolSpreadsLoad(t *testing.T) {
	pe := newPoolEnv(t, true, true)
	pe.sim.Enqueue("/v1/responses", platformsim.Reply{Delay: 300 * time.Millisecond})
	done := make(chan struct{})
	go func() {
		defer close(done)
		pe.call(t, false)
	}()
	pool := pe.server.state().gateway.Pool("alpha")
	for deadline := time.Now().Add(5 * time.Second); pool.States()[0].InFlight == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the slow call never started")
		}
		time.Sleep(5 * time.Millisecond) // waiting for a goroutine, not for a time window
	}
	pe.call(t, false) // ties go to A, but A is busy
	<-done
	if a, b := pe.sent(); a != 1 || b != 1 {
		t.Fatalf("A %d, B %d: the second call did not go to the idle key", a, b)
	}

	pool.BreakTiesWith(nil) // ties at random again
	for range 40 {
		pe.call(t, false)
	}
	a, b := pe.sent()
	if a < 1+8 || b < 1+8 {
		t.Errorf("40 sequential calls spread A %d, B %d", a-1, b-1)
	}
}

// TestKeyPoolAssetReadWithUploadingKey: the platform shows an asset only to the key that
// uploaded it, so GET assets/{id} goes with that key whatever the pool would pick.
func TestKeyPoolAssetReadWithUploadingKey(t *testing.T) {
	pe := newPoolEnv(t, true, true)
	asset := uploadedAsset(t, pe.testEnv, keyAlpha1, 64)
	if a, b := pe.sent(); a != 1 || b != 0 {
		t.Fatalf("upload went A %d, B %d", a, b)
	}
	o, ok, err := pe.server.owners.Owner(t.Context(), asset)
	if err != nil || !ok || o.Team != "alpha" || o.KeyFingerprint != upstream.Fingerprint(pe.keyA) {
		t.Fatalf("owner record = %+v %v %v", o, ok, err)
	}
	pe.pinTies(1) // the pool would now pick B
	for range 3 {
		status, h, got := pe.do(t, "GET", "/api/open/v2/assets/"+asset, keyAlpha1, nil)
		pe.assertNoPoolKey(t, h, got)
		if status != http.StatusOK || *assertEnvelope(t, got).Code != 0 {
			t.Fatalf("read back: %d %s", status, got)
		}
	}
	if a, b := pe.sent(); a != 4 || b != 0 {
		t.Errorf("reads went A %d, B %d; want all on the uploading key", a-1, b)
	}
	// Other sidecar routes use the pool and fail over like the gateway.
	pe.sim.SetKeyReply(pe.keyB, platformsim.Reply{Status: 401, Body: []byte(`{"code":401,"msg":"not logged in"}`)})
	status, _, got := pe.do(t, "GET", "/api/open/v2/balance/info", keyAlpha1, nil)
	if status != http.StatusOK || *assertEnvelope(t, got).Code != 0 {
		t.Fatalf("balance with B rejected: %d %s", status, got)
	}
	if a, b := pe.sent(); a != 5 || b != 1 {
		t.Errorf("balance went A %d, B %d; want one try on B, then A", a-4, b)
	}
}
