package metrics

import "sync"

// Keys issued through the admin API are not in the config, yet their calls are a team's
// like any other: they are labelled by the key's name (issue 45), as config keys are. The
// names are valid key names (1-64 letters, digits, '.', '_', '-'), and at most
// maxIssuedKeyLabels of them ever label series; later ones share issuedOverflow, so the
// number of series stays bounded however many keys are issued and revoked.
//
// Teams created through the admin API are not in the config either: their calls are
// labelled by the team's name (a name the admin API checked, never the caller's), at most
// maxRuntimeTeamLabels of them, later ones sharing runtimeOverflow; their keys are issued
// keys, labelled as above.
const (
	maxIssuedKeyLabels   = 500
	issuedOverflow       = "(issued)"
	maxKeyNameLen        = 64
	maxRuntimeTeamLabels = 1000 // the admin API's cap on runtime teams
	runtimeOverflow      = "(runtime)"
)

// issuedLabels is the set of issued key names that label series, per team, and the runtime
// teams' names that do.
type issuedLabels struct {
	mu       sync.Mutex
	names    map[string]map[string]bool // team -> key names
	n        int
	runtimes map[string]bool // runtime team names
}

// teamLabel is the team label of a call recorded under team: a config team's name, a
// runtime team's while the set has room, or "" (no team, or a config team a reload
// removed while its call was in flight).
func (m *Metrics) teamLabel(lt *labelTable, team string, runtime bool) string {
	if t := lt.team(team); t != "" || !runtime || !validKeyName(team) {
		return t
	}
	return m.issued.runtime(team)
}

// keyLabel is the key label of a call of key in team (as the request recorded them): a
// config key's name, an issued key's name while the set has room, or the fixed words of
// labelTable.key. teamLabel is the call's team label.
func (m *Metrics) keyLabel(lt *labelTable, team, teamLabel, key string) string {
	k := lt.key(team, key)
	if _, configured := lt.teams[team]; k != "" || !validKeyName(key) || !configured && (teamLabel != team) {
		return k
	}
	return m.issued.label(team, key)
}

func (s *issuedLabels) runtime(team string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runtimes[team] {
		return team
	}
	if len(s.runtimes) >= maxRuntimeTeamLabels {
		return runtimeOverflow
	}
	if s.runtimes == nil {
		s.runtimes = map[string]bool{}
	}
	s.runtimes[team] = true
	return team
}

func (s *issuedLabels) label(team, key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names[team][key] {
		return key
	}
	if s.n >= maxIssuedKeyLabels {
		return issuedOverflow
	}
	if s.names == nil {
		s.names = map[string]map[string]bool{}
	}
	if s.names[team] == nil {
		s.names[team] = map[string]bool{}
	}
	s.names[team][key] = true
	s.n++
	return key
}

// forgetTeams drops the names of teams the running config no longer has: their series are
// gone with the team's (dropStale). Runtime teams' keys stay: the config never had them.
func (s *issuedLabels) forgetTeams(lt *labelTable) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for team, names := range s.names {
		if _, ok := lt.teams[team]; !ok && !s.runtimes[team] {
			s.n -= len(names)
			delete(s.names, team)
		}
	}
}

// validKeyName is the config's and the admin API's rule for key names.
func validKeyName(k string) bool {
	if k == "" || len(k) > maxKeyNameLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return false
		}
	}
	return true
}
