package admin

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"modelgate/config"
)

// teamRecord is a team created at run time, as the teams bucket keeps it.
type teamRecord struct {
	Name          string         `json:"name"`
	Models        []string       `json:"models,omitempty"`
	Limits        teamLimitsJSON `json:"limits"`
	EndUserLimits EndUserLimits  `json:"end_user_limits"`
	CreatedAt     time.Time      `json:"created_at"`
	UpdatedAt     time.Time      `json:"updated_at"`
}

// teamLimitsJSON is a team's limits as the admin API reads and writes them: a key's six,
// and on_budget_exceeded, which the config reads at a team's limits only.
type teamLimitsJSON struct {
	Limits
	OnBudgetExceeded string `json:"on_budget_exceeded"`
}

func (l teamLimitsJSON) config() config.Limits {
	c := l.Limits.config()
	c.OnBudgetExceeded = l.OnBudgetExceeded
	return c
}

func toTeamLimitsJSON(l config.Limits) teamLimitsJSON {
	return teamLimitsJSON{toLimitsJSON(l), l.OnBudgetExceeded}
}

// EndUserLimits is config.EndUserLimits as the admin API reads and writes it; zero is no
// limit. The teams command reads the API's answers with it.
type EndUserLimits struct {
	RequestsPerMinute int64   `json:"requests_per_minute"`
	TokensPerDay      int64   `json:"tokens_per_day"`
	SpendPerDay       float64 `json:"spend_per_day"`
}

func (l EndUserLimits) config() config.EndUserLimits {
	return config.EndUserLimits{RequestsPerMinute: l.RequestsPerMinute, TokensPerDay: l.TokensPerDay, SpendPerDay: l.SpendPerDay}
}

func toEndUserLimitsJSON(l config.EndUserLimits) EndUserLimits {
	return EndUserLimits{l.RequestsPerMinute, l.TokensPerDay, l.SpendPerDay}
}

// teamProblem is a refused team body, as writeError takes it.
type teamProblem struct{ code, param, msg string }

// The fields a team body may hold, and the names of each nested object's fields. The
// names are the config's (teams[].limits, teams[].end_user_limits).
var (
	teamFields     = []string{"name", "models", "limits", "end_user_limits"}
	intLimitFields = []string{"requests_per_minute", "tokens_per_minute", "concurrent_requests", "tokens_per_day"}
	endUserInts    = []string{"requests_per_minute", "tokens_per_day"}
)

// mergeTeam applies body, a JSON merge patch (RFC 7396) of a team's fields, to base and
// returns the result and the paths it changed, sorted. POST /admin/teams merges onto the
// zero team (create: name required), PATCH onto the stored one (name, if given, must be
// the team's own: a team is not renamed). A field set to null goes back to its default (no
// limit, every model). It checks the body's shape only; teamRecordProblem checks values.
func mergeTeam(base teamRecord, body []byte, create bool) (teamRecord, []string, *teamProblem) {
	if k := repeatedField(body); k != "" {
		k = strings.ToValidUTF8(k[:min(len(k), 64)], "")
		return base, nil, &teamProblem{"duplicate_parameter", k, "The request repeats the field " + strconv.Quote(k) + ": send each field once."}
	}
	top, bad := jsonObject(body, "", "The body must be a JSON object with name, models, limits and end_user_limits.")
	if bad != nil {
		return base, nil, bad
	}
	out := base
	out.Models = slices.Clone(base.Models)
	for _, k := range sortedKeys(top) {
		raw := top[k]
		switch k {
		case "name":
			var name string
			if json.Unmarshal(raw, &name) != nil {
				return base, nil, &teamProblem{"invalid_type", "name", "name must be a string."}
			}
			if !create && name != base.Name {
				return base, nil, &teamProblem{"invalid_name", "name", "A team cannot be renamed: create a new team and move its keys."}
			}
			out.Name = name
		case "models":
			var models []string
			if isNull(raw) {
				models = nil
			} else if json.Unmarshal(raw, &models) != nil || models == nil {
				return base, nil, &teamProblem{"invalid_type", "models", "models must be a list of model ids (or null: every model)."}
			}
			if len(models) == 0 {
				models = nil
			}
			out.Models = models
		case "limits":
			if bad := mergeLimits(&out.Limits, raw); bad != nil {
				return base, nil, bad
			}
		case "end_user_limits":
			if bad := mergeEndUserLimits(&out.EndUserLimits, raw); bad != nil {
				return base, nil, bad
			}
		default:
			return base, nil, unknownField(k, "", teamFields)
		}
	}
	if create && out.Name == "" {
		return base, nil, &teamProblem{"missing_required_parameter", "name", "Missing required parameter: 'name'."}
	}
	return out, teamChanges(base, out), nil
}

