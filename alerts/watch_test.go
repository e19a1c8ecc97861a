package alerts

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelgate/apitest"
	"modelgate/config"
	"modelgate/redisconn/redistest"
	"modelgate/store"
	"modelgate/store/storetest"
	"modelgate/testclock"
)

// figures are readings a test moves by hand.
type figures struct {
	mu sync.Mutex
	r  []Reading
}

func (f *figures) set(r ...Reading) { f.mu.Lock(); f.r = r; f.mu.Unlock() }
func (f *figures) read(context.Context) []Reading {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Reading(nil), f.r...)
}

func newWatcher(t *testing.T, st store.Store, s *Sender, f *figures, now func() time.Time) *Watcher {
	t.Helper()
	w, err := NewWatcher(Options{Store: st, Sender: s, Readings: f.read, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func check(t *testing.T, w *Watcher) {
	t.Helper()
	if err := w.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func thresholds(evs []Event) []int {
	var out []int
	for _, e := range evs {
		out = append(out, e.Threshold)
	}
	return out
}

func spend(used float64) Reading {
	return Reading{Scope: "team", Team: "search", Budget: BudgetSpendDay, Used: used, Limit: 10, Currency: "USD"}
}

// 50%, 80% and 100% are each announced once, however often the figures are checked; a
// restart on the same bbolt file announces nothing again; the next day starts over.
func TestThresholdsOncePerPeriodAcrossRestart(t *testing.T) {
	clk := testclock.At(testclock.SameDay(testclock.Origin(), 2*time.Hour))
	dir := t.TempDir()
	r := newReceiver(t)
	s := fastSender(t, r.hook())
	runSender(t, s)
	f := &figures{}
	st := storetest.OpenBolt(t, dir, clk.Now)
	w := newWatcher(t, st, s, f, clk.Now)
	steps := []struct {
		used float64
		want []int
	}{
		{1, nil}, {4.99, nil}, {5, []int{50}}, {6, []int{50}}, {8.5, []int{50, 80}}, {9, []int{50, 80}},
		{10, []int{50, 80, 100}}, {12, []int{50, 80, 100}},
	}
	for _, step := range steps {
		f.set(spend(step.used))
		for range 3 {
			check(t, w)
		}
		waitFor(t, "deliveries", func() bool { return int(s.Stats().Delivered) == len(step.want) })
		if got := thresholds(r.got()); !slices.Equal(got, step.want) {
			t.Fatalf("at %.2f: thresholds %v, want %v", step.used, got, step.want)
		}
	}
	ev := r.got()[2]
	if ev.Scope != "team" || ev.Team != "search" || ev.Budget != BudgetSpendDay || ev.Used != 10 || ev.Limit != 10 ||
		ev.Currency != "USD" || ev.Period != clk.Now().UTC().Format("2006-01-02") {
		t.Fatalf("event %+v", ev)
	}
	crossed, err := w.CrossedToday(context.Background())
	if err != nil || !slices.Equal(thresholds(crossed), []int{50, 80, 100}) {
		t.Fatalf("crossed today %v, %v", thresholds(crossed), err)
	}

	// A restart: the claims are in the file, so nothing is sent again.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = storetest.OpenBolt(t, dir, clk.Now)
	defer st.Close()
	w = newWatcher(t, st, s, f, clk.Now)
	check(t, w)
	if got := s.Stats(); got.Delivered != 3 || len(s.queue) != 0 {
		t.Fatalf("after a restart: %+v", got)
	}
	// The next day's budget is a new period.
	clk.Set(testclock.NextMidnight(clk.Now()).Add(time.Minute))
	f.set(spend(5))
	check(t, w)
	waitFor(t, "the next day's 50%", func() bool { return s.Stats().Delivered == 4 })
	if crossed, _ := w.CrossedToday(context.Background()); len(crossed) != 1 {
		t.Fatalf("crossed on the new day: %+v", crossed)
	}
}

// newWatchBench is a watcher over a fresh bolt store on clk, with figures to set
// and a running sender that delivers to a receiver; all closed with the test.
func newWatchBench(t *testing.T, clk *testclock.Clock) (*receiver, *Sender, *figures, *Watcher) {
	t.Helper()
	r := newReceiver(t)
	s := fastSender(t, r.hook())
	runSender(t, s)
	st := storetest.OpenBolt(t, t.TempDir(), clk.Now)
	t.Cleanup(func() { st.Close() })
	f := &figures{}
	return r, s, f, newWatcher(t, st, s, f, clk.Now)
}

// A monthly budget and a key scope are claimed apart from the team's daily one.
func TestScopesAndBudgetsAreSeparate(t *testing.T) {
	clk := testclock.New()
	r, s, f, w := newWatchBench(t, clk)
	f.set(spend(5),
		Reading{Scope: "team", Team: "search", Budget: BudgetSpendMonth, Used: 50, Limit: 100, Currency: "USD"},
		Reading{Scope: "key", Team: "search", Key: "prod", Budget: BudgetTokensDay, Used: 800, Limit: 1000},
		Reading{Scope: "key", Team: "search", Key: "prod", Budget: BudgetSpendDay, Used: 0, Limit: 0})
	check(t, w)
	check(t, w)
	waitFor(t, "four events", func() bool { return s.Stats().Delivered == 4 })
	seen := map[string]bool{}
	for _, e := range r.got() {
		seen[e.Scope+"/"+e.Budget+"/"+e.Period+"/"+string(rune('0'+e.Threshold/10))] = true
		if e.Budget == BudgetTokensDay && e.Currency != "" {
			t.Fatalf("a token budget names a currency: %+v", e)
		}
		if e.Budget == BudgetSpendMonth && e.Period != clk.Now().UTC().Format("2006-01") {
			t.Fatalf("month period %q", e.Period)
		}
	}
	if len(seen) != 4 {
		t.Fatalf("events %+v", r.got())
	}
}

// Two replicas on one Redis, each with its own client, cross the same thresholds at the same
// moment, many times over: each threshold is sent once.
func TestReplicasOnRedisSendOnce(t *testing.T) {
	srv := redistest.Start(t)
	clk := testclock.New()
	r := newReceiver(t)
	f := &figures{}
	f.set(spend(10))
	var senders []*Sender
	var watchers []*Watcher
	for range 2 {
		st := store.NewRedis(redis.NewClient(&redis.Options{Addr: srv.Addr}))
		t.Cleanup(func() { st.Close() })
		s := fastSender(t, r.hook())
		runSender(t, s)
		senders = append(senders, s)
		watchers = append(watchers, newWatcher(t, st, s, f, clk.Now))
	}
	var wg sync.WaitGroup
	for _, w := range watchers {
		for range 4 {
			wg.Go(func() {
				if err := w.Check(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	total := func() int64 { return senders[0].Stats().Delivered + senders[1].Stats().Delivered }
	waitFor(t, "three deliveries", func() bool { return total() >= 3 })
	// Anything more would have been queued by now: both queues are empty.
	waitFor(t, "empty queues", func() bool { return len(senders[0].queue)+len(senders[1].queue) == 0 })
	if got := thresholds(r.got()); total() != 3 || len(got) != 3 {
		t.Fatalf("delivered %d: %v", total(), got)
	}
	// Either replica lists the three, whichever claimed them.
	for i, w := range watchers {
		crossed, err := w.CrossedToday(context.Background())
		if err != nil || !slices.Equal(thresholds(crossed), []int{50, 80, 100}) {
			t.Fatalf("replica %d: crossed today %v, %v", i, thresholds(crossed), err)
		}
	}
}

// Keys issued and revoked are announced at once; an expiry once, by the check after it,
// across a restart, and not for a key revoked first. Logs name the webhook's host only.
func TestKeyLifecycle(t *testing.T) {
	clk := testclock.New()
	dir := t.TempDir()
	r := newReceiver(t)
	var logs apitest.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s := NewSender(SenderOptions{Webhooks: []config.Webhook{r.hook()}, Backoff: time.Millisecond, Log: log})
	runSender(t, s)
	st := storetest.OpenBolt(t, dir, clk.Now)
	f := &figures{}
	w := newWatcher(t, st, s, f, clk.Now)
	ctx := context.Background()
	soon, later := clk.Now().Add(time.Hour), clk.Now().Add(2*time.Hour)
	w.KeyIssued(ctx, "key_a", "search", "a", &soon)
	w.KeyIssued(ctx, "key_b", "search", "b", &later)
	w.KeyIssued(ctx, "key_c", "search", "c", nil)
	w.KeyRevoked(ctx, "key_b", "search", "b")
	waitFor(t, "four key events", func() bool { return s.Stats().Delivered == 4 })
	clk.Advance(3 * time.Hour)
	// A restart before the check: the expiry is in the store, not in memory.
	st.Close()
	st = storetest.OpenBolt(t, dir, clk.Now)
	defer st.Close()
	w = newWatcher(t, st, s, f, clk.Now)
	check(t, w)
	check(t, w)
	waitFor(t, "the expiry", func() bool { return s.Stats().Delivered == 5 })
	got := r.got()
	types := []string{}
	for _, e := range got {
		types = append(types, e.Type+":"+e.KeyID)
	}
	sort.Strings(types[:4]) // four workers deliver the first four in any order
	want := "key.issued:key_a key.issued:key_b key.issued:key_c key.revoked:key_b key.expired:key_a"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %v\nwant %s", types, want)
	}
	if got[4].Type != config.EventKeyExpired {
		t.Fatalf("event %+v", got[4])
	}
	if exp := got[4].ExpiresAt; exp == nil || !exp.Equal(soon) || got[4].Team != "search" || got[4].Key != "a" {
		t.Fatalf("expiry event %+v", got[4])
	}
	// Keys issued elsewhere (or before this replica) are picked up from the live set.
	w2, _ := NewWatcher(Options{Store: st, Sender: s, Now: clk.Now, IssuedKeys: func() []IssuedKey {
		return []IssuedKey{{ID: "key_d", Team: "chat", Name: "d", ExpiresAt: clk.Now().Add(time.Minute)}, {ID: "key_e", Team: "chat", Name: "e"}}
	}})
	check(t, w2)
	clk.Advance(time.Minute)
	check(t, w2)
	check(t, w2)
	waitFor(t, "the live key's expiry", func() bool { return s.Stats().Delivered == 6 })
	if e := r.got()[5]; e.Type != config.EventKeyExpired || e.KeyID != "key_d" {
		t.Fatalf("event %+v", e)
	}
	// A refused delivery is logged by host, never by its token or the secret.
	r.mu.Lock()
	r.statuses = []int{400}
	r.mu.Unlock()
	w.KeyRevoked(ctx, "key_c", "search", "c")
	// The sender counts the failure before it logs it: wait for the line itself.
	waitFor(t, "the refusal, logged", func() bool {
		return s.Stats().Failed == 1 && strings.Contains(logs.String(), "receiver refused the event")
	})
	out := logs.String()
	if strings.Contains(out, "s3cr3t-token") || strings.Contains(out, testSecret) || !strings.Contains(out, "host=127.0.0.1") {
		t.Fatalf("log:\n%s", out)
	}
}

// countingStore counts the claims tried.
type countingStore struct {
	store.Store
	mu      sync.Mutex
	creates int
}

func (c *countingStore) Create(ctx context.Context, bucket, key string, v []byte, ttl time.Duration) (bool, error) {
	c.mu.Lock()
	c.creates++
	c.mu.Unlock()
	return c.Store.Create(ctx, bucket, key, v, ttl)
}

// A budget that stays past its thresholds costs one claim per threshold a day, not one per
// check: on bbolt each claim is a synced write, on Redis a round trip.
func TestClaimsAreTriedOncePerDay(t *testing.T) {
	clk := testclock.At(testclock.SameDay(testclock.Origin(), time.Hour))
	st := &countingStore{Store: storetest.OpenBolt(t, t.TempDir(), clk.Now)}
	defer st.Close()
	f := &figures{}
	f.set(spend(12))
	w := newWatcher(t, st, fastSender(t), f, clk.Now)
	for range 10 {
		check(t, w)
	}
	// A second process on the same store tries each claim once too, and loses.
	w2 := newWatcher(t, st, fastSender(t), f, clk.Now)
	for range 10 {
		check(t, w2)
	}
	if st.creates != 6 {
		t.Fatalf("%d claims tried, want 3 per process", st.creates)
	}
	clk.Set(testclock.NextMidnight(clk.Now()).Add(time.Minute))
	check(t, w)
	check(t, w)
	if st.creates != 9 {
		t.Fatalf("%d claims tried after midnight, want 3 more", st.creates)
	}
}

// A budget that refused a call announces 100% at the next check, even though its settled use
// is short of the limit (a call's reservation must fit what is left); once, like any
// threshold, and only for the budget that refused. Notes of budgets no reading names are
// dropped at the check.
func TestRefusalAnnouncesTheFullBudget(t *testing.T) {
	r, s, f, w := newWatchBench(t, testclock.New())
	f.set(spend(8.5), Reading{Scope: "key", Team: "search", Key: "prod", Budget: BudgetTokensDay, Used: 700, Limit: 1000})
	check(t, w)
	waitFor(t, "50 and 80", func() bool { return s.Stats().Delivered == 3 })
	w.Exhausted("team:search", BudgetSpendDay)
	w.Exhausted("enduser:search/u", BudgetSpendDay) // no reading names it
	check(t, w)
	waitFor(t, "100", func() bool { return s.Stats().Delivered == 4 })
	w.Exhausted("team:search", BudgetSpendDay)
	check(t, w)
	check(t, w)
	var full []Event
	for _, e := range r.got() {
		if e.Threshold == 100 {
			full = append(full, e)
		}
	}
	if len(full) != 1 || full[0].Budget != BudgetSpendDay || full[0].Scope != "team" || !full[0].Refused || full[0].Used != 8.5 {
		t.Fatalf("100%% events %+v, want one for the team's daily spend, refused, used 8.5", full)
	}
	if n := len(r.got()); n != 4 {
		t.Fatalf("%d events, want 4 (the key's tokens 50%% and the spend's 50, 80, 100)", n)
	}
	if len(w.takeRefused()) != 0 {
		t.Fatal("notes outlived the check that read them")
	}
}

// Notes written while checks run are never read by a check that is not their own: under
// -race, the request path's writes and the check's reads of one set would race.
func TestExhaustedNotesRaceFree(t *testing.T) {
	clk := testclock.New()
	s := fastSender(t, newReceiver(t).hook())
	runSender(t, s)
	st := storetest.OpenBolt(t, t.TempDir(), clk.Now)
	defer st.Close()
	f := &figures{}
	f.set(spend(1))
	w := newWatcher(t, st, s, f, clk.Now)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2000 {
			w.Exhausted("team:other", BudgetSpendDay)
		}
	}()
	for range 200 {
		check(t, w)
	}
	<-done
}
