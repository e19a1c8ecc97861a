package config

import (
	"regexp"
	"slices"
	"strings"
)

// Usage is the `usage` block: what of a request's attribution (issue 28) is recorded.
type Usage struct {
	// TagKeys is the allow-list of request tag keys recorded in the usage history; a tag
	// with any other key is dropped, so clients cannot grow the history's dimensions.
	TagKeys []string `yaml:"tag_keys"`
}

// DefaultDistinctValues and MaxDistinctValues bound usage_history.distinct_values.
const (
	DefaultDistinctValues = 1000
	MaxDistinctValues     = 100_000
)

// MaxTagKeys bounds usage.tag_keys: each key is a dimension of the history.
const MaxTagKeys = 16

// tagKeyRE is what a tag key may be: short, and nothing that needs quoting in a URL's
// group_by=tag:<key>, a CSV header or a store key.
var tagKeyRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// RecordsTag reports whether key is one of usage.tag_keys.
func (u *Usage) RecordsTag(key string) bool { return slices.Contains(u.TagKeys, key) }

func (u *Usage) tagKeysText() string {
	if len(u.TagKeys) == 0 {
		return "none"
	}
	return strings.Join(u.TagKeys, ", ")
}

func (v *validator) usage(u *Usage) {
	if len(u.TagKeys) > MaxTagKeys {
		v.fail("usage.tag_keys", "at most %d tag keys, got %d", MaxTagKeys, len(u.TagKeys))
	}
	for i, k := range u.TagKeys {
		switch {
		case !tagKeyRE.MatchString(k):
			v.fail("usage.tag_keys", "want 1-64 letters, digits, '_', '.' or '-' per key, got %q", k)
		case slices.Contains(u.TagKeys[:i], k):
			v.fail("usage.tag_keys", "%q is listed twice", k)
		}
	}
}
