package proxy

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"

	"modelgate/apitest"
	"modelgate/config"
	"modelgate/jobs"
	"modelgate/platformsim"
	"modelgate/ratelimit"
	"modelgate/redisconn/redistest"
	"modelgate/reqlog"
	"modelgate/store"
	"modelgate/stored"
	"modelgate/testclock"
)

// bgYAML gives team alpha one concurrency slot, so a running job's hold on it shows.
const bgYAML = apitest.SimUpstreamYAML + `  max_retries: 0
models:
  - id: sim-chat
  - id: sim-slow
teams:
  - name: alpha
    limits:
      concurrent_requests: 1
      tokens_per_day: 5000000
    keys:
      - name: alpha-1
        key: mg-alpha-key-1
` + betaTeamYAML

// bgEnv is a test environment with an embedded record store, closed (jobs cancelled) at
// the end of the test.
func bgEnv(t *testing.T, mutate func(*config.Config), hooks ...reqlog.Hooks) *testEnv {
	t.Helper()
	st := tempBolt(t, store.BoltOptions{})
	o := envOptions{yaml: bgYAML, mutate: mutate, store: st}
	if len(hooks) > 0 {
		o.hooks = hooks[0]
	}
	env := startEnv(t, o)
	t.Cleanup(env.server.Close)
	return env
}

// submit posts a background request and returns the queued object.
func submit(t *testing.T, env *testEnv, key, body string) gjson.Result {
	t.Helper()
	status, _, b := env.do(t, "POST", "/v1/responses", key, []byte(body))
	if status != 200 {
		t.Fatalf("submit %s: %d %s", body, status, b)
	}
	return gjson.ParseBytes(b)
}

