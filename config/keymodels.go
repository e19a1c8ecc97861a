package config

import (
	"fmt"
	"slices"
	"strconv"
)

// keyModelProblem says what is wrong with models[i], an entry of a key's own model list, or
// "". A key narrows its team's list and never widens it, so each entry must be a well-formed
// id, given once, configured (when models are listed at all: known reports it) and one the
// team may use (a team without a list may use every model).
func keyModelProblem(models []string, i int, team []string, known func(string) bool) string {
	m := models[i]
	switch {
	case modelIDProblem(m) != "":
		return modelIDProblem(m)
	case slices.Contains(models[:i], m):
		return "model " + strconv.Quote(m) + " is listed twice"
	case known != nil && !known(m):
		return "model " + strconv.Quote(m) + " is not listed under models"
	case len(team) > 0 && !slices.Contains(team, m):
		return "model " + strconv.Quote(m) + " is not in its team's models"
	}
	return ""
}

// KeyModelsProblem checks the model list of a key of team t issued at run time under c by
// the rules config keys follow. It returns the first bad entry's index and what is wrong
// with it, or -1 and "".
func (c *Config) KeyModelsProblem(t *Team, models []string) (int, string) {
	known := c.knownModel()
	for i := range models {
		if p := keyModelProblem(models, i, t.Models, known); p != "" {
			return i, p
		}
	}
	return -1, ""
}

// knownModel reports whether an id is one of c's models; nil when none are listed, since
// then any id is forwarded as asked.
func (c *Config) knownModel() func(string) bool {
	if len(c.Models) == 0 {
		return nil
	}
	return func(id string) bool {
		return slices.ContainsFunc(c.Models, func(m Model) bool { return m.ID == id })
	}
}

// keyModels validates teams[ti].keys[ki].models, naming the key in each error.
func (v *validator) keyModels(c *Config, ti, ki int) {
	t := &c.Teams[ti]
	k := t.Keys[ki]
	known := c.knownModel()
	for j := range k.Models {
		p := keyModelProblem(k.Models, j, t.Models, known)
		if p == "" {
			continue
		}
		v.fail(fmt.Sprintf("teams[%d].keys[%d].models[%d]", ti, ki, j), "key %q: %s", k.Name, p)
	}
}
