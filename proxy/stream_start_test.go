package proxy

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// thinkingUpstream answers a stream with its headers and response.created, then sends
// nothing more until the call is cancelled: a model that thinks before its first token.
type thinkingUpstream struct{}

func (thinkingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"sim-chat\",\"output\":[]}}\n\n")
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// A stream's headers wait for the platform's first bytes, not for the model's first token:
// while the model thinks, every streaming route's client already has its 200 and headers
// (relay.Writer.BeforeWait), so a client's header timeout does not run out under a long
// first token.
func TestStreamHeadersWhileThePlatformThinks(t *testing.T) {
	env := startEnv(t, envOptions{upstream: thinkingUpstream{}})
	for _, r := range stackRoutes[:4] {
		t.Run(r.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.front.URL+r.path, strings.NewReader(r.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+keyAlpha1)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req) // returns once the headers are in
			if err != nil {
				t.Fatalf("no headers while the platform thinks: %v", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, Content-Type %q; want a 200 event stream", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
		})
	}
}
