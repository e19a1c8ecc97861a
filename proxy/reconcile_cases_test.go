package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/accounting"
	"modelgate/apitest"
	"modelgate/platformsim"
)

// The mixed run of TestReconcileMixedRunWithThePlatformsBill: one case per way a request can
// end, on the three client routes, each with a simulated platform of its own (chosen by the
// case id its prompt holds, as the soak chooses by its workers' marks) so that what is scripted for one case meets only that case.

// reconcileCap is the output cap every case asks for: the output part of its reservation.
const reconcileCap = 256

// clientMove is how a case's client behaves.
type clientMove int

const (
	readWhole        clientMove = iota // reads the answer to its end
	leaveAfterDeltas                   // reads the deltas the platform sends before it stalls, then leaves
	leaveOnceBilled                    // leaves once the platform billed the call, before any header
	backgroundDone                     // submits a background job and polls it to its end
	backgroundCancel                   // submits a background job and cancels it once it runs
)

// reconcileCase is one request of the mixed run.
type reconcileCase struct {
	id      string
	path    string
	body    string
	replies []platformsim.Reply // scripted on the case's own platform, first in, first out
	move    clientMove
	// deltas is how many output deltas the platform sends before it stalls (leaveAfterDeltas).
	deltas int
	// refuseFirst, for a fan-out, answers the first call to arrive with a platform 500 once
	// the condition holds (the other choice answered, or billed as far as it goes).
	refuseFirst func(p *casePlatform) bool
	// want is the usage_estimated the case is settled with; "" is the platform's own figure.
	want string
	// reserved is how many platform calls are charged their reservation (want set, not
	// early_cut); the estimated cases here have one.
	reserved int64
	refused  bool   // the platform refuses every call: it bills nothing
	team     string // filled in by the run
}

