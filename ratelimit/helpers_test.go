package ratelimit

import (
	"context"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/config"
	"modelgate/redisconn/redistest"
	"modelgate/testclock"
)

// clock is a settable time source; tests move it instead of sleeping.
type clock = testclock.Clock

func newClock(t time.Time) *clock { return testclock.At(t) }

// start is where the tests' clocks begin: testclock's origin (now, or the hour a shifted run
// names) on a whole minute, since the limits count calendar minutes. Tests that cross a day
// boundary on purpose start from testclock.NextMidnight instead of an hour of the day.
var start = testclock.Origin().Truncate(time.Minute)

// redisURL starts a private redis-server for the test and returns its URL. Without the binary
// the test is skipped locally and fails in CI.
func redisURL(t testing.TB) string {
	t.Helper()
	return "redis://" + redistest.Start(t).Addr + "/0"
}

// storeKind builds a Limiter on one store; tests run against each.
type storeKind struct {
	name string
	make func(t testing.TB, c *clock) *Limiter
}

func memoryKind() storeKind {
	return storeKind{"memory", func(t testing.TB, c *clock) *Limiter {
		return newLimiter(t, Options{Store: "memory", Now: c.Now})
	}}
}

func redisKind() storeKind {
	return storeKind{"redis", func(t testing.TB, c *clock) *Limiter {
		return newLimiter(t, Options{Store: redisURL(t), Now: c.Now})
	}}
}

func allKinds() []storeKind { return []storeKind{memoryKind(), redisKind()} }

func newLimiter(t testing.TB, o Options) *Limiter {
	t.Helper()
	l, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func keyScope(name string, lim config.Limits) Scope { return Scope{ID: "key:t/" + name, Limits: lim} }

func teamScope(name string, lim config.Limits) *Scope {
	return &Scope{ID: "team:" + name, Limits: lim}
}

func mustAdmit(t testing.TB, l *Limiter, req Request) (*Ticket, Decision) {
	t.Helper()
	tk, d, err := l.Admit(context.Background(), req)
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	if d.Allowed != (tk != nil) {
		t.Fatalf("Allowed=%v but ticket=%v", d.Allowed, tk)
	}
	return tk, d
}

func usageOf(t testing.TB, l *Limiter, s Scope) ScopeUsage {
	t.Helper()
	u, err := l.Usage(context.Background(), []Scope{s})
	if err != nil {
		t.Fatalf("Usage: %v", err)
	}
	return u[0]
}

func headerMap(h Headers) map[string]string {
	m := map[string]string{}
	h.Apply(func(k, v string) { m[k] = v })
	return m
}

// waitSettled polls the usage of scopes until arrived says the queued settlements are in it
// (their retry goroutine waits out a store that was down), and returns it; past within it
// fails t, saying what was lost.
func waitSettled(t *testing.T, l *Limiter, scopes []Scope, within time.Duration, lost string, arrived func([]ScopeUsage) bool) []ScopeUsage {
	t.Helper()
	var u []ScopeUsage
	var err error
	if !apitest.Eventually(within, func() bool {
		u, err = l.Usage(context.Background(), scopes)
		return err == nil && arrived(u)
	}) {
		t.Fatalf("%s: %+v %v", lost, u, err)
	}
	return u
}
