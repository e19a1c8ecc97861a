package sidecar

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSidecarID: an accepted id is one plain path segment before and after any decoding.
func FuzzSidecarID(f *testing.F) {
	for _, s := range []string{"run_123", "..%2F..%2Finstance%2Flist", "a/b", "%2e%2e", "a;jsessionid=1", "a\x00", strings.Repeat("a", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if !ValidID(id) {
			return
		}
		if len(id) == 0 || len(id) > maxIDLen {
			t.Fatalf("accepted id of length %d", len(id))
		}
		if url.PathEscape(id) != id {
			t.Fatalf("accepted id %q changes when escaped", id)
		}
		if dec, err := url.PathUnescape(id); err != nil || dec != id {
			t.Fatalf("accepted id %q changes when decoded", id)
		}
		if id == "." || id == ".." || strings.ContainsAny(id, "./\\%;?#") {
			t.Fatalf("accepted id %q can leave its segment", id)
		}
	})
}

// FuzzSidecarQuery: the validators never panic, and what they pass upstream is exactly the
// allowed parameters, each once, with values that re-validate.
func FuzzSidecarQuery(f *testing.F) {
	for _, s := range []string{"run_id=abc", "run_id=abc&run_id=def", "run_id=..%2F..", "status=running&page=2&page_size=100",
		"page=0", "page=01", "page=+1", "page_size=101", "status=running;x", "%zz", "x=1", "page=99999999999999999999", "run_id=%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if q, perr := modelRunInfoQuery(raw); perr == nil {
			if len(q) != 1 || len(q["run_id"]) != 1 || !ValidID(q.Get("run_id")) {
				t.Fatalf("info query %q passed as %v", raw, q)
			}
			if again, perr := modelRunInfoQuery(q.Encode()); perr != nil || again.Encode() != q.Encode() {
				t.Fatalf("info query %q does not survive its own encoding", raw)
			}
		} else if perr.msg == "" || !utf8.ValidString(perr.msg) || len(perr.msg) > 200 {
			t.Fatalf("bad error message %q", perr.msg)
		}
		q, perr := modelRunListQuery(raw)
		if perr != nil {
			if perr.msg == "" || !utf8.ValidString(perr.msg) || len(perr.msg) > 200 {
				t.Fatalf("bad error message %q", perr.msg)
			}
			return
		}
		for name, vs := range q {
			if len(vs) != 1 {
				t.Fatalf("%s passed %d times", name, len(vs))
			}
			switch name {
			case "status":
				if !modelRunStatuses[vs[0]] {
					t.Fatalf("status %q passed", vs[0])
				}
			case "page", "page_size":
				n, err := strconv.Atoi(vs[0])
				if err != nil || n < 1 || n > maxPage || (name == "page_size" && n > 100) || strconv.Itoa(n) != vs[0] {
					t.Fatalf("%s=%q passed", name, vs[0])
				}
			default:
				t.Fatalf("unknown parameter %q passed", name)
			}
		}
		if again, perr := modelRunListQuery(q.Encode()); perr != nil || again.Encode() != q.Encode() {
			t.Fatalf("list query %q does not survive its own encoding", raw)
		}
	})
}

// FuzzSidecarUploadFields: upload form fields and file names that pass are safe to forward.
func FuzzSidecarUploadFields(f *testing.F) {
	for _, s := range [][2]string{{"media_type", "image"}, {"ttl_hours", "24"}, {"ttl_hours", "-1"}, {"purpose", "temp_input"},
		{"file", "../../etc/passwd"}, {"file", "a\x00b\r\n.png"}, {"file", ".."}, {"file", "C:\\x\\..\\y.txt"}, {"file", "\xff\xfe"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, name, value string) {
		if perr := validateUploadField(name, value); perr == nil {
			switch name {
			case "media_type":
				if !mediaTypes[value] {
					t.Fatalf("media_type %q passed", value)
				}
			case "purpose":
				if value != "temp_input" {
					t.Fatalf("purpose %q passed", value)
				}
			case "ttl_hours":
				if n, err := strconv.Atoi(value); err != nil || n < 1 || n > maxTTLHours {
					t.Fatalf("ttl_hours %q passed", value)
				}
			}
		}
		clean := cleanFilename(value)
		switch {
		case clean == "" || clean == "." || clean == "..":
			t.Fatalf("cleanFilename(%q) = %q", value, clean)
		case len(clean) > 255 || !utf8.ValidString(clean):
			t.Fatalf("cleanFilename(%q) is too long or not UTF-8", value)
		case strings.ContainsAny(clean, "/\\\x00\r\n\x7f"):
			t.Fatalf("cleanFilename(%q) = %q keeps a separator or control byte", value, clean)
		}
		if cleanFilename(clean) != clean {
			t.Fatalf("cleanFilename is not idempotent on %q", value)
		}
	})
}
