package proxy

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/apierr"
	"modelgate/auth"
	"modelgate/relay"
	"modelgate/translate"
)

// chatRoute is the route label of POST /v1/chat/completions in logs and metrics.
const chatRoute = "/v1/chat/completions"

// chatCompletions serves POST /v1/chat/completions on top of the Responses gateway: its
// dialect's halves on the one exchange. Nothing is written to the client before the
// platform accepted the request, so its 4xx, 429 and 5xx answers keep their status and
// headers.
func (s *Server) chatCompletions(c *gin.Context) {
	d := new(chatDialect) // the dialect the preflight fills, and the call once admitted
	if a := s.preflight(c, chatRoute, d); a != nil {
		s.exchange(c, a, &d.x, d, d.upStream)
	}
}

// tooManyChoices refuses a fan-out above translate.max_n: each choice is a whole upstream
// call, so the fan-out is bounded here, not upstream. Out of line: its message would
// otherwise take room in the parse's caller (TestOpenStreamStack).
//
//go:noinline
func tooManyChoices(c *gin.Context, maxN int) {
	abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_value", "n",
		"Invalid value for 'n': this gateway allows at most "+strconv.Itoa(maxN)+" choices per request (translate.max_n).")
}

// chatDialect is Chat Completions' part of the preflight.
type chatDialect struct {
	translated[*translate.ChatRequest, translate.Meta]
}

func (d *chatDialect) check(c *gin.Context, st *state, body []byte, call *modelCall) bool {
	req, err := translate.ParseChatWith(body, parseOptions(st)) // the body's last use: the parse's copy replaces it
	if err != nil {
		apierr.Untranslatable(c, err)
		return false
	}
	return d.checkParsed(c, st, req, call)
}

// checkParsed is check's half after the parse, out of line: its locals (the model's
// resolution, the call's fields) would otherwise take room in the frame the parse runs
// under, the deepest point before a stream opens (TestOpenStreamStack).
//
//go:noinline
func (d *chatDialect) checkParsed(c *gin.Context, st *state, req *translate.ChatRequest, call *modelCall) bool {
	if maxN := st.cfg.Translate.Choices(); req.N > maxN {
		tooManyChoices(c, maxN)
		return false
	}
	d.req = req
	*call = modelCall{asked: req.Model, stream: req.Stream, maxOut: req.MaxOutputTokens, choices: req.N}
	return nameCall(c, st, req.DroppedTools, &req.Identity, &d.sticky, call)
}

func (d *chatDialect) prepare(c *gin.Context, st *state, p *auth.Principal, call *modelCall) bool {
	var opts translate.RequestOptions
	d.upStream, opts = translatedUpstream(st, d.req.Stream, len(d.req.Stop) > 0)
	st.routeCall(call, p, d.sticky) // one choice for all n choices
	upBody, err := d.req.ToResponses(call.upstream, opts)
	if err != nil {
		apierr.Untranslatable(c, err)
		return false
	}
	call.upBody = upBody
	// The answer names the model as the client did; the request itself is not kept past
	// this point (a stream that runs for minutes need not hold it).
	req := d.req
	d.meta = translate.Meta{
		ID: "chatcmpl-" + newRequestID()[4:], Created: time.Now().Unix(), Model: req.Model,
		ReasoningField: st.cfg.Translate.ReasoningField,
		IncludeUsage:   req.IncludeUsage, Legacy: req.Legacy, Logprobs: req.Logprobs, Stop: req.Stop,
	}
	d.req = nil
	return true
}

// Chat's response half (answerHalf).

func (d *chatDialect) streamFraming() (string, string, time.Duration) { return "", "", 0 }

// converter makes choice i's stream converter; with several choices their trailers are
// written once, by the merge.
func (d *chatDialect) converter(i, n int, estimate int64) translate.Converter {
	return d.newConverter(i, n, estimate)
}

func (d *chatDialect) newConverter(i, n int, estimate int64) *translate.StreamConverter {
	meta := d.meta
	meta.ChoiceIndex = i
	meta.OmitTrailer = n > 1
	conv := translate.NewStreamConverter(meta)
	conv.SetInputEstimate(estimate)
	return conv
}

func (d *chatDialect) aggregator(i int, estimate int64) answerAggregator {
	meta := d.meta
	meta.ChoiceIndex = i
	agg := translate.NewAggregator(meta)
	agg.SetInputEstimate(estimate)
	return agg
}

func (d *chatDialect) answer(i int, body []byte) ([]byte, translate.Usage, error) {
	meta := d.meta
	meta.ChoiceIndex = i
	return translate.ResponseToChat(body, meta)
}

func (d *chatDialect) merge(answers [][]byte) ([]byte, error) { return translate.MergeChoices(answers) }

// streamMerged relays n>1 choices side by side: their chunks interleaved as they come, then
// one usage chunk and one [DONE] (a single converter writes its own trailer). It returns what
// to charge for all of them.
func (d *chatDialect) streamMerged(p relay.Pump, resps []*http.Response, cancels []context.CancelFunc, estimate int64) accounting.Charge {
	convs := make([]*translate.StreamConverter, len(resps))
	bodies := make([]io.Reader, len(resps))
	for i := range convs {
		convs[i] = d.newConverter(i, len(resps), estimate)
		bodies[i] = resps[i].Body
	}
	return p.Merged(bodies, cancels, convs, d.meta)
}