// reconcileCases is the mix. The bodies are templates of the model and the case's own text
// (so each case's input estimate differs); every body asks for reconcileCap output tokens.
func reconcileCases() []reconcileCase {
	const (
		chat     = `{"model":"%s","max_tokens":256,"messages":[{"role":"user","content":"%s"}]}`
		chatS    = `{"model":"%s","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"%s"}]}`
		chatN    = `{"model":"%s","max_tokens":256,"n":2,"messages":[{"role":"user","content":"%s"}]}`
		chatNS   = `{"model":"%s","max_tokens":256,"n":2,"stream":true,"messages":[{"role":"user","content":"%s"}]}`
		msgs     = `{"model":"%s","max_tokens":256,"system":"Be brief.","messages":[{"role":"user","content":"%s"}]}`
		msgsS    = `{"model":"%s","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"%s"}]}`
		resp     = `{"model":"%s","max_output_tokens":256,"instructions":"Be brief.","input":"%s"}`
		respS    = `{"model":"%s","max_output_tokens":256,"stream":true,"input":"%s"}`
		respBg   = `{"model":"%s","max_output_tokens":256,"background":true,"input":"%s"}`
		pChat    = "/v1/chat/completions"
		pMsgs    = "/v1/messages"
		pResp    = "/v1/responses"
		resetAt6 = 6 // events before a reset: 2 text deltas
	)
	reset := []platformsim.Reply{{Fault: platformsim.FaultResetMidStream, AfterEvents: resetAt6}}
	truncate := []platformsim.Reply{{Fault: platformsim.FaultTruncate}}
	noUsage := []platformsim.Reply{{Fault: platformsim.FaultNoUsage}}
	// A generated stream that stalls after 8 events: 4 text deltas.
	stallAfter8 := platformsim.Reply{Fault: platformsim.FaultStallMidStream, AfterEvents: 8}
	// A fan-out choice refused once the other one is answered whole, or, when it stalls,
	// billed as far as it goes: the platform billed it, whatever the order on a loaded machine.
	answered := func(p *casePlatform) bool { return p.served.Load() >= 1 }
	stalledAt2 := func(p *casePlatform) bool { return billedTotal(p.sim).OutputTokens >= 2 }
	model := "sim-chat"
	cases := []struct {
		c           reconcileCase
		tmpl, model string
	}{
		// Answered whole: the platform's figure.
		{reconcileCase{id: "plain-chat", path: pChat}, chat, model},
		{reconcileCase{id: "plain-messages", path: pMsgs}, msgs, model},
		{reconcileCase{id: "plain-responses", path: pResp}, resp, model},
		{reconcileCase{id: "stream-chat", path: pChat}, chatS, model},
		{reconcileCase{id: "stream-messages", path: pMsgs}, msgsS, model},
		{reconcileCase{id: "stream-responses", path: pResp}, respS, model},
		{reconcileCase{id: "fanout-chat", path: pChat}, chatN, model},
		{reconcileCase{id: "fanout-chat-stream", path: pChat}, chatNS, model},
		// Refused by the platform: nothing, or only the call that was answered.
		{reconcileCase{id: "refused-429-chat", path: pChat, refused: true}, chat, "sim-429"},
		{reconcileCase{id: "refused-500-messages", path: pMsgs, refused: true}, msgsS, "sim-500"},
		{reconcileCase{id: "refused-500-responses", path: pResp, refused: true}, resp, "sim-500"},
		{reconcileCase{id: "refused-then-answered-responses", path: pResp,
			replies: []platformsim.Reply{status(http.StatusTooManyRequests, map[string]string{"Retry-After-Ms": "1"})}}, respS, model},
		// One choice of a fan-out refused before any byte: the other one's bill (issue 26).
		{reconcileCase{id: "fanout-one-refused-chat", path: pChat, refuseFirst: answered}, chatN, model},
		{reconcileCase{id: "fanout-one-refused-chat-stream", path: pChat, refuseFirst: answered}, chatNS, model},
		{reconcileCase{id: "fanout-one-refused-survivor-stalls", path: pChat, refuseFirst: stalledAt2,
			replies: []platformsim.Reply{{Fault: platformsim.FaultStallMidStream, AfterEvents: resetAt6}},
			want:    accounting.FanoutCut, reserved: 1}, chatNS, model},
		// Cut by the platform mid-stream.
		{reconcileCase{id: "reset-chat", path: pChat, replies: reset, want: accounting.StreamCut, reserved: 1}, chatS, model},
		{reconcileCase{id: "reset-messages", path: pMsgs, replies: reset, want: accounting.StreamCut, reserved: 1}, msgsS, model},
		{reconcileCase{id: "reset-responses", path: pResp, replies: reset, want: accounting.StreamCut, reserved: 1}, respS, model},
		{reconcileCase{id: "truncated-chat", path: pChat, replies: truncate, want: accounting.StreamCut, reserved: 1}, chatS, model},
		{reconcileCase{id: "truncated-messages", path: pMsgs, replies: truncate, want: accounting.StreamCut, reserved: 1}, msgsS, model},
		{reconcileCase{id: "truncated-responses", path: pResp, replies: truncate, want: accounting.StreamCut, reserved: 1}, respS, model},
		// The platform's error event: a complete chat or Messages stream missing only its
		// figure (early_cut); on /v1/responses a cut (stream_cut).
		{reconcileCase{id: "error-event-chat", path: pChat, want: accounting.EarlyEnd}, chatS, "sim-error-event"},
		{reconcileCase{id: "error-event-messages", path: pMsgs, want: accounting.EarlyEnd}, msgsS, "sim-error-event"},
		{reconcileCase{id: "error-event-responses", path: pResp, want: accounting.StreamCut, reserved: 1}, respS, "sim-error-event"},
		// A terminal event without usage, and a body without it.
		{reconcileCase{id: "no-usage-chat", path: pChat, replies: noUsage, want: accounting.EarlyEnd}, chatS, model},
		{reconcileCase{id: "no-usage-messages", path: pMsgs, replies: noUsage, want: accounting.EarlyEnd}, msgsS, model},
		{reconcileCase{id: "no-usage-responses", path: pResp, replies: noUsage, want: accounting.StreamCut, reserved: 1}, respS, model},
		{reconcileCase{id: "no-usage-body-chat", path: pChat, replies: noUsage, want: accounting.BadBody, reserved: 1}, chat, model},
		// The client leaves: mid-stream (modelgate's own cut), or before the headers of a
		// call the platform already billed.
		{reconcileCase{id: "client-gone-chat", path: pChat, replies: []platformsim.Reply{stallAfter8}, move: leaveAfterDeltas, deltas: 4, want: accounting.EarlyEnd}, chatS, model},
		{reconcileCase{id: "client-gone-messages", path: pMsgs, replies: []platformsim.Reply{stallAfter8}, move: leaveAfterDeltas, deltas: 4, want: accounting.EarlyEnd}, msgsS, model},
		{reconcileCase{id: "client-gone-responses", path: pResp, replies: []platformsim.Reply{stallAfter8}, move: leaveAfterDeltas, deltas: 4, want: accounting.EarlyEnd}, respS, model},
		{reconcileCase{id: "client-gone-before-headers", path: pChat, replies: []platformsim.Reply{{Fault: platformsim.FaultStallAfterBilling}},
			move: leaveOnceBilled, want: accounting.NoAnswer, reserved: 1}, chat, model},
		// Background jobs: completed, cut by the platform, and cancelled by their client.
		// Nothing outside a job shows how far it has read, so the cancelled one's stream
		// stalls before its first delta: what was read (nothing) is then known exactly.
		{reconcileCase{id: "background-completed", path: pResp, move: backgroundDone}, respBg, model},
		{reconcileCase{id: "background-reset", path: pResp, replies: reset, move: backgroundDone, want: accounting.StreamCut, reserved: 1}, respBg, model},
		{reconcileCase{id: "background-cancelled", path: pResp, replies: []platformsim.Reply{{Fault: platformsim.FaultStallMidStream, AfterEvents: 2}},
			move: backgroundCancel, want: accounting.EarlyEnd}, respBg, model},
	}
	out := make([]reconcileCase, len(cases))
	for i, c := range cases {
		c.c.id = "rc-" + c.c.id
		c.c.body = fmt.Sprintf(c.tmpl, c.model, fmt.Sprintf("hello %s%s", c.c.id, strings.Repeat(" and more", i)))
		c.c.team = []string{"alpha", "beta"}[i%2]
		out[i] = c.c
	}
	return out
}

