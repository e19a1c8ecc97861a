package proxy

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/sjson"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/ratelimit"
)

// clampedHeader tells the client that its output cap was lowered to what a budget has left
// (limits.on_budget_exceeded: clamp), and to what: the new cap of each choice.
const clampedHeader = "x-modelgate-max-tokens-clamped"

// minClampedOutput is the smallest output cap a clamp leaves: the Responses API's minimum
// max_output_tokens. A budget that cannot cover the input and this much refuses the call.
const minClampedOutput = 16

// admitBudgets holds the call's spend and then asks the limiter for its tokens, for n choices
// of estimate input tokens and outCap output tokens each. A refusal has answered the client
// and returns a nil ticket.
//
// With on_budget_exceeded: clamp, a call that a spend budget or tokens_per_day would refuse
// only for its output cap is admitted with the largest cap per choice that the budget still
// covers, when that is at least minClampedOutput: the platform is asked for that cap, and the
// answer names it in clampedHeader. Rate limits (tokens_per_minute, requests, concurrency)
// are never clamped: they refill within a minute, and a smaller answer now is not what a
// client that can wait asked for. It returns the output cap reserved per choice.
func (s *Server) admitBudgets(c *gin.Context, st *state, p *auth.Principal, call *modelCall, estimate, outCap, n int64) (*ratelimit.Ticket, int64) {
	clamp := st.cfg.ClampsBudgets(p.TeamLimits)
	capped := outCap
	refused := s.holdSpend(c, st, p, estimate*n, capped*n)
	if refused != nil && clamp {
		if room := accounting.SpendRoom(s.ledger, st.prices, p, info(c).EndUser, call.model, estimate, n); room >= minClampedOutput && room < capped {
			capped = room
			refused = s.holdSpend(c, st, p, estimate*n, capped*n)
		}
	}
	if refused != nil {
		s.refuseSpend(c, refused)
		return nil, 0
	}
	ctx := c.Request.Context()
	ri := info(c)
	ticket, d, err := s.limiter.Admit(ctx, accounting.CallRequest(p, ri.EndUser, estimate, capped, n))
	if ticket == nil && err == nil && d.Reason == ratelimit.ReasonDailyTokens && clamp {
		// The spend hold, if any, stays at the larger cap: it is settled at the real cost.
		if room := accounting.DailyTokenRoom(ctx, s.limiter, p, ri.EndUser, estimate, n); room >= minClampedOutput && room < capped {
			capped = room
			ticket, d, err = s.limiter.Admit(ctx, accounting.CallRequest(p, ri.EndUser, estimate, capped, n))
		}
	}
	if ticket = s.admitted(c, ticket, d, err); ticket == nil {
		return nil, 0
	}
	if capped < outCap && !clampCall(c, call, capped) {
		ticket.Release()
		return nil, 0
	}
	s.journalAdmit(c, ri, p, ticket)
	return ticket, capped
}

// clampCall asks the platform for capped output tokens per choice and says so to the client,
// before any byte of the answer is written. It answers the client itself when the body cannot
// be rewritten (it was prepared by modelgate, so that is not expected).
func clampCall(c *gin.Context, call *modelCall, capped int64) bool {
	body, err := sjson.SetBytes(call.upBody, "max_output_tokens", capped)
	if err != nil {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_json", "", "The request body could not be prepared.")
		return false
	}
	call.upBody, call.maxOut = body, capped
	c.Header(clampedHeader, strconv.FormatInt(capped, 10))
	return true
}
