package proxy

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/config"
	"modelgate/store"
	"modelgate/testclock"
)

// storedEnv is a test environment with an embedded record store on the given clock.
func storedEnv(t *testing.T, mutate func(*config.Config), now func() time.Time) *testEnv {
	t.Helper()
	st := tempBolt(t, store.BoltOptions{Now: now})
	return startEnv(t, envOptions{mutate: mutate, store: st, now: now})
}

// turn sends one Responses request and returns the response id; a stream is read to its
// terminal event and the id taken from there.
func turn(t *testing.T, env *testEnv, key, body string) string {
	t.Helper()
	status, _, b := env.do(t, "POST", "/v1/responses", key, []byte(body))
	if status != 200 {
		t.Fatalf("POST %s: %d %s", body, status, b)
	}
	if !gjson.Get(body, "stream").Bool() {
		return gjson.GetBytes(b, "id").Str
	}
	for _, line := range strings.Split(string(b), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && gjson.Get(data, "type").Str == "response.completed" {
			return gjson.Get(data, "response.id").Str
		}
	}
	t.Fatalf("stream without response.completed: %s", b)
	return ""
}

// lastUpstreamInput is the input the platform received in its latest request.
func lastUpstreamInput(t *testing.T, env *testEnv) gjson.Result {
	t.Helper()
	reqs := env.sim.Requests()
	if len(reqs) == 0 {
		t.Fatal("nothing reached the platform")
	}
	return gjson.GetBytes(reqs[len(reqs)-1].Body, "@this")
}

func TestStoredChainSendsEveryEarlierTurn(t *testing.T) {
	env := storedEnv(t, nil, nil)
	id1 := turn(t, env, keyAlpha1, `{"model":"gpt-4o-mini","input":"one","instructions":"Be brief."}`)
	id2 := turn(t, env, keyAlpha1, `{"model":"gpt-4o-mini","stream":true,"input":[{"role":"user","content":"two"}],"previous_response_id":"`+id1+`"}`)
	id3 := turn(t, env, keyAlpha1, `{"model":"gpt-4o-mini","input":"three","previous_response_id":"`+id2+`"}`)
	if id1 == "" || id2 == "" || id3 == "" || id1 == id2 || id2 == id3 {
		t.Fatalf("ids %q %q %q", id1, id2, id3)
	}
	up := lastUpstreamInput(t, env)
	if up.Get("previous_response_id").Exists() || up.Get("instructions").Exists() {
		t.Errorf("previous_response_id or the first turn's instructions went upstream: %s", up.Raw)
	}
	var got []string
	for _, it := range up.Get("input").Array() {
		text := it.Get("content.0.text").Str
		if it.Get("content").Type == gjson.String {
			text = it.Get("content").Str
		}
		got = append(got, it.Get("role").Str+":"+text)
	}
	want := []string{
		"user:one", "assistant:Hello from sim-chat. You said: one",
		"user:two", "assistant:Hello from sim-chat. You said: two",
		"user:three",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("upstream input\n got %q\nwant %q", got, want)
	}
	// The platform's output items go back with their ids.
	if id := up.Get("input.1.id").Str; !strings.HasPrefix(id, "msg_") {
		t.Errorf("output item lost its id: %s", up.Get("input.1").Raw)
	}

	// Retrieve by another key of the same team: the object, its output and the parent.
	status, _, b := env.do(t, "GET", "/v1/responses/"+id3, keyAlpha2, nil)
	if status != 200 || gjson.GetBytes(b, "id").Str != id3 || gjson.GetBytes(b, "previous_response_id").Str != id2 ||
		gjson.GetBytes(b, "status").Str != "completed" || gjson.GetBytes(b, "output.0.content.0.text").Str != "Hello from sim-chat. You said: three" {
		t.Fatalf("GET %s: %d %s", id3, status, b)
	}
	if status, _, b := env.do(t, "GET", "/v1/responses/"+id3+"?stream=true", keyAlpha2, nil); status != 400 {
		t.Errorf("GET with stream=true: %d %s", status, b)
	}
	status, _, b = env.do(t, "GET", "/v1/responses/"+id2+"/input_items", keyAlpha2, nil)
	if status != 200 || gjson.GetBytes(b, "object").Str != "list" || gjson.GetBytes(b, "data.#").Int() != 1 ||
		gjson.GetBytes(b, "data.0.content").Str != "two" || gjson.GetBytes(b, "data.0.type").Str != "message" || gjson.GetBytes(b, "has_more").Bool() {
		t.Fatalf("input_items: %d %s", status, b)
	}
}

