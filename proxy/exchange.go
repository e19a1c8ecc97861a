package proxy

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/ratelimit"
	"modelgate/relay"
	"modelgate/translate"
)

// The exchange is everything after admission, written once for every model route: open the
// platform (with the fallback chain), relay the stream or read the answer, charge what the
// call cost, settle it. A dialect supplies its request half to the preflight (dialect) and
// its response half here (answerHalf); nothing else of a route is its own.

// answerHalf is a dialect's response half: how the platform's Responses answer reaches its
// clients.
type answerHalf interface {
	// streamFraming is the client stream's content type ("" for text/event-stream), its
	// keep-alive frame ("" for relay's SSE comment), and that frame's interval when
	// upstream.keepalive_interval is 0 (0 for none).
	streamFraming() (contentType, keepAlive string, every time.Duration)
	// converter turns the platform's event stream into choice's client stream, one of
	// choices; nil relays the Responses stream unchanged.
	converter(choice, choices int, inputEstimate int64) translate.Converter
	// aggregator folds the platform's event stream into choice's single answer, for a client
	// that asked for one while the platform was asked to stream (stop sequences).
	aggregator(choice int, inputEstimate int64) answerAggregator
	// answer converts the platform's JSON answer (a Responses object) for choice.
	answer(choice int, body []byte) ([]byte, translate.Usage, error)
	// merge joins the answers of n>1 choices into one (chat's n, Gemini's candidateCount).
	merge(answers [][]byte) ([]byte, error)
}

// answerAggregator is what an aggregator does for the runner (translate's Aggregator,
// MessagesAggregator, GeminiAggregator).
type answerAggregator interface {
	Feed(eventType string, data []byte) (done bool)
	// End notes that the platform's stream ended before its terminal event; err is why.
	End(err error)
	Result() ([]byte, translate.Usage, error)
}

// oneChoice is merge for a dialect whose requests are one choice (Messages): not reached.
type oneChoice struct{}

func (oneChoice) merge(answers [][]byte) ([]byte, error) { return answers[0], nil }

// passThrough is the answerHalf of a dialect the platform speaks itself (Responses, the
// compact route) but for its answer: one choice, its stream relayed byte for byte (a nil
// converter: relay.Pump.Responses), never aggregated (the platform streams exactly when the
// client asked to).
type passThrough struct{ oneChoice }

func (passThrough) streamFraming() (string, string, time.Duration) { return "", "", 0 }
func (passThrough) converter(int, int, int64) translate.Converter  { return nil }
func (passThrough) aggregator(int, int64) answerAggregator         { return nil }

// mergedStreamer is a response half that can interleave n>1 streamed choices into one
// client stream (chat's n). A dialect without it refuses streamed fan-outs at its check.
type mergedStreamer interface {
	streamMerged(p relay.Pump, bodies []*http.Response, cancels []context.CancelFunc, estimate int64) accounting.Charge
}

// exchange is one admitted model call after admission. A dialect's request state embeds it,
// so a call is one allocation from the preflight to the settlement.
type exchange struct {
	s        *Server
	c        *gin.Context
	st       *state
	p        *auth.Principal
	ri       *requestInfo
	half     answerHalf
	upStream bool   // the platform is asked for a stream
	choices  int    // upstream generations per attempt: chat's n, Gemini's candidateCount
	upBody   []byte // as it goes upstream; dropped once sent
	estimate int64  // input tokens estimate of one upstream call
	// reserve is one choice's reservation: its input estimate and output cap. A fallback
	// moves it to the serving model's.
	reserve ratelimit.Usage
	ticket  *ratelimit.Ticket
	gc      gatewayCall // its way to the platform, fallbacks included
	// resps and cancels are the platform's answers, one per choice, once openAll opened them;
	// a single choice's are kept in oneResp and oneCancel, which cost no allocation.
	resps     []*http.Response
	cancels   []context.CancelFunc
	oneResp   [1]*http.Response
	oneCancel [1]context.CancelFunc
	charge    accounting.Charge // what the call cost, settled when the exchange returns
}

