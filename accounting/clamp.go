package accounting

import (
	"context"

	"modelgate/auth"
	"modelgate/billing"
	"modelgate/ratelimit"
)

// A clamp (limits.on_budget_exceeded: clamp) lowers a call's output cap to what a budget
// still covers. The arithmetic is here, beside the scopes it reads: the figures left are the
// same scopes the call is held and limited under (SpendBudgets, LimitRequest, WithEndUser).

// CallRequest is the limiter's view of a model call by p for endUser: n choices of estimate
// input tokens and outCap output tokens each.
func CallRequest(p *auth.Principal, endUser string, estimate, outCap, n int64) ratelimit.Request {
	return WithEndUser(LimitRequest(p, ratelimit.Usage{InputTokens: estimate * n, OutputTokens: outCap * n}), p, endUser)
}

// SpendRoom is the output cap per choice that what is left of the tightest of p's spend
// budgets (and endUser's) covers at model's price, beside n choices of estimate input tokens;
// negative when not even the input fits, or when no budget is limited (whatever refused the
// call, clamping cannot help). It is asked only once a budget has refused the call.
func SpendRoom(ledger *billing.Ledger, prices billing.Prices, p *auth.Principal, endUser, model string, estimate, n int64) int64 {
	budgets, nb := SpendBudgets(p, endUser)
	left := ledger.Left(budgets[:nb])
	if left < 0 {
		return -1
	}
	return prices.OutputWithin(model, estimate*n, left) / n
}

// DailyTokenRoom is the output cap per choice that what is left of the key's and the team's
// tokens_per_day (and the end user's) covers, beside n choices of estimate input tokens;
// negative when not even the input fits. It costs a look at the limiter's store, paid only
// once tokens_per_day has refused the call.
func DailyTokenRoom(ctx context.Context, limiter *ratelimit.Limiter, p *auth.Principal, endUser string, estimate, n int64) int64 {
	left := limiter.DailyTokensLeft(ctx, CallRequest(p, endUser, 0, 0, 1))
	if left < 0 {
		return -1
	}
	return left/n - estimate
}