func TestStoredOtherTeamCannotTellItExists(t *testing.T) {
	env := storedEnv(t, nil, nil)
	id := turn(t, env, keyAlpha1, `{"model":"sim-chat","input":"secret"}`)
	before := env.upstreamCalls()
	for _, path := range []string{"/v1/responses/" + id, "/v1/responses/" + id + "/input_items"} {
		for _, method := range []string{"GET", "DELETE"} {
			if method == "DELETE" && strings.HasSuffix(path, "input_items") {
				continue
			}
			s1, _, theirs := env.do(t, method, path, keyBeta, nil)
			missingPath := strings.Replace(path, id, "resp_nosuch", 1)
			s2, _, missing := env.do(t, method, missingPath, keyBeta, nil)
			if s1 != 404 || s2 != 404 || !bytes.Equal(bytes.ReplaceAll(theirs, []byte(id), []byte("resp_nosuch")), missing) {
				t.Errorf("%s %s by another team: %d %s; a missing id: %d %s", method, path, s1, theirs, s2, missing)
			}
		}
	}
	status, _, b := env.do(t, "POST", "/v1/responses", keyBeta, []byte(`{"model":"sim-chat","input":"more","previous_response_id":"`+id+`"}`))
	if status != 400 || gjson.GetBytes(b, "error.code").Str != "previous_response_not_found" || gjson.GetBytes(b, "error.param").Str != "previous_response_id" {
		t.Errorf("another team continuing: %d %s", status, b)
	}
	if n := env.upstreamCalls(); n != before {
		t.Errorf("%d calls reached the platform for refused requests", n-before)
	}
	// Still there for its own team.
	if status, _, b := env.do(t, "GET", "/v1/responses/"+id, keyAlpha2, nil); status != 200 {
		t.Errorf("own team: %d %s", status, b)
	}
}

func TestStoredUnknownIDsNeverGoUpstream(t *testing.T) {
	env := storedEnv(t, nil, nil)
	for _, body := range []string{
		`{"model":"sim-chat","input":"x","previous_response_id":"resp_unknown"}`,
		`{"model":"sim-chat","input":"x","previous_response_id":"../../etc"}`,
		`{"model":"sim-chat","input":"x","previous_response_id":""}`,
		`{"model":"sim-chat","input":"x","stream":true,"previous_response_id":"resp_unknown"}`,
	} {
		status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(body))
		if status != 400 || gjson.GetBytes(b, "error.code").Str != "previous_response_not_found" {
			t.Errorf("%s: %d %s", body, status, b)
		}
	}
	for _, body := range []string{
		`{"model":"sim-chat","input":"x","previous_response_id":7}`,
		`{"model":"sim-chat","input":"x","store":"yes"}`,
	} {
		if status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(body)); status != 400 || gjson.GetBytes(b, "error.code").Str != "invalid_type" {
			t.Errorf("%s: %d %s", body, status, b)
		}
	}
	if n := env.upstreamCalls(); n != 0 {
		t.Errorf("%d refused requests reached the platform", n)
	}
}