// casePlatform is one case's simulated platform.
type casePlatform struct {
	id     string
	sim    *platformsim.Sim
	refuse func(p *casePlatform) bool // see reconcileCase.refuseFirst
	calls  atomic.Int64               // calls received
	served atomic.Int64               // calls the sim finished answering
}

// reconcilePlatform routes each call to its case's platform by the case's id, which each
// case's prompt holds ("hello rc-..."): the request id modelgate forwards is its own, never
// the client's.
type reconcilePlatform struct {
	mu    sync.Mutex
	cases map[string]*casePlatform
}

// caseIDIn is the case id that follows "hello " in a call's body, "" if none does.
func caseIDIn(body []byte) string {
	_, rest, ok := bytes.Cut(body, []byte("hello rc-"))
	if !ok {
		return ""
	}
	end := bytes.IndexAny(rest, " \"\\")
	if end < 0 {
		return ""
	}
	return "rc-" + string(rest[:end])
}

// billedTotal is all a case's platform billed, under whatever request ids.
func billedTotal(sim *platformsim.Sim) platformsim.Totals {
	var sum platformsim.Totals
	for _, b := range sim.Billed() {
		sum = addTotals(sum, b)
	}
	return sum
}

func (u *reconcilePlatform) get(id string) *casePlatform {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cases[id]
}

