package metrics

import "sync"

// Keys issued through the admin API are not in the config, yet their calls are a team's
// like any other: they are labelled by the key's name (issue 45), as config keys are. The
// names are valid key names (1-64 letters, digits, '.', '_', '-'), and at most
// maxIssuedKeyLabels of them ever label series; later ones share issuedOverflow, so the
// number of series stays bounded however many keys are issued and revoked.
const (
	maxIssuedKeyLabels = 500
	issuedOverflow     = "(issued)"
	maxKeyNameLen      = 64
)

// issuedLabels is the set of issued key names that label series, per team.
type issuedLabels struct {
	mu    sync.Mutex
	names map[string]map[string]bool // team -> key names
	n     int
}

// keyLabel is the key label of a call of key in team (as the request recorded them): a
// config key's name, an issued key's name while the set has room, or the fixed words of
// labelTable.key.
func (m *Metrics) keyLabel(lt *labelTable, team, key string) string {
	k := lt.key(team, key)
	if _, configured := lt.teams[team]; k != "" || !configured || !validKeyName(key) {
		return k
	}
	return m.issued.label(team, key)
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
// gone with the team's (dropStale).
func (s *issuedLabels) forgetTeams(lt *labelTable) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for team, names := range s.names {
		if _, ok := lt.teams[team]; !ok {
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
