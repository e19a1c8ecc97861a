package platformsim

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// stallWait is how long a test waits to see that sim-stall sends nothing more: its two
// opening events come at once, so on any machine they are read well within it.
const stallWait = time.Second

// TestStallModel: sim-stall's stream opens with response.created and response.in_progress
// and then sends nothing until the client leaves, having charged its input; a plain answer
// never gets its headers and charges nothing.
func TestStallModel(t *testing.T) {
	t.Run("stream", func(t *testing.T) {
		sim, srv := newSim(t, Options{})
		ctx, cancel := context.WithTimeout(context.Background(), stallWait)
		defer cancel()
		resp := do(t, ctx, "POST", srv.URL+"/v1/responses", testKey, []byte(`{"model":"sim-stall","input":"x","stream":true}`))
		defer resp.Body.Close()
		evs, err := readSSE(resp.Body)
		if err == nil || shape(evs) != "created in_progress" {
			t.Fatalf("events %q, end %v: want created and in_progress, then a stall", shape(evs), err)
		}
		if got := sim.Totals(testKey); got.Requests != 1 || got.InputTokens == 0 || got.OutputTokens != 0 {
			t.Errorf("totals %+v, want the input charged and no output", got)
		}
	})
	t.Run("plain", func(t *testing.T) {
		sim, srv := newSim(t, Options{})
		ctx, cancel := context.WithTimeout(context.Background(), stallWait)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/responses", bytes.NewReader([]byte(`{"model":"sim-stall","input":"x"}`)))
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("answered %d, want no answer at all", resp.StatusCode)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want the client's deadline", err)
		}
		if got := sim.Totals(testKey); got != (Totals{}) {
			t.Errorf("totals %+v, want nothing charged", got)
		}
	})
}
