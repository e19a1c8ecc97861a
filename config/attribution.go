package config

import (
	"slices"
	"sort"
	"strconv"
	"unicode/utf8"
)

// Bounds of a key's default tags: those of a request's own tags (OpenAI's metadata bounds).
const (
	maxKeyTags          = 16
	maxKeyTagKeyChars   = 64
	maxKeyTagValueChars = 512
)

// TagsProblem says what is wrong with a key's default tags, or "": at most 16, each key
// 1-64 characters and each value at most 512, no control characters.
func TagsProblem(tags map[string]string) string {
	if len(tags) > maxKeyTags {
		return "at most " + strconv.Itoa(maxKeyTags) + " tags, got " + strconv.Itoa(len(tags))
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first problem named is the same every time
	for _, k := range keys {
		v := tags[k]
		switch {
		case k == "" || utf8.RuneCountInString(k) > maxKeyTagKeyChars:
			return "tag key " + strconv.Quote(k) + ": want 1-64 characters"
		case utf8.RuneCountInString(v) > maxKeyTagValueChars:
			return "tag " + strconv.Quote(k) + ": the value is longer than 512 characters"
		case !utf8.ValidString(k) || !utf8.ValidString(v) || hasControl(k) || hasControl(v):
			return "tag " + strconv.Quote(k) + ": control characters or invalid UTF-8"
		}
	}
	return ""
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// SortedTagKeys is usage.tag_keys sorted, the order a request's tags are recorded in.
func (c *Config) SortedTagKeys() []string {
	if len(c.Usage.TagKeys) == 0 {
		return nil
	}
	keys := slices.Clone(c.Usage.TagKeys)
	sort.Strings(keys)
	return keys
}

// endUserLimits validates teams[].end_user_limits.
func (v *validator) endUserLimits(path string, l EndUserLimits) {
	v.nonNegative(path+".requests_per_minute", l.RequestsPerMinute)
	v.nonNegative(path+".tokens_per_day", l.TokensPerDay)
	v.money(path+".spend_per_day", l.SpendPerDay)
}

// keyTags validates teams[].keys[].tags.
func (v *validator) keyTags(path string, tags map[string]string) {
	if p := TagsProblem(tags); p != "" {
		v.fail(path, "%s", p)
	}
}

// endUserLimitsText summarizes a team's end-user limits for `modelgate check`.
func endUserLimitsText(l EndUserLimits) string {
	if !l.Limited() {
		return "none"
	}
	text := limitsText(Limits{RequestsPerMinute: l.RequestsPerMinute, TokensPerDay: l.TokensPerDay, SpendPerDay: l.SpendPerDay})
	return text + " per end user (requests naming none are not limited by them)"
}

// tagsText is a key's default tags for `modelgate check`, sorted by key: "; tags: k=v, k2=v2".
func tagsText(tags map[string]string) string {
	if len(tags) == 0 {
		return ""
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := "; tags: "
	for i, k := range keys {
		if i > 0 {
			out += ", "
		}
		out += strconv.Quote(k) + "=" + strconv.Quote(tags[k])
	}
	return out
}
