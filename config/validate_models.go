package config

import (
	"fmt"
	"strings"
)

// modelIDProblem rejects ids that could not round-trip through a URL path or a log line.
func modelIDProblem(id string) string {
	if id == "" {
		return "is empty"
	}
	if len(id) > 256 {
		return "is longer than 256 bytes"
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c == 0x7f {
			return fmt.Sprintf("contains a space or control character: %q", id)
		}
	}
	return ""
}

// uniqueID checks the model id at path, item i of its list: well formed, and the first of
// its name in the list (first holds the index each id first stood at). dup words a repeat's
// failure from the id and the index of its first.
func (v *validator) uniqueID(path, id string, i int, first map[string]int, dup string) {
	if prob := modelIDProblem(id); prob != "" {
		v.fail(path, "%s", prob)
	} else if j, ok := first[id]; ok {
		v.fail(path, dup, id, j)
	} else {
		first[id] = i
	}
}

func (v *validator) models(models []Model) map[string]bool {
	ids := make(map[string]bool, len(models))
	first := make(map[string]int, len(models))
	for i, m := range models {
		p := fmt.Sprintf("models[%d]", i)
		v.uniqueID(p+".id", m.ID, i, first, "duplicate model id %q (also models[%d])")
		ids[m.ID] = true
		if m.Upstream != "" {
			if prob := modelIDProblem(m.Upstream); prob != "" {
				v.fail(p+".upstream", "%s", prob)
			}
		}
		v.routes(p, m)
		if m.ContextWindow < 0 {
			v.fail(p+".context_window", "must not be negative")
		}
		if m.FirstTokenTimeout < 0 {
			v.fail(p+".first_token_timeout", "must not be negative")
		}
		if m.Retries != nil && (*m.Retries < 0 || *m.Retries > MaxModelRetries) {
			v.fail(p+".retries", "must be between 0 and %d, got %d", MaxModelRetries, *m.Retries)
		}
		v.compactInstructions(p, m.CompactInstructions)
	}
	for i, m := range models {
		v.fallbacks(fmt.Sprintf("models[%d].fallbacks", i), m, ids)
	}
	return ids
}

// compactInstructions checks a model's compact_instructions: unset, or text of at most
// MaxCompactInstructions bytes that says something (a blank value would ask the model for a
// summary with no instructions at all).
func (v *validator) compactInstructions(p, s string) {
	switch {
	case s == "":
	case strings.TrimSpace(s) == "":
		v.fail(p+".compact_instructions", "is blank: leave it unset for modelgate's own instructions")
	case len(s) > MaxCompactInstructions:
		v.fail(p+".compact_instructions", "is %d bytes long, more than %d", len(s), MaxCompactInstructions)
	}
}

// routes checks a model's weighted routes and its sticky choice: routes replace upstream,
// each names a distinct platform model with a positive weight, and sticky needs routes to
// choose between.
func (v *validator) routes(p string, m Model) {
	switch m.Sticky {
	case "", StickyUser, StickyConversation:
	default:
		v.fail(p+".sticky", "want user, conversation or empty, got %q", m.Sticky)
	}
	if m.Routes == nil {
		if m.Sticky != "" {
			v.fail(p+".sticky", "sticky chooses between routes: set routes too")
		}
		return
	}
	switch {
	case m.Upstream != "":
		v.fail(p+".routes", "set upstream or routes, not both")
	case len(m.Routes) == 0:
		v.fail(p+".routes", "want at least one route")
	case len(m.Routes) > MaxRoutes:
		v.fail(p+".routes", "at most %d routes, got %d", MaxRoutes, len(m.Routes))
	}
	seen := make(map[string]int, len(m.Routes))
	for j, r := range m.Routes {
		rp := fmt.Sprintf("%s.routes[%d]", p, j)
		v.uniqueID(rp+".upstream", r.Upstream, j, seen, "%q is routed twice (also routes[%d]): give it one route with the sum of the weights")
		if r.Weight < 1 || r.Weight > MaxRouteWeight {
			v.fail(rp+".weight", "want a whole number from 1 to %d, got %d", MaxRouteWeight, r.Weight)
		}
	}
}

// fallbacks checks a model's fallback chain: configured ids, not the model itself, each
// once (a repeat would only try a failing model twice).
func (v *validator) fallbacks(p string, m Model, ids map[string]bool) {
	seen := make(map[string]bool, len(m.Fallbacks))
	for j, f := range m.Fallbacks {
		fp := fmt.Sprintf("%s[%d]", p, j)
		switch {
		case f == m.ID:
			v.fail(fp, "a model cannot fall back to itself (%q)", f)
		case !ids[f]:
			v.fail(fp, "unknown model id %q (each fallback must be listed under models)", f)
		case seen[f]:
			v.fail(fp, "%q is listed twice", f)
		}
		seen[f] = true
	}
}
