package redisconn

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// RouteLogs sends go-redis's own messages (dial failures and retries, which the limiter and
// the record store already report in their own words) to log at debug level instead of
// stderr. go-redis keeps one logger for the whole process and offers none per client (v9),
// so this is the binary's decision: main makes it once at start, before any client exists.
func RouteLogs(log *slog.Logger) { redis.SetLogger(slogPrintf{log}) }

type slogPrintf struct{ log *slog.Logger }

func (s slogPrintf) Printf(ctx context.Context, format string, v ...any) {
	s.log.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}
