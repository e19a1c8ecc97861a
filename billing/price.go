// Package billing turns usage into money and keeps it: model prices, the spend budgets
// (spend_per_day, spend_per_month) and the per-day usage history. Money is kept in integer
// micro-units of pricing.currency (1 USD = 1,000,000), so sums are exact and the store's
// counters can hold it.
package billing

import (
	"math"

	"modelgate/config"
)

// Micro is one millionth of the currency unit.
const Micro = 1_000_000

// Usage is what one request consumed, as the platform reported it.
type Usage struct {
	InputTokens       int64 // all input tokens, cached ones included
	CachedInputTokens int64 // the part of InputTokens served from the platform's cache
	OutputTokens      int64 // reasoning tokens included
	ReasoningTokens   int64
}

// price is one model's price per 1M tokens, in currency units.
type price struct{ input, cached, output float64 }

// Prices maps client-facing model ids to their prices. The zero value prices nothing.
type Prices map[string]price

// NewPrices reads the models' prices from cfg.
func NewPrices(cfg *config.Config) Prices {
	p := Prices{}
	for _, m := range cfg.Models {
		if m.Price == nil {
			continue
		}
		cached := m.Price.Input
		if m.Price.CachedInput != nil {
			cached = *m.Price.CachedInput
		}
		p[m.ID] = price{m.Price.Input, cached, m.Price.Output}
	}
	return p
}

// Priced reports whether model has a price.
func (p Prices) Priced(model string) bool { _, ok := p[model]; return ok }

// Cost is what u costs on model, in micro-units, rounded up so that no paid call is free.
// An unpriced model costs nothing.
func (p Prices) Cost(model string, u Usage) int64 {
	pr, ok := p[model]
	if !ok {
		return 0
	}
	cached := min(max(u.CachedInputTokens, 0), max(u.InputTokens, 0))
	uncached := max(u.InputTokens, 0) - cached
	// tokens x (currency per 1M tokens) is exactly micro-units.
	c := float64(uncached)*pr.input + float64(cached)*pr.cached + float64(max(u.OutputTokens, 0))*pr.output
	return toMicros(math.Ceil(c - 1e-9))
}

// Estimate is the most a call with this input estimate and output cap can cost: what
// admission reserves against the spend budgets.
func (p Prices) Estimate(model string, inputTokens, outputCap int64) int64 {
	return p.Cost(model, Usage{InputTokens: inputTokens, OutputTokens: outputCap})
}

// OutputWithin is the most output tokens a call with this input estimate may be capped at
// on model and cost at most amount micro-units: what a clamped call can afford. It is -1
// when the input alone costs more than amount, and math.MaxInt64 when output is free (an
// unpriced model, or a zero output price).
func (p Prices) OutputWithin(model string, inputTokens, amount int64) int64 {
	pr, ok := p[model]
	if !ok || pr.output <= 0 {
		return math.MaxInt64
	}
	if p.Estimate(model, inputTokens, 0) > amount {
		return -1
	}
	// Cost rounds the whole sum up, not each part, so the division only brackets the answer:
	// hi costs more than amount whatever the input's fraction, and the search finds the edge.
	lo, hi := int64(0), toMicros(math.Floor(float64(amount+1)/pr.output))+1
	if p.Estimate(model, inputTokens, hi) <= amount {
		return hi // only at the cap toMicros puts on amounts
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if p.Estimate(model, inputTokens, mid) <= amount {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// MicrosOf converts an amount of currency to micro-units.
func MicrosOf(amount float64) int64 { return toMicros(math.Round(amount * Micro)) }

// Amount converts micro-units to currency.
func Amount(micros int64) float64 { return float64(micros) / Micro }

func toMicros(f float64) int64 {
	switch {
	case f <= 0 || f != f:
		return 0
	case f >= math.MaxInt64/4:
		return math.MaxInt64 / 4
	}
	return int64(f)
}
