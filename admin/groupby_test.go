package admin

import (
	"net/url"
	"testing"

	"modelgate/config"
)

// FuzzParseGroupBy: any group_by either parses into fields the history knows and at most one
// split on an allow-listed tag key, or is refused with a message; it never panics.
func FuzzParseGroupBy(f *testing.F) {
	for _, s := range []string{"team,tag:feature", "user,model", "tag:", "tag:feature,tag:customer", "key,user", " team , user "} {
		f.Add(s)
	}
	usage := &config.Usage{TagKeys: []string{"feature", "customer"}}
	f.Fuzz(func(t *testing.T, s string) {
		g, msg := parseGroupBy(url.Values{"group_by": {s}}, usage)
		if msg != "" {
			return
		}
		for k := range g.fields {
			if k != "team" && k != "key" && k != "model" {
				t.Fatalf("%q kept field %q", s, k)
			}
		}
		if g.split != nil && (g.fields["key"] || g.split.TagKey != "" && !usage.RecordsTag(g.split.TagKey)) {
			t.Fatalf("%q: split %+v with %v", s, g.split, g.fields)
		}
	})
}
