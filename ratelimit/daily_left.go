package ratelimit

import "context"

// DailyTokensLeft is the least of what is left of tokens_per_day across req's scopes (the
// key, the team, the end user), or -1 when none of them limits it or the store cannot be
// read. It costs a look at the store: a caller asks it only once tokens_per_day has refused
// a call (to clamp its output cap to what is left).
func (l *Limiter) DailyTokensLeft(ctx context.Context, req Request) int64 {
	scopes := []Scope{req.Key}
	if req.Team != nil {
		scopes = append(scopes, *req.Team)
	}
	if req.EndUser != nil {
		scopes = append(scopes, *req.EndUser)
	}
	usage, err := l.Usage(ctx, scopes)
	if err != nil {
		return -1
	}
	left := int64(-1)
	for _, u := range usage {
		if r, ok := u.Remaining["tokens_per_day"]; ok && (left < 0 || r < left) {
			left = r
		}
	}
	return left
}