// mergeLimits merges raw, the limits object of a team body, into l.
func mergeLimits(l *teamLimitsJSON, raw json.RawMessage) *teamProblem {
	if isNull(raw) {
		*l = teamLimitsJSON{}
		return nil
	}
	ints := map[string]*int64{"requests_per_minute": &l.RequestsPerMinute, "tokens_per_minute": &l.TokensPerMinute,
		"concurrent_requests": &l.ConcurrentRequests, "tokens_per_day": &l.TokensPerDay}
	floats := map[string]*float64{"spend_per_day": &l.SpendPerDay, "spend_per_month": &l.SpendPerMonth}
	known := append(slices.Clone(intLimitFields), "spend_per_day", "spend_per_month", "on_budget_exceeded")
	return mergeNumbers(raw, "limits", "limits must be an object of the config's limit names.", ints, floats, known,
		func(k string, raw json.RawMessage) (bool, *teamProblem) {
			if k != "on_budget_exceeded" {
				return false, nil
			}
			var s string
			if !isNull(raw) && json.Unmarshal(raw, &s) != nil {
				return true, &teamProblem{"invalid_type", "limits.on_budget_exceeded", "limits.on_budget_exceeded must be \"refuse\" or \"clamp\"."}
			}
			l.OnBudgetExceeded = s
			return true, nil
		})
}

// mergeEndUserLimits merges raw, the end_user_limits object of a team body, into l.
func mergeEndUserLimits(l *EndUserLimits, raw json.RawMessage) *teamProblem {
	if isNull(raw) {
		*l = EndUserLimits{}
		return nil
	}
	ints := map[string]*int64{"requests_per_minute": &l.RequestsPerMinute, "tokens_per_day": &l.TokensPerDay}
	floats := map[string]*float64{"spend_per_day": &l.SpendPerDay}
	return mergeNumbers(raw, "end_user_limits", "end_user_limits must be an object of requests_per_minute, tokens_per_day and spend_per_day.",
		ints, floats, append(slices.Clone(endUserInts), "spend_per_day"), nil)
}

// mergeNumbers merges raw, the object param of a team body (notObject says what it must be),
// into the limits ints and floats name, in key order. other, if any, first reads a member
// that is no number (done: it was one of its own); any other member is refused as unknown,
// naming the known ones.
func mergeNumbers(raw json.RawMessage, param, notObject string, ints map[string]*int64, floats map[string]*float64,
	known []string, other func(k string, raw json.RawMessage) (done bool, bad *teamProblem)) *teamProblem {
	fields, bad := jsonObject(raw, param, notObject)
	if bad != nil {
		return bad
	}
	for _, k := range sortedKeys(fields) {
		if other != nil {
			done, bad := other(k, fields[k])
			if bad != nil {
				return bad
			}
			if done {
				continue
			}
		}
		if ints[k] == nil && floats[k] == nil {
			return unknownField(k, param, known)
		}
		if bad := mergeNumber(fields[k], param+"."+k, ints[k], floats[k]); bad != nil {
			return bad
		}
	}
	return nil
}

// mergeNumber sets whichever of i and f is not nil from raw: null is 0 (no limit), a count
// must be a whole number.
func mergeNumber(raw json.RawMessage, path string, i *int64, f *float64) *teamProblem {
	switch {
	case i != nil:
		var n int64
		if !isNull(raw) && json.Unmarshal(raw, &n) != nil {
			return &teamProblem{"invalid_type", path, path + " must be a whole number from 0 up (0: no limit)."}
		}
		*i = n
	case f != nil:
		var n float64
		if !isNull(raw) && json.Unmarshal(raw, &n) != nil {
			return &teamProblem{"invalid_type", path, path + " must be a number from 0 up (0: no limit)."}
		}
		*f = n
	}
	return nil
}

