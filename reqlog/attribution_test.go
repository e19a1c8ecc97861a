package reqlog

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseTagsHeader(t *testing.T) {
	many := strings.Repeat("k=v,", MaxTags) + "k17=v"
	var sixteen []string
	for i := range MaxTags {
		sixteen = append(sixteen, "k"+string(rune('a'+i))+"=v")
	}
	cases := []struct {
		name, h string
		want    []Tag
		bad     string // a part of the error message; "" = accepted
	}{
		{"empty", "", nil, ""},
		{"spaces only", "   ", nil, ""},
		{"one", "feature=search", []Tag{{"feature", "search"}}, ""},
		{"two with spaces", " feature = search , customer=acme ", []Tag{{"feature", "search"}, {"customer", "acme"}}, ""},
		{"empty value", "feature=", []Tag{{"feature", ""}}, ""},
		{"equals in value", "q=a=b", []Tag{{"q", "a=b"}}, ""},
		{"unicode value", "city=Zürich", []Tag{{"city", "Zürich"}}, ""},
		{"sixteen", strings.Join(sixteen, ","), nil, ""},
		{"no equals", "feature", nil, "key=value"},
		{"empty pair", "a=b,,c=d", nil, "key=value"},
		{"trailing comma", "a=b,", nil, "key=value"},
		{"empty key", "=v", nil, "empty"},
		{"duplicate", "a=1,a=2", nil, "twice"},
		{"control", "a=b\x01", nil, "control"},
		{"seventeen", many, nil, "at most 16"},
		{"long key", strings.Repeat("k", MaxTagKeyChars+1) + "=v", nil, "at most 64"},
		{"long value", "k=" + strings.Repeat("é", MaxTagValueChars+1), nil, "at most 512"},
		{"longest value", "k=" + strings.Repeat("é", MaxTagValueChars), []Tag{{"k", strings.Repeat("é", MaxTagValueChars)}}, ""},
		{"bad utf8", "k=\xff", nil, "UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTagsHeader(tc.h)
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("ParseTagsHeader(%q) = %v, %v; want an error naming %q", tc.h, got, err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTagsHeader(%q): %v", tc.h, err)
			}
			if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseTagsHeader(%q) = %v, want %v", tc.h, got, tc.want)
			}
		})
	}
}

func TestSelectTags(t *testing.T) {
	allow := []string{"customer", "experiment", "feature"} // sorted, as config keeps it
	cases := []struct {
		name         string
		allow        []string
		header, body []Tag
		defaults     map[string]string
		want         []Tag
	}{
		{"no allow-list records none", nil, []Tag{{"feature", "a"}}, nil, nil, nil},
		{"header only", allow, []Tag{{"feature", "a"}}, nil, nil, []Tag{{"feature", "a"}}},
		{"dropped when not allowed", allow, []Tag{{"team", "x"}, {"feature", "a"}}, []Tag{{"other", "y"}}, nil, []Tag{{"feature", "a"}}},
		{"header over body over default", allow,
			[]Tag{{"feature", "h"}},
			[]Tag{{"feature", "b"}, {"customer", "b"}},
			map[string]string{"feature": "d", "customer": "d", "experiment": "d"},
			[]Tag{{"customer", "b"}, {"experiment", "d"}, {"feature", "h"}}},
		{"defaults alone", allow, nil, nil, map[string]string{"feature": "search"}, []Tag{{"feature", "search"}}},
		{"values made labels", allow, []Tag{{"customer", "a/b c"}}, nil, nil, []Tag{{"customer", "a%2Fb%20c"}}},
		{"empty value kept", allow, []Tag{{"customer", ""}}, nil, nil, []Tag{{"customer", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := SelectTags(tc.allow, tc.header, tc.body, tc.defaults)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("SelectTags = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLabel(t *testing.T) {
	long := strings.Repeat("u", 300)
	cases := []struct{ in, want string }{
		{"user-42", "user-42"},
		{"alice+tag@example.com", "alice+tag@example.com"},
		{"team/key", "team%2Fkey"},
		{"100%", "100%25"},
		{"a b", "a%20b"},
		{"é", "%C3%A9"},
		{"", ""},
	}
	for _, tc := range cases {
		if got := Label(tc.in); got != tc.want {
			t.Errorf("Label(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	a, b := Label(long), Label(long+"x")
	if len(a) != MaxLabelLen || len(b) != MaxLabelLen || a == b {
		t.Fatalf("long labels: %q (%d) and %q (%d): want %d bytes each, distinct", a, len(a), b, len(b), MaxLabelLen)
	}
	if !strings.HasPrefix(a, strings.Repeat("u", MaxLabelLen-labelHashLen)+"~") {
		t.Fatalf("long label %q keeps no head", a)
	}
	if got := Label(strings.Repeat("/", 100)); len(got) != MaxLabelLen || strings.Contains(got, "/") {
		t.Fatalf("escaped long label %q (%d bytes)", got, len(got))
	}
	if got := Label(strings.Repeat("/", 42)); got != strings.Repeat("%2F", 42) {
		t.Fatalf("a label that fits escaped is not cut: %q", got)
	}
}

// FuzzParseTagsHeader: any header either parses to bounded, distinct, control-free tags or
// is refused; the labels made of them are bounded and hold no '/'.
func FuzzParseTagsHeader(f *testing.F) {
	for _, s := range []string{"", "a=b", "feature=search,customer=acme", "a=b,,", "=", "a=1,a=2", "k=\x00", "x=é/ü%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tags, err := ParseTagsHeader(h)
		if err != nil {
			if tags != nil {
				t.Fatal("tags beside an error")
			}
			return
		}
		if len(tags) > MaxTags {
			t.Fatalf("%d tags", len(tags))
		}
		seen := map[string]bool{}
		for _, tg := range tags {
			if tg.Key == "" || seen[tg.Key] || hasControl(tg.Key) || hasControl(tg.Value) {
				t.Fatalf("bad tag %q", tg)
			}
			seen[tg.Key] = true
			if utf8.RuneCountInString(tg.Key) > MaxTagKeyChars || utf8.RuneCountInString(tg.Value) > MaxTagValueChars {
				t.Fatalf("tag past the bounds: %q", tg)
			}
			l := Label(tg.Value)
			if len(l) > MaxLabelLen || strings.ContainsAny(l, "/ ,") {
				t.Fatalf("label %q of %q", l, tg.Value)
			}
		}
	})
}