// pollUntil polls the response until its status is one of want.
func pollUntil(t *testing.T, env *testEnv, key, id string, want ...string) gjson.Result {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, _, b := env.do(t, "GET", "/v1/responses/"+id, key, nil)
		if status != 200 {
			t.Fatalf("poll %s: %d %s", id, status, b)
		}
		r := gjson.ParseBytes(b)
		for _, w := range want {
			if r.Get("status").Str == w {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed %s, want %v: %s", id, r.Get("status").Str, want, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func teamUsage(t *testing.T, env *testEnv, team string) ratelimit.ScopeUsage {
	t.Helper()
	var lim config.Limits
	for _, tm := range env.cfg.Teams {
		if tm.Name == team {
			lim = tm.Limits
		}
	}
	u, err := env.limiter.Usage(context.Background(), []ratelimit.Scope{{ID: "team:" + team, Limits: lim}})
	if err != nil || len(u) != 1 {
		t.Fatalf("usage: %v", err)
	}
	return u[0]
}

// silentReply makes the next platform call start and then say nothing for long: a job that
// stays in progress until it is cancelled.
func silentReply(env *testEnv) {
	env.sim.Enqueue("/v1/responses", platformsim.Reply{AfterEvents: 2, Silence: time.Hour})
}

func TestBackgroundSubmitPollCompleted(t *testing.T) {
	env := bgEnv(t, nil)
	q := submit(t, env, keyAlpha1, `{"model":"sim-chat","input":"hello","background":true}`)
	id := q.Get("id").Str
	if !strings.HasPrefix(id, "resp_") || q.Get("status").Str != "queued" || !q.Get("background").Bool() ||
		q.Get("object").Str != "response" || q.Get("model").Str != "sim-chat" || !q.Get("output").IsArray() {
		t.Fatalf("queued object: %s", q.Raw)
	}
	done := pollUntil(t, env, keyAlpha1, id, "completed", "failed")
	if done.Get("status").Str != "completed" || done.Get("id").Str != id || !done.Get("background").Bool() ||
		done.Get("output.0.content.0.text").Str != "Hello from sim-chat. You said: hello" || done.Get("created_at").Int() != q.Get("created_at").Int() {
		t.Fatalf("completed object: %s", done.Raw)
	}
	// The platform got a plain streamed call.
	up := lastUpstreamInput(t, env)
	if up.Get("background").Exists() || !up.Get("stream").Bool() {
		t.Errorf("upstream body: %s", up.Raw)
	}
	// Settled once with the platform's usage; the concurrency slot is free again.
	u := teamUsage(t, env, "alpha")
	if u.DayInputTokens != done.Get("usage.input_tokens").Int() || u.DayOutputTokens != done.Get("usage.output_tokens").Int() ||
		u.DayOutputTokens == 0 || u.Remaining["concurrent_requests"] != 1 {
		t.Errorf("usage after the job: %+v, response usage %s", u, done.Get("usage").Raw)
	}
	// The conversation continues from it.
	id2 := turn(t, env, keyAlpha1, `{"model":"sim-chat","input":"again","previous_response_id":"`+id+`"}`)
	if id2 == "" || lastUpstreamInput(t, env).Get("input.#").Int() != 3 {
		t.Errorf("continuing a background response sent %s", lastUpstreamInput(t, env).Get("input").Raw)
	}
	// Cancelling a finished one answers it as it is.
	status, _, b := env.do(t, "POST", "/v1/responses/"+id+"/cancel", keyAlpha1, nil)
	if status != 200 || gjson.GetBytes(b, "status").Str != "completed" {
		t.Errorf("cancel of a completed response: %d %s", status, b)
	}
	// A foreground response cannot be cancelled.
	status, _, b = env.do(t, "POST", "/v1/responses/"+id2+"/cancel", keyAlpha1, nil)
	if status != 400 || gjson.GetBytes(b, "error.type").Str != "invalid_request_error" {
		t.Errorf("cancel of a foreground response: %d %s", status, b)
	}
}

// TestBackgroundEndIsCountedBeforeItShows: a client that polls a job's end finds it in
// every count already: budgets, history and metrics. The metrics hook is held here, and
// while it is, the job must not read as completed.
func TestBackgroundEndIsCountedBeforeItShows(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hooks := reqlog.Hooks{RequestStarted: func() {}, RequestDone: func(r reqlog.RequestSummary) {
		if r.Route == jobs.Route {
			once.Do(func() { close(entered) })
			<-release
		}
	}}
	env := bgEnv(t, nil, hooks)
	var released sync.Once
	free := func() { released.Do(func() { close(release) }) }
	t.Cleanup(free) // before the server closes, should the test stop early
	id := submit(t, env, keyAlpha1, `{"model":"sim-chat","input":"hello","background":true}`).Get("id").Str
	<-entered
	status, _, b := env.do(t, "GET", "/v1/responses/"+id, keyAlpha1, nil)
	if got := gjson.GetBytes(b, "status").Str; status != 200 || got == "completed" {
		t.Errorf("while the metrics had not counted it: %d %s", status, got)
	}
	u := teamUsage(t, env, "alpha")
	free()
	done := pollUntil(t, env, keyAlpha1, id, "completed", "failed")
	if done.Get("status").Str != "completed" || u.DayOutputTokens != done.Get("usage.output_tokens").Int() || u.DayOutputTokens == 0 {
		t.Errorf("budgets before the end showed: %+v; the end: %s", u, done.Raw)
	}
}

func TestBackgroundCancelEndsThePlatformCall(t *testing.T) {
	env := bgEnv(t, nil)
	silentReply(env)
	id := submit(t, env, keyAlpha1, `{"model":"sim-slow","input":"think long","background":true}`).Get("id").Str
	pollUntil(t, env, keyAlpha1, id, "in_progress")

	// The running job holds the team's only concurrency slot.
	if status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"x"}`)); status != 429 {
		t.Errorf("a request while the job runs: %d %s", status, b)
	}
	before := len(env.sim.Cancellations())
	status, _, b := env.do(t, "POST", "/v1/responses/"+id+"/cancel", keyAlpha1, nil)
	if status != 200 || gjson.GetBytes(b, "status").Str != "cancelled" || gjson.GetBytes(b, "id").Str != id {
		t.Fatalf("cancel: %d %s", status, b)
	}
	if got := pollUntil(t, env, keyAlpha1, id, "cancelled", "failed", "completed"); got.Get("status").Str != "cancelled" {
		t.Errorf("after cancel: %s", got.Raw)
	}
	if !waitFor(5*time.Second, func() bool { return len(env.sim.Cancellations()) > before }) {
		t.Error("the platform call was not ended")
	}
	// Settled: the slot is free, and the cut stream was charged for its input and what it
	// streamed, not for the whole reservation.
	u := teamUsage(t, env, "alpha")
	if u.Remaining["concurrent_requests"] != 1 || u.DayInputTokens == 0 || u.DayOutputTokens > 100 {
		t.Errorf("usage after cancel: %+v", u)
	}
	if status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"x"}`)); status != 200 {
		t.Errorf("a request after the cancel: %d %s", status, b)
	}
	// Cancelling again answers the same.
	status, _, b = env.do(t, "POST", "/v1/responses/"+id+"/cancel", keyAlpha1, nil)
	if status != 200 || gjson.GetBytes(b, "status").Str != "cancelled" {
		t.Errorf("second cancel: %d %s", status, b)
	}
}