// jsonObject decodes raw as one JSON object of raw fields.
func jsonObject(raw []byte, param, msg string) (map[string]json.RawMessage, *teamProblem) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
		code := "invalid_type"
		if param == "" {
			code = "invalid_json"
		}
		return nil, &teamProblem{code, param, msg}
	}
	return m, nil
}

// unknownField refuses a field the body may not hold, naming it (bounded) and the ones it may.
func unknownField(k, under string, known []string) *teamProblem {
	k = strings.ToValidUTF8(k[:min(len(k), 64)], "")
	path := k
	where := "a team body"
	if under != "" {
		path, where = under+"."+k, under
	}
	return &teamProblem{"unknown_parameter", path, "Unknown field " + strconv.Quote(path) + ": " + where + " takes " + strings.Join(known, ", ") + "."}
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// teamRecordProblem checks a team's values under cfg, the rules the config's teams follow:
// a bounded name, limits from 0, on_budget_exceeded refuse or clamp, each model configured
// (when models are listed at all) and given once.
func teamRecordProblem(cfg *config.Config, t teamRecord) *teamProblem {
	if !nameRE.MatchString(t.Name) {
		return &teamProblem{"invalid_name", "name", "A team name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit."}
	}
	if p := t.Limits.problem(); p != "" {
		return &teamProblem{"invalid_limits", "limits", "limits: " + p + "."}
	}
	if o := t.Limits.OnBudgetExceeded; o != "" && o != config.BudgetRefuse && o != config.BudgetClamp {
		return &teamProblem{"invalid_limits", "limits.on_budget_exceeded", "limits.on_budget_exceeded must be \"refuse\" or \"clamp\" (or left out: the top-level limits' choice)."}
	}
	e := t.EndUserLimits
	if e.RequestsPerMinute < 0 || e.TokensPerDay < 0 || e.SpendPerDay < 0 || e.SpendPerDay > 1e12 || e.SpendPerDay != e.SpendPerDay {
		return &teamProblem{"invalid_limits", "end_user_limits", "end_user_limits must not be negative (spend_per_day at most 1e12)."}
	}
	if i, p := cfg.KeyModelsProblem(&config.Team{}, t.Models); p != "" {
		return &teamProblem{"invalid_model", "models", "models[" + strconv.Itoa(i) + "]: " + p + "."}
	}
	return nil
}

// teamChanges lists the paths at which two versions of a team differ, sorted: what a
// team.updated audit entry names.
func teamChanges(a, b teamRecord) []string {
	var out []string
	if !slices.Equal(a.Models, b.Models) {
		out = append(out, "models")
	}
	la, lb := a.Limits, b.Limits
	for _, f := range []struct {
		name string
		x, y float64
	}{{"concurrent_requests", float64(la.ConcurrentRequests), float64(lb.ConcurrentRequests)},
		{"requests_per_minute", float64(la.RequestsPerMinute), float64(lb.RequestsPerMinute)},
		{"spend_per_day", la.SpendPerDay, lb.SpendPerDay}, {"spend_per_month", la.SpendPerMonth, lb.SpendPerMonth},
		{"tokens_per_day", float64(la.TokensPerDay), float64(lb.TokensPerDay)},
		{"tokens_per_minute", float64(la.TokensPerMinute), float64(lb.TokensPerMinute)}} {
		if f.x != f.y {
			out = append(out, "limits."+f.name)
		}
	}
	if la.OnBudgetExceeded != lb.OnBudgetExceeded {
		out = append(out, "limits.on_budget_exceeded")
	}
	ea, eb := a.EndUserLimits, b.EndUserLimits
	if ea.RequestsPerMinute != eb.RequestsPerMinute {
		out = append(out, "end_user_limits.requests_per_minute")
	}
	if ea.SpendPerDay != eb.SpendPerDay {
		out = append(out, "end_user_limits.spend_per_day")
	}
	if ea.TokensPerDay != eb.TokensPerDay {
		out = append(out, "end_user_limits.tokens_per_day")
	}
	sort.Strings(out)
	return out
}
