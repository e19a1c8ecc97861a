package admin

import (
	"context"
	"encoding/csv"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"modelgate/billing"
)

// maxHistoryDays bounds one history query, so a typo in a year cannot scan a decade.
const maxHistoryDays = 366

// maxHourlyDays bounds an hourly query the same way.
const maxHourlyDays = 31

// historyRow is one row of GET /admin/usage/history.
type historyRow struct {
	Day   string `json:"day"`
	Hour  string `json:"hour,omitempty"`
	Team  string `json:"team,omitempty"`
	Key   string `json:"key,omitempty"`
	Model string `json:"model,omitempty"`
	// One of these with group_by=tag:<key> or user: the tag's value or the end user, or
	// "(none)" for requests without one, "(other)" past the per-day cap.
	TagKey            string  `json:"tag_key,omitempty"`
	TagValue          string  `json:"tag_value,omitempty"`
	User              string  `json:"user,omitempty"`
	Requests          int64   `json:"requests"`
	InputTokens       int64   `json:"input_tokens"`
	CachedInputTokens int64   `json:"cached_input_tokens"`
	OutputTokens      int64   `json:"output_tokens"`
	ReasoningTokens   int64   `json:"reasoning_tokens"`
	Cost              float64 `json:"cost"`
}

// history answers the persisted usage of from..to (default: the last 30 days up to today)
// summed per day (or per hour with granularity=hour) and per the group_by dimensions
// (default team,key,model), as JSON or, for Accept: text/csv, as CSV.
func (a *API) history(w http.ResponseWriter, r *http.Request) {
	if a.d.History == nil {
		writeError(w, http.StatusServiceUnavailable, "history_disabled", "", "Usage history is not recorded (usage_history.enabled is false).")
		return
	}
	q := r.URL.Query()
	today := a.d.Now().UTC().Truncate(24 * time.Hour)
	from, to := today.AddDate(0, 0, -29), today
	var err error
	if s := q.Get("from"); s != "" {
		if from, err = time.Parse(time.DateOnly, s); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_date", "from", "from must be a date as YYYY-MM-DD.")
			return
		}
	}
	if s := q.Get("to"); s != "" {
		if to, err = time.Parse(time.DateOnly, s); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_date", "to", "to must be a date as YYYY-MM-DD.")
			return
		}
	}
	if to.Before(from) {
		writeError(w, http.StatusBadRequest, "invalid_range", "to", "to must not be before from.")
		return
	}
	if to.Sub(from) > maxHistoryDays*24*time.Hour {
		writeError(w, http.StatusBadRequest, "invalid_range", "from", "A query covers at most 366 days.")
		return
	}
	cfg, _ := a.d.State()
	g, msg := parseGroupBy(q, &cfg.Usage)
	if msg != "" {
		writeError(w, http.StatusBadRequest, "invalid_group_by", "group_by", msg)
		return
	}
	groupBy := g.fields
	query := a.d.History.Query
	if g.split != nil {
		dim := *g.split
		query = func(ctx context.Context, from, to string, groupBy map[string]bool) ([]billing.Row, error) {
			return a.d.History.QueryAttribution(ctx, from, to, dim, groupBy)
		}
	}
	switch q.Get("granularity") {
	case "", "day":
	case "hour":
		if g.split != nil {
			writeError(w, http.StatusBadRequest, "invalid_granularity", "granularity", "Usage by tag or end user is kept per day only: leave out granularity=hour.")
			return
		}
		query = a.d.History.QueryHours
		if to.Sub(from) > maxHourlyDays*24*time.Hour {
			writeError(w, http.StatusBadRequest, "invalid_range", "from", "An hourly query covers at most 31 days.")
			return
		}
	default:
		writeError(w, http.StatusBadRequest, "invalid_granularity", "granularity", "granularity is day or hour.")
		return
	}
	rows, err := query(r.Context(), from.Format("20060102"), to.Format("20060102"), groupBy)
	if err != nil {
		a.storeFailed(w, err)
		return
	}
	out := make([]historyRow, len(rows))
	for i, row := range rows {
		out[i] = historyRow{Day: row.Day, Hour: row.Hour, Team: row.Team, Key: row.Key, Model: row.Model, Requests: row.Requests,
			InputTokens: row.InputTokens, CachedInputTokens: row.CachedInputTokens, OutputTokens: row.OutputTokens,
			ReasoningTokens: row.ReasoningTokens, Cost: billing.Amount(row.CostMicros)}
		switch {
		case g.split == nil:
		case g.split.TagKey != "":
			out[i].TagKey, out[i].TagValue = g.split.TagKey, row.Value
		default:
			out[i].User = row.Value
		}
	}
	if wantsCSV(r.Header.Get("Accept")) {
		writeHistoryCSV(w, out, g, cfg.Pricing.Currency, q.Get("granularity") == "hour")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"from": from.Format(time.DateOnly), "to": to.Format(time.DateOnly),
		"currency": cfg.Pricing.Currency, "rows": out,
	})
}

func wantsCSV(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/csv" {
			return true
		}
	}
	return false
}

func writeHistoryCSV(w http.ResponseWriter, rows []historyRow, g grouping, currency string, hourly bool) {
	groupBy := g.fields
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="modelgate-usage.csv"`)
	cw := csv.NewWriter(w)
	head := []string{"day"}
	if hourly {
		head = []string{"hour"}
	}
	for _, g := range []string{"team", "key", "model"} {
		if groupBy[g] {
			head = append(head, g)
		}
	}
	if g.split != nil {
		head = append(head, g.splitName())
	}
	head = append(head, "requests", "input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens", "cost_"+strings.ToLower(currency))
	_ = cw.Write(head)
	for _, r := range rows {
		rec := []string{r.Day}
		if hourly {
			rec = []string{r.Hour}
		}
		if groupBy["team"] {
			rec = append(rec, csvSafe(r.Team))
		}
		if groupBy["key"] {
			rec = append(rec, csvSafe(r.Key))
		}
		if groupBy["model"] {
			rec = append(rec, csvSafe(r.Model))
		}
		if g.split != nil {
			rec = append(rec, csvSafe(r.TagValue+r.User)) // one of them is set
		}
		rec = append(rec, itoa(r.Requests), itoa(r.InputTokens), itoa(r.CachedInputTokens), itoa(r.OutputTokens),
			itoa(r.ReasoningTokens), strconv.FormatFloat(r.Cost, 'f', 6, 64))
		_ = cw.Write(rec)
	}
	cw.Flush()
}

// csvSafe keeps a spreadsheet from reading a name a client chose (a model name) as a
// formula. Spreadsheets start a formula at = + - @, and skip leading blanks and line breaks
// before one; some also take the full-width forms (＝ ＋ － ＠) for the ASCII ones. Such a
// value gets a leading apostrophe, which spreadsheets show as text; so does one that starts
// with a tab or a line break, which some read as the start of another cell.
func csvSafe(s string) string {
	if s == "" {
		return s
	}
	if c := s[0]; c == '\t' || c == '\r' || c == '\n' {
		return "'" + s
	}
	r, _ := utf8.DecodeRuneInString(strings.TrimLeftFunc(s, unicode.IsSpace))
	switch r {
	case '=', '+', '-', '@', '＝', '＋', '－', '＠':
		return "'" + s
	}
	return s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
