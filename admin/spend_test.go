package admin_test

import (
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"modelgate/redisconn/redistest"
)

// longChat asks sim-long for exactly 50 output tokens, so every call costs the same.
func longChat(stream bool) map[string]any {
	return map[string]any{"model": "sim-long", "max_tokens": 50, "stream": stream,
		"messages": []map[string]string{{"role": "user", "content": "tell me a long story"}}}
}

type teamsAnswer struct {
	Currency string
	Teams    []struct {
		Name  string
		Usage struct {
			SpendDay   float64 `json:"spend_day"`
			SpendMonth float64 `json:"spend_month"`
		}
	}
}

func (r *replica) teamSpend(t testing.TB, team string) (day, month float64) {
	t.Helper()
	status, _, b := r.do(t, "GET", "/admin/teams", adminKey, nil)
	if status != 200 {
		t.Fatalf("teams: %d %s", status, b)
	}
	for _, tm := range decode[teamsAnswer](t, b).Teams {
		if tm.Name == team {
			return tm.Usage.SpendDay, tm.Usage.SpendMonth
		}
	}
	t.Fatalf("team %s not listed", team)
	return 0, 0
}

// measureCost makes one call with the alpha team's config key and checks that its cost is
// the real usage at sim-long's price (2 per 1M input, 8 per 1M output).
func measureCost(t *testing.T, r *replica) float64 {
	t.Helper()
	status, _, b := r.do(t, "POST", "/v1/chat/completions", alphaKey, longChat(false))
	if status != 200 {
		t.Fatalf("chat: %d %s", status, b)
	}
	u := decode[struct {
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}](t, b).Usage
	if u.CompletionTokens != 50 || u.PromptTokens == 0 {
		t.Fatalf("usage %+v", u)
	}
	want := float64(u.PromptTokens*2+u.CompletionTokens*8) / 1e6
	day, month := r.teamSpend(t, "alpha")
	if math.Abs(day-want) > 1e-9 || math.Abs(month-want) > 1e-9 {
		t.Fatalf("alpha spent %v today, %v this month; want %v", day, month, want)
	}
	return want
}

func TestSpendBudgetAdmitsThreeThenRefuses(t *testing.T) {
	dir, sim := t.TempDir(), newSim(t)
	r := startReplica(t, envOptions{dataDir: dir, sim: sim})
	cost := measureCost(t, r)
	_, key := r.issue(t, "beta", "budget", map[string]any{"limits": map[string]any{"spend_per_day": 3.5 * cost}})
	for i := range 3 {
		if status, _, b := r.do(t, "POST", "/v1/chat/completions", key, longChat(false)); status != 200 {
			t.Fatalf("call %d: %d %s", i+1, status, b)
		}
	}
	status, h, b := r.do(t, "POST", "/v1/chat/completions", key, longChat(false))
	if status != http.StatusTooManyRequests || !strings.Contains(string(b), `"code":"insufficient_quota"`) ||
		h.Get("X-Should-Retry") != "false" || h.Get("Retry-After") == "" || !strings.Contains(string(b), "daily spend budget") {
		t.Fatalf("fourth call: %d %v %s", status, h, b)
	}
	if day, _ := r.teamSpend(t, "beta"); math.Abs(day-3*cost) > 1e-9 {
		t.Fatalf("beta spent %v, want %v", day, 3*cost)
	}
	// The team's other key has no budget of its own and the team none either.
	if status, _, _ := r.do(t, "POST", "/v1/chat/completions", betaKey, longChat(false)); status != 200 {
		t.Fatalf("the team's other key: %d", status)
	}

	// The spend survives a restart: the budget stays spent.
	r.stop()
	r2 := startReplica(t, envOptions{dataDir: dir, sim: sim})
	if status, _, b := r2.do(t, "POST", "/v1/chat/completions", key, longChat(false)); status != http.StatusTooManyRequests {
		t.Fatalf("after restart: %d %s", status, b)
	}
	if day, _ := r2.teamSpend(t, "beta"); math.Abs(day-4*cost) > 1e-9 {
		t.Fatalf("after restart beta spent %v, want %v", day, 4*cost)
	}
}