// exchange runs an admitted call through the exchange: x is the call's own (embedded in its
// dialect), half its response half, upStream whether the platform is asked for a stream.
// Out of line, and its frame small: it sits under a stream for minutes, and under the wait
// for the platform's headers (TestStreamHeaderWaitDepth).
//
//go:noinline
func (s *Server) exchange(c *gin.Context, a *admission, x *exchange, half answerHalf, upStream bool) {
	x.admitted(s, c, a, half, upStream)
	defer x.settle()
	if x.ri.Stream {
		x.stream()
		return
	}
	x.complete()
}

// admitted makes the admitted request x's call.
//
//go:noinline
func (x *exchange) admitted(s *Server, c *gin.Context, a *admission, half answerHalf, upStream bool) {
	x.s, x.c, x.st, x.p, x.ri, x.half, x.upStream = s, c, a.st, a.p, info(c), half, upStream
	x.choices = max(a.call.choices, 1)
	x.upBody, x.estimate, x.reserve, x.ticket = a.call.upBody, a.estimate, a.reserve, a.ticket
}

// settle is the call's one settlement, whatever way it ended.
func (x *exchange) settle() { x.s.settle(x.ri, x.ticket, x.charge) }

// stream serves a streaming client.
func (x *exchange) stream() {
	if !x.opened(x.c.Request.Context()) {
		return
	}
	defer x.closeOpened()
	contentType, _, _ := x.half.streamFraming()
	relay.StartStreamAs(x.c.Writer, contentType) // from this frame, above the relay's (see relay.StartStream)
	x.relayStream()
}

// opened opens the call's choices (openAll) and checks the platform answered them as asked;
// when it returns true the caller closes them (closeOpened). The platform has the request
// by then: a stream that runs for minutes need not hold it.
func (x *exchange) opened(ctx context.Context) bool {
	if !x.openAll(ctx) {
		return false
	}
	x.upBody, x.gc.body = nil, nil
	x.ri.held.Release()
	if !x.answeredAsAsked() {
		x.closeOpened()
		return false
	}
	return true
}

// answeredAsAsked checks that the platform answered in the form it was asked for (a stream
// or one JSON answer): the other cannot be relayed as the client expects it, and what it
// billed for it cannot be read. Out of line: its error takes no room under the stream.
//
//go:noinline
func (x *exchange) answeredAsAsked() bool {
	for _, resp := range x.resps {
		if relay.IsEventStream(resp) != x.upStream {
			x.ri.UpstreamErr = "invalid_body"
			abortError(x.c, http.StatusBadGateway, typeServer, "upstream_invalid_response", "", "The platform returned an invalid response.")
			for range x.resps {
				x.charge = x.charge.Plus(accounting.ForAnswer(x.reserve, ratelimit.Usage{}, false))
			}
			return false
		}
	}
	return true
}

// relayStream pumps the opened choices, whose stream has started, to the client and sets
// x.charge to what the platform billed. Out of line: the pump in its frame would otherwise
// sit under the wait for the platform's headers and under the stream's start too.
//
//go:noinline
func (x *exchange) relayStream() {
	_, frame, every := x.half.streamFraming()
	if cfg := x.st.cfg.Upstream.KeepAliveInterval; cfg > 0 {
		every = cfg
	}
	if frame == "" {
		frame = relay.KeepAliveComment
	}
	c := x.c
	p := relay.Pump{Out: relay.NewWriterFrame(c.Writer, every, frame), Obs: x.ri,
		Client: c.Request.Context(), Idle: x.st.cfg.Upstream.StreamIdleTimeout, Reserve: x.reserve}
	defer p.Out.Stop()
	if h := x.s.hooks; h.StreamOpened != nil {
		h.StreamOpened(x.ri.Route)
		defer h.StreamClosed(x.ri.Route)
	}
	if len(x.resps) > 1 {
		x.charge = x.half.(mergedStreamer).streamMerged(p, x.resps, x.cancels, x.estimate)
		return
	}
	conv := x.half.converter(0, 1, x.estimate)
	if conv == nil {
		x.charge = p.Responses(x.resps[0].Body, x.cancels[0])
		return
	}
	x.charge = p.Direct(x.resps[0].Body, x.cancels[0], conv)
}

// closeOpened closes the choices openAll opened.
func (x *exchange) closeOpened() {
	for i, resp := range x.resps {
		if x.cancels[i] != nil {
			x.cancels[i]()
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
}
