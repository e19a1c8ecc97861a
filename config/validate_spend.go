package config

import (
	"fmt"
	"regexp"
	"strings"
)

func (v *validator) limits(path string, l Limits) {
	v.nonNegative(path+".requests_per_minute", l.RequestsPerMinute)
	v.nonNegative(path+".tokens_per_minute", l.TokensPerMinute)
	v.nonNegative(path+".concurrent_requests", l.ConcurrentRequests)
	v.nonNegative(path+".tokens_per_day", l.TokensPerDay)
	v.money(path+".spend_per_day", l.SpendPerDay)
	v.money(path+".spend_per_month", l.SpendPerMonth)
	v.nonNegative(path+".websocket_connections", l.WebSocketConnections)
	v.nonNegative(path+".websocket_lanes", l.WebSocketLanes)
}

// budgetAction checks on_budget_exceeded where it may be set: the top-level limits and a
// team's.
func (v *validator) budgetAction(path string, l Limits) {
	v.either(path+".on_budget_exceeded", l.OnBudgetExceeded, BudgetRefuse, BudgetClamp)
}

// noBudgetAction refuses on_budget_exceeded where nothing would read it: a key follows its
// team, and the budgets shared by all passthrough callers follow the top-level limits.
func (v *validator) noBudgetAction(path string, l Limits) {
	if l.OnBudgetExceeded != "" {
		v.fail(path+".on_budget_exceeded", "set it at limits or teams[].limits; a key follows its team")
	}
	v.noSocketCap(path, l)
}

// noSocketCap refuses websocket_connections anywhere but the top-level limits, which cap
// every key, and unlisted_models, which decides for every caller.
func (v *validator) noSocketCap(path string, l Limits) {
	if l.WebSocketConnections != 0 {
		v.fail(path+".websocket_connections", "set it at the top-level limits: it caps every key")
	}
	if l.WebSocketLanes != 0 {
		v.fail(path+".websocket_lanes", "set it at the top-level limits: it caps every connection")
	}
	if l.UnlistedModels != "" {
		v.fail(path+".unlisted_models", "set it at the top-level limits: it decides for every caller")
	}
}

// maxMoney keeps amounts convertible to integer micro-units without overflow.
const maxMoney = 1e12

func (v *validator) money(path string, f float64) {
	if f < 0 || f > maxMoney || f != f {
		v.fail(path, "want an amount from 0 to %g, got %g", float64(maxMoney), f)
	}
}

func (v *validator) pricing(c *Config) {
	for i, m := range c.Models {
		if m.Price == nil {
			continue
		}
		p := fmt.Sprintf("models[%d].price", i)
		v.money(p+".input", m.Price.Input)
		v.money(p+".output", m.Price.Output)
		if m.Price.CachedInput != nil {
			v.money(p+".cached_input", *m.Price.CachedInput)
		}
	}
	if cur := c.Pricing.Currency; cur != "" && !currencyRE.MatchString(cur) {
		v.fail("pricing.currency", "want 1-8 letters such as USD, got %q", cur)
	}
	v.nonNegativeDuration("usage_history.retention", c.UsageHistory.Retention)
	v.nonNegativeDuration("usage_history.hourly_retention", c.UsageHistory.HourlyRetention)
	if n := c.UsageHistory.DistinctValues; n < 0 || n > MaxDistinctValues {
		v.fail("usage_history.distinct_values", "want 1 to %d (0: the default, %d), got %d", MaxDistinctValues, DefaultDistinctValues, n)
	}
	v.usage(&c.Usage)
}

var currencyRE = regexp.MustCompile(`^[A-Za-z]{1,8}$`)

// SpendWarnings lists teams that have a spend budget but may use a model without a price:
// such calls cost nothing as far as the budget can tell.
func (c *Config) SpendWarnings() []string {
	var out []string
	for _, t := range c.Teams {
		spend := t.Limits.SpendPerDay > 0 || t.Limits.SpendPerMonth > 0
		for _, k := range t.Keys {
			spend = spend || k.Limits.SpendPerDay > 0 || k.Limits.SpendPerMonth > 0
		}
		if !spend {
			continue
		}
		if len(c.Models) == 0 {
			out = append(out, fmt.Sprintf("team %s has a spend limit but no models are listed, so none has a price: its spend is not counted", t.Name))
			continue
		}
		allowed := map[string]bool{}
		for _, m := range t.Models {
			allowed[m] = true
		}
		var unpriced []string
		for _, m := range c.Models {
			if m.Price == nil && (len(t.Models) == 0 || allowed[m.ID]) {
				unpriced = append(unpriced, m.ID)
			}
		}
		if len(unpriced) > 0 {
			out = append(out, fmt.Sprintf("team %s has a spend limit but may use models without a price (%s): their calls cost nothing against it", t.Name, strings.Join(unpriced, ", ")))
		}
	}
	return out
}
