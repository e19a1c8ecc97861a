package proxy

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"modelgate/reqlog"
)

// TestLogLineAttributionUnquoted: the text access log writes the end user and the tags as
// they are, never quoted, whatever a client sent, since labels and tag keys hold nothing
// logfmt must quote (quoting the tags was a third of what recording them cost), and a
// logfmt reader still reads each field back whole.
func TestLogLineAttributionUnquoted(t *testing.T) {
	allow := []string{"customer", "feature"}
	cases := []struct{ user, customer, feature string }{
		{"end-user-4711", "acme", "search"},
		{"a b=\"c\"", "x=y,z", "spaces and\ttabs"},
		{"ünïcode", "k:v", "="},
	}
	for _, tc := range cases {
		endUser, tags := reqlog.Attribution(tc.user, allow, []reqlog.Tag{{Key: "customer", Value: tc.customer}, {Key: "feature", Value: tc.feature}}, nil, nil)
		var buf bytes.Buffer
		s := &Server{log: slog.New(slog.NewTextHandler(&buf, nil))}
		s.logRequest(reqlog.RequestSummary{RequestID: "req_1", Route: "/v1/responses", Status: 200, EndUser: endUser, Tags: tags})
		line := buf.String()
		if want := " end_user=" + endUser + " tags=" + tags + "\n"; !strings.HasSuffix(line, want) {
			t.Errorf("user %q: line ends %q, want %q", tc.user, line[max(0, len(line)-len(want)-20):], want)
		}
		if strings.ContainsAny(endUser+tags, " \"=") {
			t.Errorf("user %q: attribution %q %q holds what logfmt quotes", tc.user, endUser, tags)
		}
		customer, rest, _ := reqlog.CutTag(tags)
		feature, _, _ := reqlog.CutTag(rest)
		if customer.Key != "customer" || feature.Key != "feature" {
			t.Errorf("user %q: tags %q read back as %v, %v", tc.user, tags, customer, feature)
		}
	}
}