func (u *reconcilePlatform) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	p := u.get(caseIDIn(body))
	if p == nil {
		http.Error(w, "reconcile: a call of no case", http.StatusTeapot)
		return
	}
	if p.calls.Add(1) == 1 && p.refuse != nil {
		// Refused before any byte, once the other choice was billed; nothing is billed
		// for this one. The wait is bounded: a case that never gets there fails its check.
		waitFor(5*time.Second, func() bool { return p.refuse(p) })
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write(errorJSON("server_error", "server_error", "one choice failed"))
		return
	}
	p.sim.ServeHTTP(w, r)
	p.served.Add(1)
}

// runCase makes the case's request as its client would, and returns once the client is
// done with it (a background job may still be running).
func runCase(t *testing.T, env *resEnv, up *reconcilePlatform, key string, c reconcileCase) {
	t.Helper()
	hdr := []string{"X-Request-Id", c.id}
	switch c.move {
	case readWhole:
		env.call(t, c.path, key, c.body, hdr...)
	case leaveAfterDeltas:
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		resp := env.send(t, ctx, c.path, key, c.body, hdr...)
		defer resp.Body.Close()
		if seen := readDeltas(resp, c.deltas); seen != c.deltas {
			t.Errorf("%s: the stream ended after %d of the %d deltas before the stall", c.id, seen, c.deltas)
		}
	case leaveOnceBilled:
		p := up.get(c.id)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			waitFor(5*time.Second, func() bool { return billedTotal(p.sim).Requests > 0 })
			cancel()
		}()
		req := apitest.NewRequest(t, ctx, http.MethodPost, env.front.URL+c.path, key, strings.NewReader(c.body), hdr...)
		if resp, err := env.client.Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("%s: answered despite the stall", c.id)
		}
	case backgroundDone, backgroundCancel:
		code, _, raw := env.call(t, c.path, key, c.body, hdr...)
		job := gjson.GetBytes(raw, "id").Str
		if code != http.StatusOK || job == "" {
			t.Errorf("%s: submit: %d %s", c.id, code, raw)
			return
		}
		if c.move == backgroundCancel {
			// Running means the platform's stream began: the cancel is modelgate's cut of
			// a started stream, not a call left without an answer.
			pollJob(t, env, key, job, "in_progress")
			if code, _, raw := env.call(t, "/v1/responses/"+job+"/cancel", key, ""); code != http.StatusOK {
				t.Errorf("%s: cancel: %d %s", c.id, code, raw)
			}
		}
		pollJob(t, env, key, job, "completed", "failed", "cancelled", "incomplete")
	}
}

// readDeltas reads a stream until it has seen want output deltas (in any of the three
// dialects) or it ends, and returns how many it saw.
func readDeltas(resp *http.Response, want int) int {
	br := bufio.NewReader(resp.Body)
	seen := 0
	for seen < want {
		line, err := br.ReadString('\n')
		if err != nil {
			return seen
		}
		data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: ")
		if !ok {
			continue
		}
		r := gjson.Parse(data)
		switch {
		case r.Get("choices.0.delta.content").Str != "", // chat
			r.Get("type").Str == "content_block_delta",        // Messages
			r.Get("type").Str == "response.output_text.delta": // Responses
			seen++
		}
	}
	return seen
}

// pollJob polls a background response until its status is one of want (bounded).
func pollJob(t *testing.T, env *resEnv, key, id string, want ...string) {
	t.Helper()
	var last string
	ok := waitFor(10*time.Second, func() bool {
		_, _, b := env.do(t, http.MethodGet, "/v1/responses/"+id, key, nil)
		last = gjson.GetBytes(b, "status").Str
		for _, w := range want {
			if last == w {
				return true
			}
		}
		return false
	})
	if !ok {
		t.Errorf("background %s stayed %q, want one of %v", id, last, want)
	}
}
