package tracing

import (
	"net/http"
	"testing"
)

// headerCarrier must read and write the same headers as propagation.HeaderCarrier, which
// goes through net/http's canonical names.
func TestHeaderCarrierCanonicalNames(t *testing.T) {
	for _, key := range []string{"traceparent", "tracestate", "baggage"} {
		h := http.Header{}
		headerCarrier(h).Set(key, "v1")
		if got := h.Get(key); got != "v1" {
			t.Errorf("Set(%q): http.Header.Get = %q, want v1", key, got)
		}
		h2 := http.Header{}
		h2.Set(key, "v2")
		if got := headerCarrier(h2).Get(key); got != "v2" {
			t.Errorf("Get(%q) of a header net/http set = %q, want v2", key, got)
		}
		if got := headerCarrier(http.Header{}).Get(key); got != "" {
			t.Errorf("Get(%q) of no header = %q", key, got)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		h := http.Header{"Traceparent": {"x"}}
		_ = headerCarrier(h).Get("traceparent")
	}); n > 1 { // the map literal itself
		t.Errorf("Get allocates %.0f times", n-1)
	}
}