func TestStoredStoreFalseAndDelete(t *testing.T) {
	env := storedEnv(t, nil, nil)
	notKept := turn(t, env, keyAlpha1, `{"model":"sim-chat","input":"forget me","store":false}`)
	if status, _, b := env.do(t, "GET", "/v1/responses/"+notKept, keyAlpha1, nil); status != 404 {
		t.Errorf("store:false was kept: %d %s", status, b)
	}
	// store:false with a previous_response_id still continues, and is still not kept.
	kept := turn(t, env, keyAlpha1, `{"model":"sim-chat","input":"keep me"}`)
	next := turn(t, env, keyAlpha1, `{"model":"sim-chat","input":"and then","store":false,"previous_response_id":"`+kept+`"}`)
	if n := lastUpstreamInput(t, env).Get("input.#").Int(); n != 3 {
		t.Errorf("store:false continuation sent %d items, want 3", n)
	}
	if status, _, _ := env.do(t, "GET", "/v1/responses/"+next, keyAlpha1, nil); status != 404 {
		t.Errorf("store:false continuation was kept")
	}

	status, _, b := env.do(t, "DELETE", "/v1/responses/"+kept, keyAlpha2, nil)
	if status != 200 || gjson.GetBytes(b, "deleted").Type != gjson.True || gjson.GetBytes(b, "id").Str != kept {
		t.Fatalf("DELETE: %d %s", status, b)
	}
	if status, _, _ := env.do(t, "GET", "/v1/responses/"+kept, keyAlpha1, nil); status != 404 {
		t.Errorf("deleted response still served")
	}
	if status, _, _ := env.do(t, "DELETE", "/v1/responses/"+kept, keyAlpha1, nil); status != 404 {
		t.Errorf("second DELETE: %d", status)
	}
	before := env.upstreamCalls()
	if status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"x","previous_response_id":"`+kept+`"}`)); status != 400 {
		t.Errorf("continuing a deleted response: %d %s", status, b)
	}
	if env.upstreamCalls() != before {
		t.Error("a continuation of a deleted response reached the platform")
	}
}

func TestStoredOffForwardsUntouched(t *testing.T) {
	env := storedEnv(t, func(c *config.Config) { c.Responses.Store = "off" }, nil)
	body := `{"model":"sim-chat","input":"x","previous_response_id":"resp_platform_kept","store":true}`
	if status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(body)); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	if got := string(env.sim.Requests()[0].Body); got != body {
		t.Errorf("store: off changed the body:\n got %s\nwant %s", got, body)
	}
	id := gjson.GetBytes(env.sim.Requests()[0].Body, "id").Str
	if status, _, _ := env.do(t, "GET", "/v1/responses/resp_x"+id, keyAlpha1, nil); status != 404 {
		t.Errorf("GET with store: off: %d", status)
	}
}

// TestStoredAdmissionCountsExpandedInput: a short new turn on a long conversation is
// admitted by what the platform will be sent, not by the few bytes the client sent.
func TestStoredAdmissionCountsExpandedInput(t *testing.T) {
	env := storedEnv(t, func(c *config.Config) {
		c.Teams[0].Keys[1].Limits.TokensPerMinute = 500
	}, nil)
	long := strings.Repeat("lorem ipsum ", 400) // ~1200 tokens by the estimate
	id := turn(t, env, keyAlpha1, `{"model":"sim-chat","input":"`+long+`","max_output_tokens":16}`)
	// The same short turn with no history fits the key's budget...
	turn(t, env, keyAlpha2, `{"model":"sim-chat","input":"hi","max_output_tokens":16}`)
	before := env.upstreamCalls()
	// ...but not once it carries the conversation.
	status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha2, []byte(`{"model":"sim-chat","input":"hi","max_output_tokens":16,"previous_response_id":"`+id+`"}`))
	if status != 429 {
		t.Fatalf("expanded turn over the key's token budget: %d %s", status, b)
	}
	if env.upstreamCalls() != before {
		t.Error("a refused turn reached the platform")
	}
}

// TestStoredExpiry moves the server's and the store's clock past the ttl.
func TestStoredExpiry(t *testing.T) {
	clk := testclock.New()
	env := storedEnv(t, func(c *config.Config) { c.Responses.StoreTTL = time.Hour }, clk.Now)
	id := turn(t, env, keyAlpha1, `{"model":"sim-chat","input":"x"}`)
	clk.Advance(59 * time.Minute)
	if status, _, _ := env.do(t, "GET", "/v1/responses/"+id, keyAlpha1, nil); status != 200 {
		t.Fatalf("expired early: %d", status)
	}
	clk.Advance(time.Minute)
	if status, _, _ := env.do(t, "GET", "/v1/responses/"+id, keyAlpha1, nil); status != 404 {
		t.Errorf("served after its ttl: %d", status)
	}
	if status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"x","previous_response_id":"`+id+`"}`)); status != 400 ||
		gjson.GetBytes(b, "error.code").Str != "previous_response_not_found" {
		t.Errorf("continuing an expired response: %d %s", status, b)
	}
}

