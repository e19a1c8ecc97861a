package upstream

import (
	"net/http"
	"testing"
	"time"

	"modelgate/reqlog"
	"modelgate/testclock"
)

func answer(status int, hdr ...string) *http.Response {
	r := &http.Response{StatusCode: status, Header: http.Header{}}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	return r
}

// TestKeyPoolRules walks one pool through each rule with an injected clock.
func TestKeyPoolRules(t *testing.T) {
	clock := testclock.At(time.Unix(1_700_000_000, 0))
	p := newPool("t", []string{"sk-a", "sk-b", "sk-c"}, clock.Now)
	p.intn = func(int) int { return 0 }
	a, b, c := p.keys[0], p.keys[1], p.keys[2]
	pick := func(tried ...*poolKey) (*poolKey, bool) { return p.pick(tried) }

	// Least in flight wins; ties go where intn says.
	a.inflight.Add(2)
	b.inflight.Add(1)
	if k, ok := pick(); k != c || !ok {
		t.Fatalf("least in flight: got %s", k.fingerprint)
	}
	c.inflight.Add(1)
	if k, _ := pick(); k != b {
		t.Fatalf("tie between b and c goes to the first: got %s", k.fingerprint)
	}
	a.inflight.Store(0)
	b.inflight.Store(0)
	c.inflight.Store(0)

	// 429 with Retry-After cools a key for that long; without one, for the default.
	p.observe(a, answer(429, "Retry-After", "5"), nil)
	p.observe(b, answer(429), nil)
	if k, ok := pick(); k != c || !ok {
		t.Fatalf("with a and b cooling: got %s", k.fingerprint)
	}
	clock.Advance(5 * time.Second)
	if k, _ := pick(c); k != a {
		t.Fatalf("a's Retry-After passed: got %s", k.fingerprint)
	}
	if got := p.States()[1].State; got != reqlog.KeyCooling {
		t.Fatalf("b after 5s: %s", got)
	}
	clock.Advance(defaultCoolDown)

	// 401 takes a key out; while every other key is tried or unusable the soonest to recover
	// comes back, marked unusable.
	p.observe(c, answer(401), nil)
	p.observe(b, answer(429, "Retry-After", "60"), nil)
	if k, ok := pick(a); k != b || ok {
		t.Fatalf("only b (cooling) and c (out) left: got %s ok=%v", k.fingerprint, ok)
	}
	if p.HasUsable() != true {
		t.Fatal("a and b are not out")
	}

	// After the back-off one probe may go; a second caller does not probe at the same time.
	clock.Advance(OutBackoff)
	if k, ok := pick(a, b); k != c || !ok {
		t.Fatalf("c's back-off is over: got %s ok=%v", k.fingerprint, ok)
	}
	if k, ok := pick(a, b); ok {
		t.Fatalf("a second probe of c went at once: %s", k.fingerprint)
	}
	// A failed probe doubles the back-off; a good one brings the key back.
	p.observe(c, answer(403), nil)
	clock.Advance(OutBackoff)
	if _, ok := pick(a, b); ok {
		t.Fatal("c probed again before its doubled back-off")
	}
	clock.Advance(OutBackoff)
	k, ok := pick(a, b)
	if k != c || !ok {
		t.Fatal("c not probed after its doubled back-off")
	}
	p.observe(c, answer(200), nil)
	if got := p.States()[2].State; got != reqlog.KeyHealthy {
		t.Fatalf("c after a good probe: %s", got)
	}

	// A transport error says nothing about a key.
	p.observe(a, nil, http.ErrHandlerTimeout)
	if got := p.States()[0].State; got != reqlog.KeyHealthy {
		t.Fatalf("a after a transport error: %s", got)
	}
	for _, k := range p.keys {
		p.observe(k, answer(401), nil)
	}
	if p.HasUsable() {
		t.Fatal("every key out, yet usable")
	}
	if Fingerprint("sk-a") != a.fingerprint || len(a.fingerprint) != 8 {
		t.Fatalf("fingerprint %q", a.fingerprint)
	}
}
