package ratelimit

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"modelgate/config"
	"modelgate/redisconn/redistest"
)

// TestClusterAdmissionsStayInOneSlot runs every script and read on a real 3-node Redis
// Cluster, from two limiters as two replicas would. A Cluster refuses (CROSSSLOT) any script
// whose keys span slots, so every call succeeding is the proof; the keys are then checked to
// sit in one slot per team, and the teams to spread over the nodes.
func TestClusterAdmissionsStayInOneSlot(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := newClock(start)
	opts := Options{Store: "redis", Redis: config.Redis{Addrs: cl.Addrs(), Cluster: true}, Now: c.Now}
	replicas := []*Limiter{newLimiter(t, opts), newLimiter(t, opts)}
	ctx := context.Background()
	keyLim := config.Limits{RequestsPerMinute: 5, TokensPerMinute: 100_000, ConcurrentRequests: 50, TokensPerDay: 1_000_000}
	teamLim := config.Limits{RequestsPerMinute: 8}
	const teams = 6
	for i := range teams {
		team := fmt.Sprintf("team%d", i)
		admitted := map[string]int{}
		n := 0
		for _, key := range []string{"a", "b"} {
			for range 10 {
				l := replicas[n%2]
				n++
				req := Request{Key: Scope{ID: "key:" + team + "/" + key, Limits: keyLim}, Team: teamScope(team, teamLim), Tokens: 100}
				tk, d, err := l.Admit(ctx, req)
				if err != nil {
					t.Fatalf("%s/%s: admit: %v", team, key, err)
				}
				if d.Allowed {
					admitted[key]++
					tk.Settle(Usage{InputTokens: 10, OutputTokens: 5})
				}
			}
		}
		if admitted["a"] != 5 || admitted["b"] != 3 {
			t.Fatalf("%s: admitted %v, want a:5 (its key limit) and b:3 (the team's 8)", team, admitted)
		}
		for _, l := range replicas {
			u, err := l.Usage(ctx, []Scope{{ID: "team:" + team, Limits: teamLim}, {ID: "key:" + team + "/a", Limits: keyLim}})
			if err != nil {
				t.Fatal(err)
			}
			if u[0].DayRequests != 8 || u[0].DayInputTokens != 80 || u[1].MinuteOutputTokens != 25 {
				t.Fatalf("%s usage = %+v", team, u)
			}
			if _, err := l.Peek(ctx, Request{Key: Scope{ID: "key:" + team + "/a", Limits: keyLim}, Team: teamScope(team, teamLim)}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Passthrough callers have one scope; their keys carry the caller as the tag.
	caller := Scope{ID: "caller:" + strings.Repeat("ab", 32), Limits: config.Limits{RequestsPerMinute: 2, ConcurrentRequests: 5}}
	for i := range 3 {
		tk, d, err := replicas[i%2].Admit(ctx, Request{Key: caller, Tokens: 10})
		if err != nil || d.Allowed != (i < 2) {
			t.Fatalf("caller admission %d: %+v %v", i, d, err)
		}
		tk.Settle(Usage{InputTokens: 1})
	}

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer cc.Close()
	slots := map[string]int64{} // tag -> slot
	nodes := map[string]bool{}
	var mu sync.Mutex // ForEachMaster visits the nodes concurrently
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		keys, err := m.Keys(ctx, "mg:rl:{*").Result()
		if err != nil {
			return err
		}
		for _, k := range keys {
			tag := k[strings.Index(k, "{")+1 : strings.Index(k, "}")]
			slot, err := m.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			prev, seen := slots[tag]
			slots[tag] = slot
			nodes[m.Options().Addr] = true
			mu.Unlock()
			if seen && prev != slot {
				return fmt.Errorf("tag %s spans slots %d and %d", tag, prev, slot)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != teams+1 {
		t.Errorf("tags found: %v, want %d teams and one caller", slots, teams)
	}
	if len(nodes) < 2 {
		t.Errorf("every team landed on one node (%v): the test proves little", nodes)
	}
}

// TestClusterNodeRestartKeepsSettlements: the node holding a team's counters restarts while
// its requests are in flight; their settlements wait and land once the node is back.
func TestClusterNodeRestartKeepsSettlements(t *testing.T) {
	cl := redistest.StartCluster(t, 3, "--appendonly", "yes", "--appendfsync", "always")
	c := newClock(start)
	l := newLimiter(t, Options{Store: "redis", Redis: config.Redis{Addrs: cl.Addrs(), Cluster: true}, Now: c.Now,
		StoreTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	lim := config.Limits{TokensPerDay: 10_000, ConcurrentRequests: 10}
	req := Request{Key: Scope{ID: "key:search/a", Limits: lim}, Team: teamScope("search", lim), Tokens: 500}
	var tickets []*Ticket
	for range 3 {
		tk, d, err := l.Admit(ctx, req)
		if err != nil || !d.Allowed {
			t.Fatalf("admit: %+v %v", d, err)
		}
		tickets = append(tickets, tk)
	}
	node := cl.NodeOf(t, "{search}")
	node.Kill()
	for _, tk := range tickets {
		tk.Settle(Usage{InputTokens: 100, OutputTokens: 20}) // the node is down: queued
	}
	node.Restart()
	cl.WaitOK(t)
	u := waitSettled(t, l, []Scope{req.Key, *req.Team}, 15*time.Second, "settlements lost across the node restart",
		func(u []ScopeUsage) bool { return u[1].DayInputTokens == 300 })
	if u[1].DayOutputTokens != 60 || u[1].Remaining["tokens_per_day"] != 10_000-360 || u[1].Remaining["concurrent_requests"] != 10 {
		t.Fatalf("team usage after the restart: %+v", u[1])
	}
}
