package platformsim

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// slowEventDelay is sim-slow's pause between events when Options.EventDelay is not set.
const slowEventDelay = 50 * time.Millisecond

// stallOpenEvents is how many events sim-stall's stream sends before it goes silent:
// response.created and response.in_progress, neither of them output.
const stallOpenEvents = 2

// serveResponses is POST /v1/responses: authenticate, apply a script, validate, generate.
func (s *Sim) serveResponses(w http.ResponseWriter, r *http.Request) {
	body, tooLarge := s.recordRequest(r)
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeAPIError(w, &apiError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error",
			message: "Method not allowed; use POST."})
		return
	}
	key := s.bearerKey(r)
	if key == "" {
		writeAPIError(w, &apiError{status: http.StatusUnauthorized, typ: "invalid_request_error", code: "invalid_api_key",
			message: "Incorrect API key provided."})
		return
	}
	rep, scripted := s.modelReply(body)
	if !scripted {
		rep, scripted = s.dequeue(r)
	}
	if scripted && rep.replaces() {
		s.send(w, r, rep.answer(), rep)
		return
	}
	switch {
	case tooLarge:
		s.send(w, r, errorAnswer(&apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error",
			message: "Request body too large."}), rep)
	case s.opts.Minimal:
		s.send(w, r, s.minimalAnswer(body, key), rep)
	default:
		req, e := parseRequest(body)
		if e != nil {
			s.send(w, r, errorAnswer(e), rep)
			return
		}
		s.send(w, r, s.generate(req, key), rep)
	}
}

// retryInASecond is the error answer of a platform that asks to be retried after a second.
func retryInASecond(e *apiError) answer {
	a := errorAnswer(e)
	a.header.Set("Retry-After", "1")
	return a
}

// generate answers a valid request the way its model behaves.
func (s *Sim) generate(req *request, key string) answer {
	switch req.model {
	case "sim-429":
		return retryInASecond(&apiError{status: http.StatusTooManyRequests, typ: "requests", code: "rate_limit_exceeded",
			message: "Rate limit reached for requests. Please try again in 1s."})
	case "sim-500":
		return errorAnswer(&apiError{status: http.StatusInternalServerError, typ: "server_error", code: "server_error",
			message: "The server had an error while processing your request."})
	case "sim-503":
		return retryInASecond(&apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "server_is_overloaded",
			message: "The server is overloaded. Please retry later."})
	case "sim-context-length":
		// Any input exceeds this model's window: the error a fallback with a larger
		// context_window is for.
		return ContextLengthReply().answer()
	}

	p := &plan{req: req, id: s.nextID("resp"), createdAt: s.opts.Now().Unix(), status: "completed"}
	greeting := "Hello from " + req.model + ". "
	switch req.model {
	case "sim-tools":
		s.planTools(p, greeting)
	case "sim-reasoning":
		p.items = append(p.items,
			&item{kind: kindReasoning, id: s.nextID("rs"), summary: [][]string{
				split("Considering the request: " + req.userText),
				split("Planning a short, direct answer."),
			}},
			s.textItem(greeting+"You said: "+req.userText))
	case "sim-refusal":
		p.items = append(p.items, &item{kind: kindMessage, id: s.nextID("msg"), refusal: true,
			deltas: split("I'm sorry, but I can't help with that request.")})
	case "sim-json":
		p.items = append(p.items, s.textItem(jsonAnswer(req, greeting)))
	case "sim-long":
		p.items = append(p.items, s.textItem(longText(longDeltas*4)))
	case "sim-failed":
		p.status = "failed"
		p.failure = &apiError{code: "server_error", message: "The model failed to generate a response."}
	case "sim-error-event":
		p.items = append(p.items, s.textItem(greeting+"You said: "+req.userText))
		p.errorEvent = &apiError{typ: "server_error", code: "server_error", message: "The server had an error while streaming the response."}
	case "sim-incomplete", "sim-filtered":
		p.items = append(p.items, s.textItem(greeting+"You said: "+req.userText+" This answer will not be finished."))
		reason := "max_output_tokens"
		if req.model == "sim-filtered" {
			reason = "content_filter"
		}
		p.truncate(max(p.deltaCount()/2, 1), reason)
	default:
		p.items = append(p.items, s.textItem(greeting+"You said: "+req.userText))
	}
	if req.thinking && p.status != "failed" && len(p.items) > 0 && p.reasoningCount() == 0 {
		// Any model thinks when asked to: a reasoning summary leads its answer.
		p.items = append([]*item{{kind: kindReasoning, id: s.nextID("rs"), summary: [][]string{
			split("Thinking about: " + req.userText),
		}}}, p.items...)
	}
	if req.maxOutput > 0 && p.status != "failed" {
		p.truncate(int(req.maxOutput), "max_output_tokens")
	}

	b := &bill{key: key, input: s.inputTokens(req.model, req.body)}
	if req.model == "sim-error-event" {
		// Before a stream starts the failure is an HTTP error; nothing is generated or charged.
		if !req.stream {
			return errorAnswer(&apiError{status: http.StatusInternalServerError, typ: "server_error", code: "server_error",
				message: p.errorEvent.message})
		}
	}
	if req.stream {
		a := answer{status: http.StatusOK, header: http.Header{}, events: p.events(b.input), bill: b}
		if req.model == "sim-slow" {
			a.eventDelay = slowEventDelay
		}
		if req.model == "sim-stall" {
			// The stream opens (created, in progress) and no output ever follows: a model
			// thinking for ever, what first_token_timeout is for.
			a.events, a.stall = a.events[:stallOpenEvents], true
		}
		return a
	}
	if req.model == "sim-stall" {
		return answer{stall: true} // no header ever comes, and nothing is charged
	}
	b.output = int64(p.deltaCount())
	body, _ := json.Marshal(p.response(b.input))
	a := answer{status: http.StatusOK, header: http.Header{}, body: body, bill: b}
	a.header.Set("Content-Type", "application/json")
	return a
}