func TestBackgroundOtherTeamCannotPollOrCancel(t *testing.T) {
	env := bgEnv(t, nil)
	silentReply(env)
	id := submit(t, env, keyAlpha1, `{"model":"sim-chat","input":"mine","background":true}`).Get("id").Str
	pollUntil(t, env, keyAlpha1, id, "in_progress")
	for _, tc := range []struct{ method, suffix string }{{"GET", ""}, {"POST", "/cancel"}} {
		s1, _, theirs := env.do(t, tc.method, "/v1/responses/"+id+tc.suffix, keyBeta, nil)
		s2, _, missing := env.do(t, tc.method, "/v1/responses/resp_nosuch"+tc.suffix, keyBeta, nil)
		if s1 != 404 || s2 != 404 || !bytes.Equal(bytes.ReplaceAll(theirs, []byte(id), []byte("resp_nosuch")), missing) {
			t.Errorf("%s by another team: %d %s; missing: %d %s", tc.method, s1, theirs, s2, missing)
		}
	}
	if got := pollUntil(t, env, keyAlpha1, id, "in_progress"); got.Get("status").Str != "in_progress" {
		t.Errorf("the other team's cancel touched it: %s", got.Raw)
	}
}

func TestBackgroundRequestChecks(t *testing.T) {
	env := bgEnv(t, nil)
	for _, tc := range []struct{ name, body, param string }{
		{"store_false", `{"model":"sim-chat","input":"x","background":true,"store":false}`, "store"},
		{"stream", `{"model":"sim-chat","input":"x","background":true,"stream":true}`, "stream"},
		{"not_bool", `{"model":"sim-chat","input":"x","background":"yes"}`, "background"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(env.sim.Requests())
			status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(tc.body))
			if status != 400 || gjson.GetBytes(b, "error.param").Str != tc.param {
				t.Errorf("%d %s", status, b)
			}
			if len(env.sim.Requests()) != before {
				t.Error("a refused request went upstream")
			}
		})
	}
	// background: false is an ordinary request.
	status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"x","background":false}`))
	if status != 200 || gjson.GetBytes(b, "status").Str != "completed" {
		t.Errorf("background false: %d %s", status, b)
	}
}

func TestBackgroundStoreOffIsForwarded(t *testing.T) {
	env := bgEnv(t, func(c *config.Config) { c.Responses.Store = "off" })
	status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"x","background":true}`))
	if status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	if up := lastUpstreamInput(t, env); !up.Get("background").Bool() {
		t.Errorf("background did not reach the platform: %s", up.Raw)
	}
}

func TestBackgroundQueueCapPerTeam(t *testing.T) {
	env := bgEnv(t, func(c *config.Config) {
		c.Responses.BackgroundMaxQueuedPerTeam = 1
		c.Teams[0].Limits.ConcurrentRequests = 0
	})
	silentReply(env)
	id := submit(t, env, keyAlpha1, `{"model":"sim-chat","input":"one","background":true}`).Get("id").Str
	status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"two","background":true}`))
	if status != 429 || gjson.GetBytes(b, "error.code").Str != "rate_limit_exceeded" || !strings.Contains(gjson.GetBytes(b, "error.message").Str, "background") {
		t.Errorf("over the cap: %d %s", status, b)
	}
	// Another team has its own cap; foreground requests are not counted.
	submit(t, env, keyBeta, `{"model":"sim-chat","input":"theirs","background":true}`)
	if status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"fg"}`)); status != 200 {
		t.Errorf("foreground under the cap: %d %s", status, b)
	}
	// Once the job ends, there is room again.
	if status, _, b := env.do(t, "POST", "/v1/responses/"+id+"/cancel", keyAlpha1, nil); status != 200 {
		t.Fatalf("cancel: %d %s", status, b)
	}
	submit(t, env, keyAlpha1, `{"model":"sim-chat","input":"three","background":true}`)
}

