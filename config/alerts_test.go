package config

import (
	"strings"
	"testing"
)

func TestAlertsValidation(t *testing.T) {
	hook := func(body string) string { return "alerts:\n  webhooks:\n    - " + body + "\n" }
	cases := []struct {
		name, yaml string
		want       []string // substrings of the error; none: valid
	}{
		{"valid", hook("{url: 'https://hooks.example.com/mg?token=abc', secret: s, events: [budget.threshold, key.expired]}"), nil},
		{"all events by default", hook("{url: 'http://127.0.0.1:9/h', secret: s}"), nil},
		{"no url", hook("{secret: s}"), []string{"alerts.webhooks[0].url: is required"}},
		{"ftp", hook("{url: 'ftp://h/x', secret: s}"), []string{"alerts.webhooks[0].url: want an absolute http:// or https:// URL"}},
		{"no host", hook("{url: 'https:///x', secret: s}"), []string{"alerts.webhooks[0].url: URL has no host"}},
		{"user info", hook("{url: 'https://u:topsecret@h/x', secret: s}"), []string{"must not contain user info"}},
		{"no secret", hook("{url: 'https://h/x'}"), []string{"alerts.webhooks[0].secret: is required"}},
		{"unknown event", hook("{url: 'https://h/x', secret: s, events: [budget.crossed]}"), []string{`events[0]: want one of budget.threshold, key.issued, key.revoked, key.expired, got "budget.crossed"`}},
		{"event twice", hook("{url: 'https://h/x', secret: s, events: [key.issued, key.issued]}"), []string{`events[1]: "key.issued" is listed twice`}},
		{"negative interval", "alerts:\n  check_interval: -1s\n", []string{"alerts.check_interval: must not be negative"}},
		{"too many", "alerts:\n  webhooks:\n" + strings.Repeat("    - {url: 'https://h/x', secret: s}\n", MaxWebhooks+1), []string{"at most 16 webhooks"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "c.yaml", envMap(nil))
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("valid config refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "topsecret") {
				t.Fatalf("the error repeats a credential: %q", err)
			}
		})
	}
}

// The summary names each webhook by host and events, never its path, query or secret.
func TestSummaryAlerts(t *testing.T) {
	y := "alerts:\n  webhooks:\n    - {url: 'https://hooks.example.com/p/tok123?k=tok456', secret: sec789, events: [key.issued]}\n    - {url: 'http://10.0.0.1:8080/x', secret: s}\n"
	cfg := mustParse(t, []byte(y), "c.yaml", envMap(nil))
	s := cfg.Summary()
	summaryHas(t, s, "alerts: 2 webhooks, signed: hooks.example.com (key.issued); 10.0.0.1:8080 (all events); budgets checked every 5s at 50%, 80%, 100%")
	for _, secret := range []string{"tok123", "tok456", "sec789"} {
		if strings.Contains(s, secret) {
			t.Fatalf("summary shows %q:\n%s", secret, s)
		}
	}
	none, _ := Parse([]byte(""), "c.yaml", envMap(nil))
	summaryHas(t, none.Summary(), "alerts: no webhooks")
}

func TestWebhookWants(t *testing.T) {
	all := Webhook{}
	some := Webhook{Events: []string{EventKeyIssued}}
	if !all.Wants(EventKeyExpired) || !some.Wants(EventKeyIssued) || some.Wants(EventBudgetThreshold) {
		t.Fatal("Wants")
	}
}