// TestStoredToolCallAndReasoningContinue: the agent loop a Responses application runs. The
// model calls a tool; the client answers with only the function_call_output and the
// previous id; the platform must receive the call it made (with its ids) and the reasoning
// item it handed back, encrypted content included, to continue.
func TestStoredToolCallAndReasoningContinue(t *testing.T) {
	env := storedEnv(t, func(c *config.Config) {
		c.Models = append(c.Models, config.Model{ID: "sim-reasoning", Upstream: "sim-reasoning"})
	}, nil)
	tools := `"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`
	status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-tools","input":"weather in Paris?",`+tools+`}`))
	call := gjson.GetBytes(b, `output.#(type=="function_call")`)
	if status != 200 || !call.Exists() {
		t.Fatalf("first turn: %d %s", status, b)
	}
	id := gjson.GetBytes(b, "id").Str
	next := `{"model":"sim-tools","stream":true,` + tools + `,"previous_response_id":"` + id + `","input":[{"type":"function_call_output","call_id":"` + call.Get("call_id").Str + `","output":"sunny"}]}`
	id2 := turn(t, env, keyAlpha1, next)
	up := lastUpstreamInput(t, env).Get("input")
	if up.Get("#").Int() != 3 || up.Get("1.type").Str != "function_call" || up.Get("1.id").Str != call.Get("id").Str ||
		up.Get("1.call_id").Str != call.Get("call_id").Str || up.Get("2.type").Str != "function_call_output" {
		t.Fatalf("tool turn sent %s", up.Raw)
	}
	status, _, b = env.do(t, "GET", "/v1/responses/"+id2, keyAlpha1, nil)
	if status != 200 || gjson.GetBytes(b, "output.0.content.0.text").Str != "Hello from sim-tools. The tool returned: sunny" {
		t.Fatalf("tool answer: %d %s", status, b)
	}

	r1 := turn(t, env, keyAlpha1, `{"model":"sim-reasoning","input":"think","include":["reasoning.encrypted_content"]}`)
	turn(t, env, keyAlpha1, `{"model":"sim-reasoning","input":"more","include":["reasoning.encrypted_content"],"previous_response_id":"`+r1+`"}`)
	reasoning := lastUpstreamInput(t, env).Get(`input.#(type=="reasoning")`)
	if !strings.HasPrefix(reasoning.Get("encrypted_content").Str, "enc_") {
		t.Errorf("the reasoning item did not go back with its encrypted content: %s", lastUpstreamInput(t, env).Get("input").Raw)
	}
}

