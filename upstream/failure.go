package upstream

import (
	"io"
	"net/http"
	"strconv"

	"modelgate/accounting"
	"modelgate/platform"
	"modelgate/ratelimit"
	"modelgate/translate"
)

// Failure is a gateway call that did not produce a 2xx answer. It says what the client is to
// be told; the HTTP layer writes it in the shape of the client's dialect.
type Failure struct {
	Status int         // the status for the client; 0 when the client is gone
	Body   []byte      // the error in OpenAI's shape (other dialects reshape it)
	Header http.Header // the platform's advice on retrying (Retry-After and kin); may be nil
	Kind   string      // what failed, for logs and metrics: dial, timeout, status_5xx, ...
	// ClientGone: the caller's own context ended; there is no one to answer.
	ClientGone bool
	// MaybeBilled: the last attempt's request reached the platform whole and no answer came
	// back (a timeout, a reset, the client leaving). A non-stream answer is produced before
	// its headers are written, so the platform may have billed all of it.
	MaybeBilled bool
	// Settled: what the failed call cost was settled already, at its model's price, by the
	// fallback chain that tried to move past it (issue 27); Charge is nothing more.
	Settled bool
}

// maxErrorBody caps a platform error body read for translation.
const maxErrorBody = 1 << 20

// The errors modelgate states itself, in OpenAI's shape (as the proxy's own errors render):
// no internal address, error text or credential detail reaches the client.
const (
	timeoutBody     = `{"error":{"message":"The platform did not answer in time.","type":"server_error","param":null,"code":"upstream_timeout"}}`
	unreachableBody = `{"error":{"message":"The platform could not be reached.","type":"server_error","param":null,"code":"upstream_unreachable"}}`
	authBody        = `{"error":{"message":"The platform rejected modelgate's credential. Contact the operator.","type":"server_error","param":null,"code":"upstream_auth_failed"}}`
)

// TransportFailure describes a call that got no answer: the platform could not be reached or
// did not answer in time, or the caller left.
func TransportFailure(err error) *Failure {
	kind := platform.ErrorKind(err)
	switch kind {
	case "canceled":
		return &Failure{Kind: kind, ClientGone: true}
	case "timeout":
		return &Failure{Status: http.StatusGatewayTimeout, Kind: kind, Body: []byte(timeoutBody)}
	}
	return &Failure{Status: http.StatusBadGateway, Kind: kind, Body: []byte(unreachableBody)}
}

// statusFailure relays a non-2xx platform answer: same status, OpenAI error shape, and the
// headers that tell an SDK whether and when to retry.
func (g *Gateway) statusFailure(requestID string, resp *http.Response) *Failure {
	status := resp.StatusCode
	kind := "status_" + strconv.Itoa(status/100) + "xx"
	if (status == http.StatusUnauthorized || status == http.StatusForbidden) && g.shared {
		// The platform refused modelgate's own credential: not the caller's fault, and the
		// caller must learn nothing about the credential.
		g.log.Error("platform rejected the configured platform key", "request_id", requestID, "status", status)
		return &Failure{Status: http.StatusBadGateway, Kind: "upstream_auth", Body: []byte(authBody)}
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	f := &Failure{Status: status, Kind: kind, Body: translate.UpstreamErrorToOpenAI(status, raw), Header: http.Header{}}
	for _, h := range []string{"Retry-After", "Retry-After-Ms", "X-Should-Retry"} {
		if v := resp.Header.Get(h); v != "" {
			f.Header.Set(h, v)
		}
	}
	return f
}

// Charge is what a failed call costs: its reservation, as an upper bound, when the request
// reached the platform whole and no answer came (the platform may have billed it); nothing
// when it never reached the platform or the platform refused it.
func (f *Failure) Charge(reserve ratelimit.Usage) accounting.Charge {
	e := accounting.Ending{How: accounting.NotBilled}
	if f.MaybeBilled && !f.Settled {
		e.How = accounting.Unanswered
	}
	return accounting.ChargeFor(reserve, e)
}