func TestSpendBudgetExactUnderParallelStreams(t *testing.T) {
	r := startReplica(t, envOptions{})
	cost := measureCost(t, r)
	_, key := r.issue(t, "beta", "burst", map[string]any{"limits": map[string]any{"spend_per_day": 3.5 * cost}})
	const n = 16
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := range n {
		wg.Go(func() {
			status, _, b := r.do(t, "POST", "/v1/chat/completions", key, longChat(true))
			if status == 200 && !strings.HasSuffix(strings.TrimSpace(string(b)), "data: [DONE]") {
				t.Errorf("stream %d did not finish: %q", i, b)
			}
			statuses[i] = status
		})
	}
	wg.Wait()
	ok, refused := 0, 0
	for _, s := range statuses {
		switch s {
		case 200:
			ok++
		case 429:
			refused++
		}
	}
	if ok != 3 || refused != n-3 {
		t.Fatalf("%d streams admitted and %d refused of %d; want 3 admitted: %v", ok, refused, n, statuses)
	}
	if day, _ := r.teamSpend(t, "beta"); math.Abs(day-3*cost) > 1e-9 {
		t.Fatalf("beta spent %v, want exactly %v", day, 3*cost)
	}
}

// Replicas sharing Redis see each other's spend, history and last use within about a second
// (each flushes and reads back every 100ms in these tests, every second in modelgate).
func TestSpendAndHistorySharedThroughRedis(t *testing.T) {
	url := "redis://" + redistest.Start(t).Addr + "/0"
	sim := newSim(t)
	a := startReplica(t, envOptions{storeURL: url, sim: sim})
	b := startReplica(t, envOptions{storeURL: url, sim: sim})
	cost := measureCost(t, a)
	waitFor(t, 2*time.Second, "replica b to see a's spend", func() bool {
		day, month := b.teamSpend(t, "alpha")
		return math.Abs(day-cost) < 1e-9 && math.Abs(month-cost) < 1e-9
	})
	waitFor(t, 2*time.Second, "replica b to see a's history", func() bool {
		_, _, body := b.do(t, "GET", "/admin/usage/history?group_by=team", adminKey, nil)
		h := decode[historyAnswer](t, body)
		return len(h.Rows) == 1 && h.Rows[0].Team == "alpha" && h.Rows[0].Requests == 1 && h.Rows[0].Cost == cost
	})
	for _, k := range b.list(t, "?team=alpha").Keys {
		if k.Name == "alpha-cfg" && k.LastUsedAt == nil {
			t.Error("replica b does not know when a last used alpha-cfg")
		}
	}
	// A budget spent through one replica is spent on the other.
	_, key := a.issue(t, "beta", "shared-budget", map[string]any{"limits": map[string]any{"spend_per_day": 1.5 * cost}})
	if status, _, body := a.do(t, "POST", "/v1/chat/completions", key, longChat(false)); status != 200 {
		t.Fatalf("first call: %d %s", status, body)
	}
	waitFor(t, 2*time.Second, "replica b to refuse the spent budget", func() bool {
		status, _, _ := b.do(t, "POST", "/v1/chat/completions", key, longChat(false))
		return status == http.StatusTooManyRequests
	})
}

// A call whose upper bound is more than a whole spend budget is refused even before anything
// is spent: the budget is never overrun, not even by the first call.
func TestSpendBudgetRefusesCallLargerThanBudget(t *testing.T) {
	r := startReplica(t, envOptions{})
	cost := measureCost(t, r)
	_, key := r.issue(t, "beta", "tiny", map[string]any{"limits": map[string]any{"spend_per_day": 0.5 * cost}})
	status, h, b := r.do(t, "POST", "/v1/chat/completions", key, longChat(false))
	if status != http.StatusTooManyRequests || !strings.Contains(string(b), `"code":"insufficient_quota"`) ||
		h.Get("X-Should-Retry") != "false" || !strings.Contains(string(b), "could cost more than what is left of your daily spend budget") {
		t.Fatalf("first call larger than the budget: %d %v %s", status, h, b)
	}
	if day, _ := r.teamSpend(t, "beta"); day != 0 {
		t.Fatalf("beta spent %v on a refused call", day)
	}
}