func TestStoredInputItemsPages(t *testing.T) {
	env := storedEnv(t, nil, nil)
	id := turn(t, env, keyAlpha1, `{"model":"sim-chat","input":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"type":"message","id":"msg_c","role":"user","content":"c"}]}`)
	texts := func(b []byte) string {
		var out []string
		for _, it := range gjson.GetBytes(b, "data").Array() {
			out = append(out, it.Get("content").Str)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		query, want string
		more        bool
	}{
		{"", "c,b,a", false},
		{"?order=asc", "a,b,c", false},
		{"?limit=2", "c,b", true},
		{"?limit=2&after=msg_" + id + "_1", "a", false},
		{"?order=asc&after=msg_c", "", false},
		{"?after=nosuch", "", false},
	} {
		status, _, b := env.do(t, "GET", "/v1/responses/"+id+"/input_items"+tc.query, keyAlpha1, nil)
		if status != 200 || texts(b) != tc.want || gjson.GetBytes(b, "has_more").Bool() != tc.more {
			t.Errorf("%s: %d %s", tc.query, status, b)
		}
	}
	for _, q := range []string{"?limit=0", "?limit=101", "?limit=x", "?order=up"} {
		if status, _, b := env.do(t, "GET", "/v1/responses/"+id+"/input_items"+q, keyAlpha1, nil); status != 400 {
			t.Errorf("%s: %d %s", q, status, b)
		}
	}
}

// TestStoredConversationTooLargeToSend: a conversation heavier than a request body may be
// is refused with a clear 400 before anything is read into a body or sent.
func TestStoredConversationTooLargeToSend(t *testing.T) {
	env := storedEnv(t, func(c *config.Config) { c.Server.MaxBodyBytes = 4 << 10 }, nil)
	id := ""
	for i := range 3 {
		body := `{"model":"sim-chat","input":"` + strings.Repeat("x", 1500) + `"`
		if id != "" {
			body += `,"previous_response_id":"` + id + `"`
		}
		status, _, b := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(body+"}"))
		if i < 2 && status != 200 {
			t.Fatalf("turn %d: %d %s", i, status, b)
		}
		if i == 2 {
			if status != 400 || gjson.GetBytes(b, "error.code").Str != "context_length_exceeded" {
				t.Fatalf("turn %d over the body limit once expanded: %d %s", i, status, b)
			}
			if n := env.upstreamCalls(); n != 2 {
				t.Errorf("%d calls reached the platform, want 2", n)
			}
		}
		id = gjson.GetBytes(b, "id").Str
	}
}

// TestStoredScopeKey: under responses.scope: key a kept response is the creating key's
// alone. Another key of the same team gets, on every route, exactly what an unknown id
// gets; under the default (team) every key of the team sees it.
func TestStoredScopeKey(t *testing.T) {
	for _, scope := range []string{"team", "key"} {
		t.Run(scope, func(t *testing.T) {
			env := storedEnv(t, func(c *config.Config) { c.Responses.Scope = scope }, nil)
			id := turn(t, env, keyAlpha1, `{"model":"gpt-4o-mini","input":"mine"}`)
			// An id of the same length that names nothing, so the two answers can be compared
			// byte for byte once the ids are swapped.
			unknown := id[:len(id)-4] + "zzzz"
			probes := []struct{ method, path, body string }{
				{"GET", "/v1/responses/%s", ""},
				{"GET", "/v1/responses/%s/input_items", ""},
				{"POST", "/v1/responses/%s/cancel", ""},
				{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":"next","previous_response_id":"%s"}`},
				{"DELETE", "/v1/responses/%s", ""}, // last: a team-scoped delete removes it
			}
			for _, pr := range probes {
				fill := func(v string) (string, []byte) {
					path, body := pr.path, pr.body
					if strings.Contains(path, "%s") {
						path = strings.Replace(path, "%s", v, 1)
					}
					return path, []byte(strings.Replace(body, "%s", v, 1))
				}
				path, body := fill(id)
				gotStatus, _, got := env.do(t, pr.method, path, keyAlpha2, body)
				upath, ubody := fill(unknown)
				wantStatus, _, want := env.do(t, pr.method, upath, keyAlpha2, ubody)
				sameAsUnknown := gotStatus == wantStatus && strings.ReplaceAll(string(got), id, unknown) == string(want)
				if scope == "key" && !sameAsUnknown {
					t.Errorf("%s %s by another key: %d %s; unknown id: %d %s", pr.method, pr.path, gotStatus, got, wantStatus, want)
				}
				if scope == "team" && sameAsUnknown {
					t.Errorf("%s %s by another key of the team: answered as unknown: %d %s", pr.method, pr.path, gotStatus, got)
				}
			}
			// The creating key still has it under key scope.
			status, _, b := env.do(t, "GET", "/v1/responses/"+id, keyAlpha1, nil)
			if scope == "key" && status != 200 {
				t.Fatalf("the creating key lost its response: %d %s", status, b)
			}
		})
	}
}