func TestBackgroundDrainFailsRunningJobs(t *testing.T) {
	env := bgEnv(t, nil)
	silentReply(env)
	id := submit(t, env, keyAlpha1, `{"model":"sim-chat","input":"long","background":true}`).Get("id").Str
	pollUntil(t, env, keyAlpha1, id, "in_progress")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the drain deadline has passed
	env.server.DrainBackground(ctx)
	got := pollUntil(t, env, keyAlpha1, id, "failed", "cancelled", "completed")
	if got.Get("status").Str != "failed" || !strings.Contains(got.Get("error.message").Str, "shut down") || got.Get("error.code").Str != "server_error" {
		t.Errorf("after drain: %s", got.Raw)
	}
	if u := teamUsage(t, env, "alpha"); u.Remaining["concurrent_requests"] != 1 {
		t.Errorf("the slot was not given back: %+v", u)
	}
	// No new job is taken once draining.
	status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"x","background":true}`))
	if status == 200 {
		t.Errorf("a job was accepted after the drain: %s", b)
	}
}

func TestBackgroundPreviousResponseMustBeFinished(t *testing.T) {
	env := bgEnv(t, nil)
	silentReply(env)
	id := submit(t, env, keyBeta, `{"model":"sim-chat","input":"one","background":true}`).Get("id").Str
	pollUntil(t, env, keyBeta, id, "in_progress")
	status, _, b := env.do(t, "POST", "/v1/responses", keyBeta, []byte(`{"model":"sim-chat","input":"two","previous_response_id":"`+id+`"}`))
	if status != 400 || gjson.GetBytes(b, "error.param").Str != "previous_response_id" {
		t.Errorf("continuing a running response: %d %s", status, b)
	}
}

// sharedStore hides the embedded store's type: the server treats it as one that replicas
// share (as Redis), where a claim of another instance may be live.
type sharedStore struct{ store.Store }

func TestBackgroundOrphans(t *testing.T) {
	bolt := tempBolt(t, store.BoltOptions{})
	ctx := context.Background()
	// The records' expiry is an instant on the keepers' clock: the test's keepers and the
	// servers read one clock, as replicas of one deployment do.
	clock := testclock.Running()
	// As a replica over a shared store keeps them: one store value per record.
	k := stored.NewKeeper(bolt, stored.Options{TTL: time.Hour, Now: clock})
	unfinished := func(k *stored.Keeper, id, status, runner string) {
		t.Helper()
		obj := jobs.QueuedObject(id, "sim-chat", "", clock().Unix())
		if err := k.Keep(ctx, "team:alpha", &stored.Record{ID: id, Status: status, Model: "sim-chat", Response: obj}); err != nil {
			t.Fatal(err)
		}
		if runner != "" {
			if err := k.Claim(ctx, "team:alpha", id, runner, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Run("embedded_restart", func(t *testing.T) {
		own := tempBolt(t, store.BoltOptions{})
		// Left by the previous life of the process, which kept its records as a server over
		// the embedded store does: failed as the new one starts.
		prev := stored.NewKeeper(own, stored.Options{TTL: time.Hour, WriteBehind: true, Now: clock})
		unfinished(prev, "resp_prev1", "in_progress", "mg_previous")
		unfinished(prev, "resp_prev2", "queued", "mg_previous")
		prev.Flush()
		env := startEnv(t, envOptions{yaml: bgYAML, store: own, now: clock, limiterNow: clock})
		t.Cleanup(env.server.Close)
		k := env.server.keeper
		for _, id := range []string{"resp_prev1", "resp_prev2"} {
			r, err := k.Get(ctx, "team:alpha", id)
			if err != nil || r.Status != "failed" || !strings.Contains(gjson.GetBytes(r.Response, "error.message").Str, "restarted") {
				t.Fatalf("%s after restart: %+v %v", id, r, err)
			}
			if runner, _ := k.Runner(ctx, "team:alpha", id); runner != "" {
				t.Errorf("%s still claimed by %q", id, runner)
			}
		}
		got := pollUntil(t, env, keyAlpha1, "resp_prev1", "failed", "in_progress", "queued")
		if got.Get("status").Str != "failed" || got.Get("error.code").Str != "server_error" {
			t.Errorf("GET after restart: %s", got.Raw)
		}
	})

	t.Run("shared_store", func(t *testing.T) {
		unfinished(k, "resp_live", "in_progress", "mg_other_replica") // another replica runs it
		unfinished(k, "resp_lost", "in_progress", "")                 // its runner's claim expired
		env := startEnv(t, envOptions{yaml: bgYAML, store: sharedStore{bolt}, now: clock, limiterNow: clock})
		t.Cleanup(env.server.Close)
		if got := pollUntil(t, env, keyAlpha1, "resp_live", "in_progress", "failed"); got.Get("status").Str != "in_progress" {
			t.Errorf("a job another replica runs: %s", got.Raw)
		}
		if got := pollUntil(t, env, keyAlpha1, "resp_lost", "in_progress", "failed"); got.Get("status").Str != "failed" {
			t.Errorf("a job whose runner is gone: %s", got.Raw)
		}
		// Cancelling another replica's job marks the record; its runner stops at its next
		// heartbeat.
		status, _, b := env.do(t, "POST", "/v1/responses/resp_live/cancel", keyAlpha1, nil)
		if status != 200 || gjson.GetBytes(b, "status").Str != "cancelled" {
			t.Errorf("cancel of another replica's job: %d %s", status, b)
		}
	})
}

func TestBackgroundCancelThroughAnotherReplica(t *testing.T) {
	bolt := tempBolt(t, store.BoltOptions{})
	// Heartbeats every 20ms.
	env := startEnv(t, envOptions{yaml: bgYAML, store: sharedStore{bolt}, bgLease: 60 * time.Millisecond})
	t.Cleanup(env.server.Close)
	silentReply(env)
	id := submit(t, env, keyAlpha1, `{"model":"sim-chat","input":"long","background":true}`).Get("id").Str
	pollUntil(t, env, keyAlpha1, id, "in_progress")
	before := len(env.sim.Cancellations())

	// Another replica (a keeper of its own over the same store) records the cancel.
	other := stored.NewKeeper(bolt, stored.Options{TTL: time.Hour})
	r, err := other.Get(context.Background(), "team:alpha", id)
	if err != nil {
		t.Fatal(err)
	}
	jobs.EndRecord(r, stored.StatusCancelled, jobs.ResponseError{}, time.Now().Unix())
	if err := other.Update(context.Background(), "team:alpha", r); err != nil {
		t.Fatal(err)
	}
	// The runner notices at its heartbeat, ends the platform call and gives back its slot.
	waitFor(10*time.Second, func() bool { return jobStopped(t, env, before) })
	if len(env.sim.Cancellations()) == before {
		t.Error("the platform call was not ended")
	}
	if u := teamUsage(t, env, "alpha"); u.Remaining["concurrent_requests"] != 1 {
		t.Errorf("slot not given back: %+v", u)
	}
	if got := pollUntil(t, env, keyAlpha1, id, "cancelled", "completed", "failed"); got.Get("status").Str != "cancelled" {
		t.Errorf("final: %s", got.Raw)
	}
}

// jobStopped reports whether a job's platform call has ended (the platform saw more
// cancellations than before) and team alpha's one concurrency slot is free again.
func jobStopped(t *testing.T, env *testEnv, before int) bool {
	return len(env.sim.Cancellations()) > before && teamUsage(t, env, "alpha").Remaining["concurrent_requests"] == 1
}

func TestBackgroundDeleteEndsTheJob(t *testing.T) {
	env := bgEnv(t, nil)
	silentReply(env)
	id := submit(t, env, keyAlpha1, `{"model":"sim-chat","input":"long","background":true}`).Get("id").Str
	pollUntil(t, env, keyAlpha1, id, "in_progress")
	before := len(env.sim.Cancellations())
	if status, _, b := env.do(t, "DELETE", "/v1/responses/"+id, keyAlpha1, nil); status != 200 {
		t.Fatalf("delete: %d %s", status, b)
	}
	if !waitFor(5*time.Second, func() bool { return jobStopped(t, env, before) }) {
		t.Error("the deleted job's platform call still runs")
	}
	if status, _, b := env.do(t, "GET", "/v1/responses/"+id, keyAlpha1, nil); status != 404 {
		t.Errorf("deleted job came back: %d %s", status, b)
	}
}

// TestBackgroundTwoReplicasOnRedis: a job runs on the replica that accepted it; another
// replica sharing the Redis store polls it (live claim: left in progress) and cancels it
// (the runner stops at its next heartbeat).
func TestBackgroundTwoReplicasOnRedis(t *testing.T) {
	addr := redistest.Start(t).Addr
	// Heartbeats every lease/3. A lease of 90ms expired once under -race on a loaded box (a
	// renewal descheduled for longer than the lease), and the other replica then read the
	// job as orphaned: the lease is the test's margin against the scheduler, not its subject.
	const lease = 450 * time.Millisecond
	replica := func() *testEnv {
		st := store.NewRedis(redis.NewClient(&redis.Options{Addr: addr}))
		t.Cleanup(func() { st.Close() })
		env := startEnv(t, envOptions{yaml: bgYAML, store: st, bgLease: lease})
		t.Cleanup(env.server.Close)
		return env
	}
	a, b := replica(), replica()
	silentReply(a)
	id := submit(t, a, keyAlpha1, `{"model":"sim-chat","input":"long","background":true}`).Get("id").Str
	pollUntil(t, a, keyAlpha1, id, "in_progress")
	// Longer than the lease: the runner's renewals keep it alive for the other replica.
	time.Sleep(3 * lease)
	if got := pollUntil(t, b, keyAlpha1, id, "in_progress", "failed"); got.Get("status").Str != "in_progress" {
		t.Fatalf("the other replica's poll: %s", got.Raw)
	}
	before := len(a.sim.Cancellations())
	status, _, body := b.do(t, "POST", "/v1/responses/"+id+"/cancel", keyAlpha1, nil)
	if status != 200 || gjson.GetBytes(body, "status").Str != "cancelled" {
		t.Fatalf("cancel through the other replica: %d %s", status, body)
	}
	if !waitFor(5*time.Second, func() bool { return jobStopped(t, a, before) }) {
		t.Error("the runner did not stop its platform call")
	}
	if got := pollUntil(t, a, keyAlpha1, id, "cancelled", "completed", "failed"); got.Get("status").Str != "cancelled" {
		t.Errorf("final: %s", got.Raw)
	}
}

// TestBackgroundCancelBeforeThePlatformAnswers: a job cancelled while its platform call
// waits for the answer's headers ends cancelled, not failed. The job's context is cancelled
// with a cause, and the transport may report the cause rather than context.Canceled, which
// alone read as an unknown transport error.
func TestBackgroundCancelBeforeThePlatformAnswers(t *testing.T) {
	env := bgEnv(t, nil)
	env.sim.Enqueue("/v1/responses", platformsim.Reply{Delay: time.Hour})
	before := len(env.sim.Requests())
	id := submit(t, env, keyAlpha1, `{"model":"sim-slow","input":"think long","background":true}`).Get("id").Str
	if !waitFor(5*time.Second, func() bool { return len(env.sim.Requests()) > before }) {
		t.Fatal("the platform call did not start")
	}
	status, _, b := env.do(t, "POST", "/v1/responses/"+id+"/cancel", keyAlpha1, nil)
	if status != 200 || gjson.GetBytes(b, "status").Str != "cancelled" {
		t.Fatalf("cancel while the platform has not answered: %d %s", status, b)
	}
	if got := pollUntil(t, env, keyAlpha1, id, "cancelled", "failed", "completed"); got.Get("status").Str != "cancelled" {
		t.Errorf("after cancel: %s", got.Raw)
	}
}
