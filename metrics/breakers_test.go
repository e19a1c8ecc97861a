package metrics

import (
	"strings"
	"testing"
	"time"

	"modelgate/breaker"
	"modelgate/config"
)

func TestBreakerStateExported(t *testing.T) {
	m := New(&config.Config{})
	set := breaker.New(breaker.Options{Settings: breaker.Settings{Failures: 2, Window: time.Minute, Cooldown: time.Minute}})
	set.Report("model:gpt-4o", true)
	set.Report("model:gpt-4o", true) // opens
	set.Report("key:0a1b2c3d", true) // counted, still closed
	m.WatchBreakers(set)
	body := scrape(t, m)
	for _, want := range []string{`modelgate_breaker_state{breaker="model:gpt-4o"} 2`, `modelgate_breaker_state{breaker="key:0a1b2c3d"} 0`} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("missing %s in:\n%s", want, grepLines(body, "modelgate_breaker"))
		}
	}
}
