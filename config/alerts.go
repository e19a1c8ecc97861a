package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Alerts is the alerts block: where budget and key events are POSTed.
type Alerts struct {
	Webhooks []Webhook `yaml:"webhooks"`
	// CheckInterval is how often budgets are compared with their thresholds and issued keys
	// with their expiry; default 5s. The check runs in the background, never on a request.
	CheckInterval time.Duration `yaml:"check_interval"`
}

// Webhook is one receiver of alert events.
type Webhook struct {
	URL string `yaml:"url"` // http:// or https://; may carry a token in its path or query
	// Secret signs every delivery (HMAC-SHA256); required, so a receiver can always tell
	// modelgate's events from anyone else's POSTs.
	Secret string `yaml:"secret"`
	// Events are the event types sent here; empty = all of them.
	Events []string `yaml:"events"`
}

// The alert event types.
const (
	EventBudgetThreshold = "budget.threshold"
	EventKeyIssued       = "key.issued"
	EventKeyRevoked      = "key.revoked"
	EventKeyExpired      = "key.expired"
)

// AlertEvents lists every event type, in the order the docs give them.
var AlertEvents = []string{EventBudgetThreshold, EventKeyIssued, EventKeyRevoked, EventKeyExpired}

// MaxWebhooks bounds alerts.webhooks: each event is delivered to each of them.
const MaxWebhooks = 16

// Wants reports whether the webhook takes events of type typ.
func (w Webhook) Wants(typ string) bool {
	if len(w.Events) == 0 {
		return true
	}
	for _, e := range w.Events {
		if e == typ {
			return true
		}
	}
	return false
}

// WebhookProblem says why raw cannot be a webhook URL ("" when it can). Unlike an upstream
// URL it may have a query: receivers often take their token there. No credential of
// modelgate's is sent to it; user info is still refused, since it would be sent in the clear
// as a Basic header and the URL's host is what logs name.
func WebhookProblem(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "not a valid URL"
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return "want an absolute http:// or https:// URL"
	}
	switch {
	case u.Opaque != "" || u.Hostname() == "":
		return "URL has no host"
	case u.User != nil:
		return "URL must not contain user info"
	case u.Fragment != "":
		return "URL must not have a fragment"
	}
	return ""
}

// alerts validates the alerts block. Messages never repeat a URL or secret: either may hold
// a token.
func (v *validator) alerts(a *Alerts) {
	v.nonNegativeDuration("alerts.check_interval", a.CheckInterval)
	if len(a.Webhooks) > MaxWebhooks {
		v.fail("alerts.webhooks", "at most %d webhooks, got %d", MaxWebhooks, len(a.Webhooks))
	}
	for i, w := range a.Webhooks {
		p := fmt.Sprintf("alerts.webhooks[%d]", i)
		if w.URL == "" {
			v.fail(p+".url", "is required%s", v.emptyHint(p+".url"))
		} else if prob := WebhookProblem(w.URL); prob != "" {
			v.fail(p+".url", "%s", prob)
		}
		if w.Secret == "" {
			v.fail(p+".secret", "is required: every delivery is signed with it%s", v.emptyHint(p+".secret"))
		} else if len(w.Secret) > MaxTokenBytes {
			v.fail(p+".secret", "is longer than %d bytes", MaxTokenBytes)
		}
		seen := map[string]bool{}
		for j, e := range w.Events {
			ep := fmt.Sprintf("%s.events[%d]", p, j)
			if !isAlertEvent(e) {
				v.fail(ep, "want one of %s, got %q", strings.Join(AlertEvents, ", "), e[:min(len(e), 64)])
			} else if seen[e] {
				v.fail(ep, "%q is listed twice", e)
			}
			seen[e] = true
		}
	}
}

func isAlertEvent(e string) bool {
	for _, k := range AlertEvents {
		if e == k {
			return true
		}
	}
	return false
}

// defaultAlertCheckInterval is how often budgets and expiries are checked when the config
// says nothing.
const defaultAlertCheckInterval = 5 * time.Second

// alertsSummary is the alerts line of `modelgate check`: hosts only, since a webhook URL may
// carry a token.
func (c *Config) alertsSummary() string {
	if len(c.Alerts.Webhooks) == 0 {
		return "alerts: no webhooks (budget thresholds are still recorded for /admin/usage)"
	}
	parts := make([]string, len(c.Alerts.Webhooks))
	for i, w := range c.Alerts.Webhooks {
		host := "?"
		if u, err := url.Parse(w.URL); err == nil {
			host = u.Host
		}
		events := "all events"
		if len(w.Events) > 0 {
			events = strings.Join(w.Events, ", ")
		}
		parts[i] = host + " (" + events + ")"
	}
	noun := "webhooks"
	if len(parts) == 1 {
		noun = "webhook"
	}
	return fmt.Sprintf("alerts: %d %s, signed: %s; budgets checked every %s at 50%%, 80%%, 100%%",
		len(parts), noun, strings.Join(parts, "; "), c.Alerts.CheckInterval)
}
