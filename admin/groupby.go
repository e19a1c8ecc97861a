package admin

import (
	"net/url"
	"strings"

	"modelgate/billing"
	"modelgate/config"
)

// grouping is a history query's group_by: the fields it keeps (team, key, model) and at
// most one attribution split (a tag key's values, or the end users).
type grouping struct {
	fields map[string]bool
	split  *billing.Dimension
}

// splitName is the split's CSV column: "tag:<key>" or "user".
func (g grouping) splitName() string {
	if g.split.TagKey != "" {
		return "tag:" + g.split.TagKey
	}
	return "user"
}

// parseGroupBy reads group_by (default team,key,model): a comma-separated list of team,
// key, model, user and tag:<key>, the tag key one of usage.tag_keys. The attribution rows
// are per team and model, with no key: a split combines with team and model only, and with
// one split at a time. It returns a message for the client when group_by is not one of
// those.
func parseGroupBy(q url.Values, usage *config.Usage) (grouping, string) {
	g := grouping{fields: map[string]bool{"team": true, "key": true, "model": true}}
	s, ok := q["group_by"]
	if !ok {
		return g, ""
	}
	g.fields = map[string]bool{}
	for _, part := range strings.Split(strings.Join(s, ","), ",") {
		part = strings.TrimSpace(part)
		tagKey, isTag := strings.CutPrefix(part, "tag:")
		if !isTag {
			tagKey = ""
		}
		switch {
		case part == "":
		case part == "team" || part == "key" || part == "model":
			g.fields[part] = true
		case part == "user" || isTag:
			if g.split != nil {
				return g, "group_by splits by one of user and tag:<key> at a time."
			}
			if isTag && !usage.RecordsTag(tagKey) {
				return g, "group_by=tag:<key> needs a key of usage.tag_keys (" + tagKeysText(usage) + ")."
			}
			g.split = &billing.Dimension{TagKey: tagKey}
		default:
			return g, "group_by is a comma-separated list of team, key, model, user and tag:<key>."
		}
	}
	if g.split != nil && g.fields["key"] {
		return g, "Usage by tag or end user is recorded per team and model, not per key: group_by may add team and model to it."
	}
	return g, ""
}

func tagKeysText(usage *config.Usage) string {
	if len(usage.TagKeys) == 0 {
		return "none configured"
	}
	return strings.Join(usage.TagKeys, ", ")
}
