package metrics

import (
	"strconv"

	"modelgate/auth"
	"modelgate/config"
)

// Label values that stand for "not one of the configured names". Every label value a series
// can carry comes from the config, a fixed word or a short code-chosen word, so the number of
// series stays bounded whatever clients send.
const (
	otherModel      = "other"
	passthroughKey  = auth.PassthroughKeyName
	adminKey        = "admin"
	unknownRoute    = "unknown"
	otherWord       = "other"
	maxWordLen      = 48
	maxRouteLen     = 64
	statusOutOfBand = "0"
)

// labelTable is the part of the config that decides which names may appear as label values.
// It is replaced whole on reload, never edited.
type labelTable struct {
	models map[string]bool
	teams  map[string]map[string]bool // team name -> its key names
	routes map[string]map[string]bool // model id -> the upstream models of its weighted routes
}

func newLabelTable(cfg *config.Config) *labelTable {
	t := &labelTable{models: map[string]bool{}, teams: map[string]map[string]bool{}, routes: map[string]map[string]bool{}}
	if cfg == nil {
		return t
	}
	for _, m := range cfg.Models {
		t.models[m.ID] = true
		if len(m.Routes) > 0 {
			ups := map[string]bool{}
			for _, r := range m.Routes {
				ups[r.Upstream] = true
			}
			t.routes[m.ID] = ups
		}
	}
	for _, team := range cfg.Teams {
		keys := map[string]bool{}
		for _, k := range team.Keys {
			keys[k.Name] = true
		}
		t.teams[team.Name] = keys
	}
	return t
}

// model keeps configured model ids and folds everything else into "other"; requests that name
// no model (health, /v1/models, sidecar routes) keep the empty value.
func (t *labelTable) model(m string) string {
	switch {
	case m == "":
		return ""
	case t.models[m]:
		return m
	}
	return otherModel
}

func (t *labelTable) team(name string) string {
	if _, ok := t.teams[name]; ok {
		return name
	}
	return ""
}

// key names a configured key of a configured team. A caller without a team is either the
// admin or a passthrough caller, whose "key name" is derived from a secret and must never
// become a label.
func (t *labelTable) key(team, key string) string {
	if key == "" {
		return ""
	}
	if keys, ok := t.teams[team]; ok {
		if keys[key] {
			return key
		}
		return ""
	}
	if team != "" {
		return "" // a team removed by a reload while its request was in flight
	}
	if key == adminKey {
		return adminKey
	}
	return passthroughKey
}

// route keeps route patterns (they start with '/') and the router's "unknown"; the proxy
// never reports raw paths, but a bad value must not mint a series per path either.
func route(r string) string {
	if r == "" || r == unknownRoute {
		return unknownRoute
	}
	if r[0] != '/' || len(r) > maxRouteLen {
		return otherWord
	}
	return r
}

func status(code int) string {
	if code < 100 || code > 599 {
		return statusOutOfBand
	}
	return strconv.Itoa(code)
}

// word bounds code-chosen values such as refusal reasons and upstream error kinds: short
// lowercase identifiers pass, anything else becomes "other".
func word(s string) string {
	if s == "" || len(s) > maxWordLen {
		return otherWord
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return otherWord
		}
	}
	return s
}
