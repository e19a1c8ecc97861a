package accounting

import (
	"log/slog"

	"modelgate/billing"
	"modelgate/ratelimit"
	"modelgate/reqlog"
)

// Settler settles admitted requests, each exactly once: their limiter ticket, their record,
// their spend budgets and their usage-history row. Ledger, History and Calibration may be
// nil.
type Settler struct {
	Log     *slog.Logger
	Ledger  *billing.Ledger
	History *billing.Recorder
	// Calibration learns from every settlement at the platform's own figure how its input
	// tokens compare with modelgate's estimate (a calibration.Table).
	Calibration Learner
}

// Learner learns from one request whose input the platform reported: estimated is
// modelgate's first estimate of the platform calls that reported, reported their input
// tokens. It learns per team, so one team's calls set its own estimates, not another's.
type Learner interface {
	Observe(team, model string, estimated, reported int64)
}

// SettleAfter settles the request's ticket with ch and writes the usage into its record for
// the access log and the metrics; when the usage is estimated it also logs the "billed,
// usage unknown" warning an operator reconciles against the platform's bill. prior is the
// usage of earlier attempts on other models a fallback abandoned (none: zero): the ticket,
// which admitted the whole request, settles with it and ch's; the record, which prices and
// logs the model that served it, with ch alone. The abandoned attempts were recorded and
// billed by SettleApart.
func (s Settler) SettleAfter(t *ratelimit.Ticket, ch Charge, prior ratelimit.Usage, rec *reqlog.Record) {
	t.Settle(ch.Plus(Charge{Usage: prior}).Usage)
	s.record(ch, rec)
}

// SettleApart records and bills a call apart from a ticket settled here: an abandoned attempt
// of a request that goes on to a fallback model (rec names the attempt's model, ServedModel,
// and its upstream failure; the request's final SettleAfter carries its usage), or a call a
// previous life of the replica admitted and never settled (rec filled from the admission
// journal, ch its reservation as the limiter settled it, spend holding nothing since the hold
// died with the process). It returns the cost in micro-units.
func (s Settler) SettleApart(ch Charge, rec *reqlog.Record, spend Spend, prices billing.Prices) int64 {
	s.record(ch, rec)
	return s.Bill(rec, spend, prices)
}

// record writes ch into rec, teaches calibration from a platform figure, and warns when the
// usage is an estimate.
func (s Settler) record(ch Charge, rec *reqlog.Record) {
	rec.InputTokens, rec.OutputTokens = ch.Usage.InputTokens, ch.Usage.OutputTokens
	rec.CachedTokens, rec.ReasoningTokens = ch.Usage.CachedInputTokens, ch.Usage.ReasoningTokens
	rec.UsageEstimated = ch.Unknown
	if ch.Unknown == "" && ch.Reported > 0 && s.Calibration != nil && rec.InputEstimate > 0 && ch.Usage.InputTokens > 0 {
		s.Calibration.Observe(rec.Team, rec.PricedModel(), rec.InputEstimate*int64(ch.Reported), ch.Usage.InputTokens)
	}
	if ch.Unknown != "" {
		s.Log.Warn("billed, usage unknown",
			slog.String("request_id", rec.RequestID),
			slog.String("route", rec.Route),
			slog.String("team", rec.Team),
			slog.String("reason", ch.Unknown),
			slog.Int64("input_tokens", ch.Usage.InputTokens),
			slog.Int64("output_tokens", ch.Usage.OutputTokens),
		)
	}
}

// Spend is what a request holds against the spend budgets: the hold its admission took (nil
// when it took none), and the key's and team's budget scopes and its end user's daily one to
// charge directly when it took none ("" when there is none to charge).
type Spend struct {
	Hold                *billing.Hold
	KeyScope, TeamScope string
	EndUserScope        string // keeps a daily total only
}

// charge settles spend's hold with cost, or charges cost to its scopes when it holds none.
func (s Settler) charge(spend Spend, cost int64) {
	switch {
	case spend.Hold != nil:
		spend.Hold.Settle(cost)
	case s.Ledger != nil && spend.KeyScope != "" && cost > 0:
		// A call that reserved nothing (a crashed one's hold died with its process): still
		// charged.
		s.Ledger.Charge([]string{spend.KeyScope, spend.TeamScope}, cost)
		s.Ledger.ChargeDay(spend.EndUserScope, cost)
	}
}

// Bill runs once a request is answered, after Settle: it settles the spend hold with the
// cost of the settled usage at prices and adds the request to the usage history. It returns
// the cost in micro-units.
func (s Settler) Bill(rec *reqlog.Record, spend Spend, prices billing.Prices) int64 {
	if !rec.Admitted {
		spend.Hold.Cancel() // refused by the limiter after the spend was held
		return 0
	}
	if rec.BilledLater {
		return 0 // a background submission: its job settles and records the call when it ends
	}
	if rec.Team == "" || rec.Model == "" {
		return 0 // passthrough callers have no team; calls without a model (sidecar) no tokens
	}
	u := billing.Usage{InputTokens: rec.InputTokens, CachedInputTokens: rec.CachedTokens,
		OutputTokens: rec.OutputTokens, ReasoningTokens: rec.ReasoningTokens}
	model := rec.PricedModel()
	cost := prices.Cost(model, u)
	s.charge(spend, cost)
	if s.History != nil && !platformRefused(rec, u) {
		s.recordHistory(rec, model, u, cost)
	}
	return cost
}

// recordHistory adds the request to the usage history with its end user and tags. The tags
// are read into billing's shape on the stack (the history keeps none of the slice, and a
// request has at most MaxTags), so the attribution costs the request path no allocation.
func (s Settler) recordHistory(rec *reqlog.Record, model string, u billing.Usage, cost int64) {
	var buf [reqlog.MaxTags]billing.Tag
	tags := buf[:0]
	for t, rest, ok := reqlog.CutTag(rec.Tags); ok && len(tags) < len(buf); t, rest, ok = reqlog.CutTag(rest) {
		tags = append(tags, billing.Tag(t))
	}
	s.History.RecordAttributed(rec.Team, rec.Key, model, u, cost, rec.EndUser, tags)
}

// platformRefused reports a call that failed upstream with nothing billed: no usage, and no
// bound charged in its place. The usage history counts what the platform did (and bills);
// a refusal did nothing, and a row per refusal would let any caller fill the history with
// rows of made-up model names the platform rejects. Modelgate's own refusals never reach
// the history at all (they are not admitted). The request still shows in the logs and
// metrics.
func platformRefused(rec *reqlog.Record, u billing.Usage) bool {
	return rec.UpstreamErr != "" && rec.UsageEstimated == "" && u == (billing.Usage{})
}
