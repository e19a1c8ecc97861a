package config

import (
	"fmt"
	"slices"
)

// keyModels checks a key's own model list: each id well formed, configured (when models are
// listed at all), given once, and one its team may use, since a key narrows its team's list
// and never widens it.
func (v *validator) keyModels(kp string, k Key, tp string, team []string, catalogue bool, modelIDs map[string]bool) {
	seen := make(map[string]bool, len(k.Models))
	for j, m := range k.Models {
		mp := fmt.Sprintf("%s.models[%d]", kp, j)
		switch {
		case modelIDProblem(m) != "":
			v.fail(mp, "key %q: %s", k.Name, modelIDProblem(m))
		case seen[m]:
			v.fail(mp, "key %q: model %q is listed twice", k.Name, m)
		case catalogue && !modelIDs[m]:
			v.fail(mp, "key %q: model %q is not listed under models", k.Name, m)
		case len(team) > 0 && !slices.Contains(team, m):
			v.fail(mp, "key %q: model %q is not in its team's models (%s.models)", k.Name, m, tp)
		}
		seen[m] = true
	}
}
