package config

import (
	"strings"
	"testing"
)

func TestUsageTagKeys(t *testing.T) {
	base := strings.Replace(pricedYAML, "usage_history: {retention: 720h}", "usage_history: {retention: 720h, distinct_values: 50}\nusage: {tag_keys: [feature, customer]}", 1)
	c := mustParse(t, []byte(base), "p.yaml", nil)
	if !c.Usage.RecordsTag("feature") || c.Usage.RecordsTag("experiment") || c.UsageHistory.DistinctValues != 50 {
		t.Fatalf("usage %+v history %+v", c.Usage, c.UsageHistory)
	}
	if s := c.Summary(); !strings.Contains(s, "usage tag keys recorded: feature, customer") || !strings.Contains(s, "naming at most 50 end users") {
		t.Fatalf("summary:\n%s", s)
	}
	if d := Default(); d.UsageHistory.DistinctValues != DefaultDistinctValues || !strings.Contains(d.Summary(), "usage tag keys recorded: none") {
		t.Fatalf("defaults %+v", d.UsageHistory)
	}
	for _, tc := range []struct{ name, to, want string }{
		{"slash", "usage: {tag_keys: [a/b]}", "usage.tag_keys"},
		{"colon", "usage: {tag_keys: [\"tag:x\"]}", "usage.tag_keys"},
		{"empty", "usage: {tag_keys: [\"\"]}", "usage.tag_keys"},
		{"twice", "usage: {tag_keys: [a, a]}", "listed twice"},
		{"too_many", "usage: {tag_keys: [a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q]}", "at most 16"},
		{"distinct_negative", "usage: {tag_keys: [a]}\nusage_history: {distinct_values: -1}", "usage_history.distinct_values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := strings.Replace(pricedYAML, "usage_history: {retention: 720h}", tc.to, 1)
			if _, err := Parse([]byte(y), "p.yaml", nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}
