package config

import (
	"strings"
	"testing"
	"time"
)

const pricedYAML = `
upstream: {gateway_url: "http://gw", base_url: "http://api", api_key: sk-x}
models:
  - id: small
    price: {input: 0.15, cached_input: 0.075, output: 0.60}
  - id: free
pricing: {currency: EUR}
usage_history: {retention: 720h}
teams:
  - name: search
    limits: {spend_per_day: 25.00, spend_per_month: 500}
    keys:
      - {name: k, key: mg-k, limits: {spend_per_day: 1.5}}
`

func TestPricingParsed(t *testing.T) {
	c := mustParse(t, []byte(pricedYAML), "p.yaml", nil)
	p := c.Models[0].Price
	if p == nil || p.Input != 0.15 || p.CachedInput == nil || *p.CachedInput != 0.075 || p.Output != 0.6 || c.Models[1].Price != nil {
		t.Fatalf("prices %+v %+v", p, c.Models[1].Price)
	}
	if c.Pricing.Currency != "EUR" || c.UsageHistory.Retention != 720*time.Hour || !c.HistoryEnabled() {
		t.Fatalf("pricing %+v history %+v", c.Pricing, c.UsageHistory)
	}
	if l := c.Teams[0].Limits; l.SpendPerDay != 25 || l.SpendPerMonth != 500 || c.Teams[0].Keys[0].Limits.SpendPerDay != 1.5 {
		t.Fatalf("limits %+v", l)
	}
	if s := c.Summary(); !strings.Contains(s, "spend 25/day (UTC), spend 500/month (UTC)") || !strings.Contains(s, "1 of 2 models priced, in EUR") {
		t.Fatalf("summary:\n%s", s)
	}
	d := Default()
	if d.Pricing.Currency != "USD" || d.UsageHistory.Retention != 90*24*time.Hour {
		t.Fatalf("defaults %+v %+v", d.Pricing, d.UsageHistory)
	}
}

func TestPricingRejected(t *testing.T) {
	for _, c := range []struct{ name, from, to, want string }{
		{"negative_spend", "spend_per_day: 25.00", "spend_per_day: -1", "teams[0].limits.spend_per_day"},
		{"spend_not_a_number", "spend_per_month: 500", "spend_per_month: lots", "want a number"},
		{"spend_infinite", "spend_per_month: 500", "spend_per_month: .inf", "want a number"},
		{"negative_price", "output: 0.60", "output: -0.6", "models[0].price.output"},
		{"unknown_price_key", "output: 0.60", "outptu: 0.6", "outptu"},
		{"bad_currency", "currency: EUR", "currency: E-U-R", "pricing.currency"},
		{"negative_retention", "retention: 720h", "retention: -1h", "usage_history.retention"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(pricedYAML, c.from, c.to, 1)), "p.yaml", nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
