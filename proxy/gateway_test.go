package proxy

import (
	"context"
	"net"
	"testing"

	"modelgate/apierr"
	"modelgate/upstream"
)

// The errors upstream states itself are written as literals; they must read exactly as the
// proxy's own OpenAI errors do, so a client sees one shape whichever layer refused.
func TestUpstreamFailureBodiesMatchOpenAIErrors(t *testing.T) {
	tests := []struct {
		err  error
		code string
		msg  string
	}{
		{context.DeadlineExceeded, "upstream_timeout", "The platform did not answer in time."},
		{&net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "refused"}}, "upstream_unreachable", "The platform could not be reached."},
	}
	for _, tt := range tests {
		got := upstream.TransportFailure(tt.err).Body
		if want := apierr.OpenAIJSON(apierr.TypeServer, tt.code, "", tt.msg); string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", tt.code, got, want)
		}
	}
}
