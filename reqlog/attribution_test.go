package reqlog

import (
	"net/http"
	"reflect"
	"slices"
	"sort"
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
			got, err := ParseTagsHeader(nil, tc.h)
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
			// Appended after a caller's tags, the same; a key the caller holds is no duplicate.
			before := []Tag{{"a", "caller"}}
			got, err = ParseTagsHeader(before, tc.h)
			if err != nil || len(got) < 1 || got[0] != before[0] || tc.want != nil && !reflect.DeepEqual(got[1:], tc.want) {
				t.Fatalf("ParseTagsHeader(%v, %q) = %v, %v", before, tc.h, got, err)
			}
		})
	}
}

// TestParseTagsHeaderAllocs: given room, the parse allocates nothing (the request path
// passes an array on its stack).
func TestParseTagsHeaderAllocs(t *testing.T) {
	var room [MaxTags]Tag
	n := testing.AllocsPerRun(100, func() {
		if tags, err := ParseTagsHeader(room[:0], " feature=search, customer = acme,experiment=b "); err != nil || len(tags) != 3 {
			t.Fatalf("%v %v", tags, err)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func TestAttribution(t *testing.T) {
	allow := []string{"customer", "experiment", "feature"} // sorted, as config keeps it
	cases := []struct {
		name         string
		user         string
		allow        []string
		header, body []Tag
		defaults     map[string]string
		wantUser     string
		wantTags     string
	}{
		{"nothing", "", allow, nil, nil, nil, "", ""},
		{"no allow-list records none", "", nil, []Tag{{"feature", "a"}}, nil, nil, "", ""},
		{"user alone", "user-42", nil, []Tag{{"feature", "a"}}, nil, nil, "user-42", ""},
		{"user made a label", "team/a b", allow, nil, nil, nil, "team%2Fa%20b", ""},
		{"header only", "", allow, []Tag{{"feature", "a"}}, nil, nil, "", "feature:a"},
		{"dropped when not allowed", "", allow, []Tag{{"team", "x"}, {"feature", "a"}}, []Tag{{"other", "y"}}, nil, "", "feature:a"},
		{"header over body over default", "u", allow,
			[]Tag{{"feature", "h"}},
			[]Tag{{"feature", "b"}, {"customer", "b"}},
			map[string]string{"feature": "d", "customer": "d", "experiment": "d"},
			"u", "customer:b,experiment:d,feature:h"},
		{"defaults alone", "", allow, nil, nil, map[string]string{"feature": "search"}, "", "feature:search"},
		{"values made labels", "", allow, []Tag{{"customer", "a/b c"}, {"feature", "x=y,z"}}, nil, nil, "", "customer:a%2Fb%20c,feature:x%3Dy%2Cz"},
		{"empty value kept", "", allow, []Tag{{"customer", ""}}, nil, nil, "", "customer:"},
		{"long values cut", strings.Repeat("u", 300), allow, []Tag{{"customer", strings.Repeat("c", 300)}}, nil, nil,
			labelOf(strings.Repeat("u", 300)), "customer:" + labelOf(strings.Repeat("c", 300))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			user, tags := Attribution(tc.user, tc.allow, tc.header, tc.body, tc.defaults)
			if user != tc.wantUser || tags != tc.wantTags {
				t.Fatalf("Attribution = %q %q, want %q %q", user, tags, tc.wantUser, tc.wantTags)
			}
		})
	}
}

func TestCutTag(t *testing.T) {
	var got []Tag
	for tag, rest, ok := CutTag("customer:a%2Fb,experiment:,feature:x:y"); ok; tag, rest, ok = CutTag(rest) {
		got = append(got, tag)
	}
	want := []Tag{{"customer", "a%2Fb"}, {"experiment", ""}, {"feature", "x:y"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("CutTag read %v, want %v", got, want)
	}
	if _, _, ok := CutTag(""); ok {
		t.Fatal("a tag read from nothing")
	}
}

// TestAttributionAllocs: the end user and every tag share one allocation.
func TestAttributionAllocs(t *testing.T) {
	header := []Tag{{"experiment", "b"}}
	body := []Tag{{"feature", "search"}, {"customer", "acme/eu"}}
	allow := []string{"customer", "experiment", "feature"}
	n := testing.AllocsPerRun(100, func() {
		if user, tags := Attribution("end-user-4711", allow, header, body, nil); user == "" || tags == "" {
			t.Fatal("nothing recorded")
		}
	})
	if n != 1 {
		t.Fatalf("%v allocations, want 1", n)
	}
}

// labelOf is the label of s, as Attribution records it.
func labelOf(s string) string { return string(appendLabel(nil, s)) }

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
		if got := labelOf(tc.in); got != tc.want {
			t.Errorf("label of %q = %q, want %q", tc.in, got, tc.want)
		}
	}
	a, b := labelOf(long), labelOf(long+"x")
	if len(a) != MaxLabelLen || len(b) != MaxLabelLen || a == b {
		t.Fatalf("long labels: %q (%d) and %q (%d): want %d bytes each, distinct", a, len(a), b, len(b), MaxLabelLen)
	}
	if !strings.HasPrefix(a, strings.Repeat("u", MaxLabelLen-labelHashLen)+"~") {
		t.Fatalf("long label %q keeps no head", a)
	}
	if got := labelOf(strings.Repeat("/", 100)); len(got) != MaxLabelLen || strings.Contains(got, "/") {
		t.Fatalf("escaped long label %q (%d bytes)", got, len(got))
	}
	if got := labelOf(strings.Repeat("/", 42)); got != strings.Repeat("%2F", 42) {
		t.Fatalf("a label that fits escaped is not cut: %q", got)
	}
}

// FuzzParseTagsHeader: any header either parses to bounded, distinct, control-free tags or
// is refused; the labels made of them are bounded and hold no '/'.
func FuzzParseTagsHeader(f *testing.F) {
	for _, s := range []string{"", "a=b", "feature=search,customer=acme", "a=b,,", "=", "a=1,a=2", "k=\x00", "x=é/ü%", ":=", "a:b=c,d=e:f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tags, err := ParseTagsHeader(nil, h)
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
			l := labelOf(tg.Value)
			if len(l) > MaxLabelLen || strings.ContainsAny(l, "/ ,=") {
				t.Fatalf("label %q of %q", l, tg.Value)
			}
		}
		// What Attribution writes of the tags reads back as their labels, with every key a
		// usage.tag_keys entry could be allowed (config refuses any other, so a header's key
		// with a ':' in it is never allowed, only dropped).
		allow := make([]string, 0, len(tags))
		for _, tg := range tags {
			if couldBeTagKey(tg.Key) {
				allow = append(allow, tg.Key)
			}
		}
		sort.Strings(allow)
		_, text := Attribution("", allow, tags, nil, nil)
		var back []Tag
		for tg, rest, ok := CutTag(text); ok; tg, rest, ok = CutTag(rest) {
			back = append(back, tg)
		}
		if len(back) != len(allow) {
			t.Fatalf("%q read back as %v, want %d tags", text, back, len(allow))
		}
		for _, tg := range back {
			if v, _ := lookupTag(tags, tg.Key); labelOf(v) != tg.Value {
				t.Fatalf("%q read back %q=%q, want the label of %q", text, tg.Key, tg.Value, v)
			}
		}
	})
}

// couldBeTagKey is what config accepts in usage.tag_keys: 1-64 ASCII letters, digits, '_',
// '.' or '-'. Attribution is only ever given such keys.
func couldBeTagKey(k string) bool {
	if k == "" || len(k) > MaxTagKeyChars {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// Several lines of the tags header read as one list; no header names no tags.
func TestHeaderTags(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Header
		want []Tag
	}{
		{"none", http.Header{}, nil},
		{"one_line", http.Header{TagsHeader: {"a=1, b=2"}}, []Tag{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}}},
		{"two_lines", http.Header{TagsHeader: {"a=1", "b=2"}}, []Tag{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}}},
	} {
		got, err := HeaderTags(nil, tc.h)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := HeaderTags(nil, http.Header{TagsHeader: {"a=1", "a=2"}}); err == nil {
		t.Error("a key named on two lines was taken twice")
	}
}
