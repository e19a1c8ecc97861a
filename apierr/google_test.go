package apierr

import (
	"net/url"
	"testing"
)

func TestCutQueryKey(t *testing.T) {
	for _, c := range []struct {
		raw, key, rest string
		found          bool
	}{
		{"", "", "", false},
		{"alt=sse", "", "alt=sse", false},
		{"monkey=1", "", "monkey=1", false},
		{"key=abc", "abc", "", true},
		{"alt=sse&key=abc", "abc", "alt=sse", true},
		{"key=a&key=b&x=1", "a", "x=1", true},
		{"%6bey=abc&alt=sse", "abc", "alt=sse", true}, // key, escaped
		{"key=a%26b", "a&b", "", true},
		{"alt=%zz&key=abc", "", "", true}, // a bad escape: nothing of the query is kept
		{"a=1;key=2", "", "", true},
	} {
		key, rest, found := CutQueryKey(c.raw)
		if key != c.key || rest != c.rest || found != c.found {
			t.Errorf("CutQueryKey(%q) = %q, %q, %v; want %q, %q, %v", c.raw, key, rest, found, c.key, c.rest, c.found)
		}
	}
}

// A query the client sent loses its key whatever it holds: what is left parses without a
// key parameter, and the key taken is the one url.ParseQuery reads. (It found ?%6bey=, an
// escaped key that a check for "key" in the raw query let through.)
func FuzzCutQueryKey(f *testing.F) {
	for _, s := range []string{"", "alt=sse", "key=abc", "alt=sse&key=abc", "key=a&key=b&x=1", "key=%zz&alt=sse", "KEY=x", "key", "a=1;key=2", "%6bey=x", "key=a%26b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		key, rest, found := CutQueryKey(raw)
		if !found && rest != raw {
			t.Fatalf("%q changed without a key: %q", raw, rest)
		}
		left, err := url.ParseQuery(rest)
		if err != nil && found {
			t.Fatalf("%q left %q, which does not parse: %v", raw, rest, err)
		}
		if _, ok := left[googleKeyParam]; ok {
			t.Fatalf("%q left a key in %q", raw, rest)
		}
		if q, err := url.ParseQuery(raw); err == nil && q.Get(googleKeyParam) != key {
			t.Fatalf("%q: took %q, want %q", raw, key, q.Get(googleKeyParam))
		}
	})
}
