package proxy

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/apierr"
	"modelgate/auth"
	"modelgate/translate"
)

// messagesRoute is the route label of POST /v1/messages in logs and metrics.
const messagesRoute = "/v1/messages"

// pingEvent is what an idle Messages stream sends: Anthropic's own keep-alive, which its
// clients read and ignore.
const pingEvent = "event: ping\ndata: {\"type\":\"ping\"}\n\n"

// defaultPingInterval paces pings when upstream.keepalive_interval is 0: Anthropic's API
// pings its streams, and clients of it may count on that.
const defaultPingInterval = 15 * time.Second

// messages serves POST /v1/messages on top of the Responses gateway: its dialect's halves
// on the one exchange. Nothing is written to the client before the platform accepted the
// request, so its refusals keep their status.
func (s *Server) messages(c *gin.Context) {
	d := new(messagesDialect) // the dialect the preflight fills, and the call once admitted
	if a := s.preflight(c, messagesRoute, d); a != nil {
		s.exchange(c, a, &d.x, d, d.upStream)
	}
}

// messagesDialect is Anthropic Messages' part of the preflight.
type messagesDialect struct {
	oneChoice
	translated[*translate.MessagesRequest, translate.MessagesMeta]
}

func (d *messagesDialect) check(c *gin.Context, st *state, body []byte, call *modelCall) bool {
	req, err := translate.ParseMessagesWith(body, parseOptions(st)) // the body's last use: the parse's copy replaces it
	if err != nil {
		apierr.Untranslatable(c, err)
		return false
	}
	return d.checkParsed(c, st, req, call)
}

// checkParsed is check's half after the parse, out of line, as chat's is
// (TestOpenStreamStack).
//
//go:noinline
func (d *messagesDialect) checkParsed(c *gin.Context, st *state, req *translate.MessagesRequest, call *modelCall) bool {
	// Messages' metadata holds user_id alone (Identity.User): its tags come from the
	// header and the key.
	d.req = req
	*call = modelCall{asked: req.Model, stream: req.Stream, maxOut: req.UpstreamMaxTokens(), choices: 1}
	return nameCall(c, st, req.DroppedTools, &req.Identity, &d.sticky, call)
}

func (d *messagesDialect) prepare(_ *gin.Context, st *state, p *auth.Principal, call *modelCall) bool {
	d.upStream = routeTranslated(st, p, call, d.sticky, d.req, d.req.Stream, len(d.req.StopSequences) > 0)
	// The answer names the model as the client did, as chat's does; the request is not
	// kept past this point.
	d.meta = translate.MessagesMeta{ID: "msg_" + newRequestID()[4:], Model: call.asked, StopSequences: d.req.StopSequences}
	d.req = nil
	return true
}

// Anthropic's response half (answerHalf).

func (d *messagesDialect) streamFraming() (string, string, time.Duration) {
	return "", pingEvent, defaultPingInterval
}

func (d *messagesDialect) converter(_, _ int, estimate int64) translate.Converter {
	conv := translate.NewMessagesStream(d.meta)
	conv.SetInputEstimate(estimate)
	return conv
}

func (d *messagesDialect) aggregator(_ int, estimate int64) answerAggregator {
	agg := translate.NewMessagesAggregator(d.meta)
	agg.SetInputEstimate(estimate)
	return agg
}

func (d *messagesDialect) answer(_ int, body []byte) ([]byte, translate.Usage, error) {
	return translate.ResponseToMessage(body, d.meta)
}

// countTokens serves POST /v1/messages/count_tokens: the estimate admission would reserve
// for the request's input, computed locally (the platform has no counting endpoint). It
// charges nothing and sends nothing upstream.
func (s *Server) countTokens(c *gin.Context) {
	ri := info(c)
	ri.Route = messagesRoute + "/count_tokens"
	p, st := principal(c), requestState(c)
	body, ok := readJSONBody(c, s.bodyLimits(st.cfg))
	if !ok {
		return
	}
	asked := peekable(body)
	req, err := translate.ParseMessagesCountWith(body, parseOptions(st)) // the body's last use, as in the preflight
	if err != nil {
		noteAsked(ri, asked)
		apierr.Untranslatable(c, err)
		return
	}
	model, ok := countModel(c, st, p, req.Model)
	if !ok {
		return
	}
	key := st.models.withSession(model, st.models.identityKey(model, &req.Identity), c.Request.Header, "")
	n := s.counted(p, model, req.ToResponses(countedUpstream(st, p, model, key), translate.RequestOptions{}))
	c.Data(http.StatusOK, "application/json", []byte(`{"input_tokens":`+strconv.FormatInt(n, 10)+`}`))
}