func (s *Sim) textItem(text string) *item {
	return &item{kind: kindMessage, id: s.nextID("msg"), deltas: split(text)}
}

// planTools answers with function calls, or with text once the input ends with a tool result.
func (s *Sim) planTools(p *plan, greeting string) {
	req := p.req
	choice := req.toolChoice.Str
	if req.endsWithToolOutput || len(req.tools) == 0 || choice == "none" {
		text := greeting + "You said: " + req.userText
		if req.endsWithToolOutput {
			text = greeting + "The tool returned: " + req.toolOutput
		}
		p.items = append(p.items, s.textItem(text))
		return
	}
	calls := []tool{req.tools[0]}
	if forced := req.toolChoice.Get("name").Str; forced != "" {
		for _, t := range req.tools {
			if t.name == forced {
				calls = []tool{t}
			}
		}
	} else if req.parallel && strings.Contains(strings.ToLower(req.userText), "parallel") {
		second := req.tools[0]
		if len(req.tools) > 1 {
			second = req.tools[1]
		}
		calls = append(calls, second)
	}
	for _, t := range calls {
		if t.custom {
			// A custom tool takes free text: the user's words, as a shell tool would get them.
			n := s.nextID("ctc")
			p.items = append(p.items, &item{kind: kindCustomCall, id: n, callID: "call_" + strings.TrimPrefix(n, "ctc_"),
				name: t.name, deltas: split(req.userText)})
			continue
		}
		args, _ := json.Marshal(valueForSchema(t.params, t.name))
		n := s.nextID("fc")
		p.items = append(p.items, &item{kind: kindFunctionCall, id: n, callID: "call_" + strings.TrimPrefix(n, "fc_"),
			name: t.name, deltas: split(string(args))})
	}
}

// jsonAnswer is sim-json's text: a value fitting a json_schema format, an object for
// json_object, plain text otherwise.
func jsonAnswer(req *request, greeting string) string {
	switch req.format.Get("type").Str {
	case "json_schema":
		b, _ := json.Marshal(valueForSchema(req.format.Get("schema"), "answer"))
		return string(b)
	case "json_object":
		b, _ := json.Marshal(map[string]string{"answer": greeting + "You said: " + req.userText})
		return string(b)
	}
	return greeting + "You said: " + req.userText
}

// longDeltas is how many deltas sim-long streams.
const longDeltas = 200

// longText is n bytes of ASCII prose.
func longText(n int) string {
	const words = "The quick brown fox jumps over the lazy dog while the simulator keeps talking. "
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words)
	}
	return b.String()[:n]
}

// split cuts text into deltas of about four bytes, never inside a UTF-8 sequence.
func split(text string) []string {
	var out []string
	start := 0
	for i := range text {
		if i-start >= 4 {
			out = append(out, text[start:i])
			start = i
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// minimalKey identifies a cached Options.Minimal answer.
type minimalKey struct {
	model  string
	input  int64
	stream bool
}

// minimalAnswer is Options.Minimal's fixed reply: the smallest valid Response or stream, with
// no request fields echoed, rendered once per model, input size and mode and then reused.
func (s *Sim) minimalAnswer(body []byte, key string) answer {
	r := gjson.GetManyBytes(body, "model", "stream")
	in := s.inputTokens(r[0].Str, body)
	mk := minimalKey{model: r[0].Str, input: in, stream: r[1].Type == gjson.True}
	b := &bill{key: key, input: in, output: 1}
	if cached, ok := s.minimal.Load(mk); ok {
		a := cached.(answer)
		a.bill = b
		return a
	}
	p := &plan{req: &request{model: mk.model, parallel: true}, id: "resp_minimal", status: "completed",
		items: []*item{{kind: kindMessage, id: "msg_minimal", deltas: []string{"ok"}}}}
	var a answer
	if mk.stream {
		a = answer{status: http.StatusOK, header: http.Header{}, events: p.events(in)}
	} else {
		out, _ := json.Marshal(p.response(in))
		a = answer{status: http.StatusOK, header: http.Header{"Content-Type": {"application/json"}}, body: out}
	}
	s.minimal.Store(mk, a)
	a.bill = b
	return a
}
