// Package ratelimit enforces modelgate's per-key and per-team budgets and keeps the records
// that must survive a restart (daily usage).
//
// # Algorithms
//
// requests_per_minute and tokens_per_minute are token buckets: capacity N, refilled
// continuously at N per minute, starting full. N quick requests pass and the next is refused;
// afterwards one request is admitted every minute/N. Buckets were chosen over sliding windows
// because they need two numbers per scope (level, last update), which keeps the Redis script
// and the in-memory code identical and makes refunds exact: a refund is simply added back,
// clamped to the capacity. golang.org/x/time/rate was not used for the same reason: it cannot
// give back an arbitrary refund, cannot go into debt, and its arithmetic would differ from the
// Lua script that shared stores run.
//
// Tokens are reserved at admission (Request.Tokens) and settled with the real usage: the
// difference is refunded to the minute bucket and the day counter. A reservation larger than a
// whole budget only needs the budget to be untouched (it is clamped for the check), so a small
// limit never locks a request out for good; the full reservation and later the full real usage
// are still charged, and the bucket may go into debt that later requests wait out.
// A request reserving zero tokens (sidecar calls) skips the token checks.
//
// tokens_per_day counts per UTC day. When it is spent the refusal reason is daily_tokens. A
// request belongs to the day it was admitted: its settlement adjusts that day. Over midnight
// the memory store keeps only the new day, so such a request is charged its reservation on the
// old day and nothing on the new one; the Redis store settles the old day's counters.
//
// concurrent_requests counts requests in flight; Ticket.Settle (or Release) frees the slot. In
// Redis a slot is a lease in a sorted set scored by its expiry; this process renews its live
// leases every LeaseTTL/3, so the slots of a crashed replica free themselves within LeaseTTL.
//
// # All or nothing
//
// A request must pass every limit of its key and of its team, and of its end user when the
// team limits its end users (Request.EndUser, issue 28). The memory store locks the scopes
// (in a fixed order, one mutex per scope, no global lock) and checks everything before
// changing anything; the Redis store does the same inside one Lua script. A refusal by one
// scope therefore consumes nothing anywhere. An end user's scope is counted and expires like
// any other: its minute bucket is forgotten once full, its day counters with the day.
//
// # Shadow mode
//
// With Request.Shadow a request that would be refused is admitted, Decision.WouldRefuse says
// why, and no budget is charged for it (so the budgets keep showing what enforcement would
// have allowed). Its traffic still appears in the Usage request and token counts.
//
// # Persistence
//
// The memory store keeps the per-day counters (tokens charged, requests, input and output
// tokens) in a bbolt file, DataPath/ratelimit.db, written behind every FlushInterval (default
// 1s) and once more on Close. A crash can lose at most one interval of daily usage; a clean
// shutdown loses nothing. Minute buckets and in-flight counts are not persisted: after a
// restart every minute budget starts full.
// Without DataPath nothing is written, and a scope with usage today stays in memory until the
// day is over.
// With Redis every counter lives in Redis, and its durability is Redis's configuration.
// Replicas use their own clocks (keep them in NTP sync). Redis may be one server, a Sentinel
// master or a Cluster (package redisconn). On a Cluster every key carries its team as a hash
// tag ({team}, or the caller for passthrough), so one admission's script, which touches a
// key's and its team's counters, stays in one hash slot.
// A settlement that fails (a failover, a restarting node) is retried in the background for
// up to a minute; the settle script skips an id it has already applied, so a retry after a
// lost reply charges nothing twice.
//
// # Headers
//
// Decision.Headers holds OpenAI's x-ratelimit-* values from the tighter of key and team (the
// fewer remaining; equal remaining: the smaller limit). The requests trio comes from
// requests_per_minute; the tokens trio from tokens_per_minute, or tokens_per_day when neither
// scope has a minute token limit. reset-* is the time until the bucket is full again (for the
// day: until 00:00 UTC), written like Go durations ("1s", "6m0s", "12ms"). A dimension
// unlimited at both scopes is left out entirely. Refusals carry RetryAfter: the wait until
// every refusing limit would admit the request, rounded up to whole seconds, at least 1s.
package ratelimit
