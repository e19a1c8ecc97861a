package sidecar

import (
	"strings"
	"testing"
)

func TestValidID(t *testing.T) {
	cases := []struct {
		name string
		id   string
		want bool
	}{
		{"plain", "asset_01H-xyz", true},
		{"max_length", strings.Repeat("a", maxIDLen), true},
		{"empty", "", false},
		{"too_long", strings.Repeat("a", maxIDLen+1), false},
		{"dot_dot", "..", false},
		{"slash", "a/b", false},
		{"backslash", `a\b`, false},
		{"percent", "a%2Fb", false},
		{"semicolon", "a;jsessionid=x", false},
		{"nul", "a\x00", false},
		{"space", "a b", false},
		{"non_ascii", "é", false},
		{"question", "a?b", false},
		{"hash", "a#b", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidID(tc.id); got != tc.want {
				t.Errorf("ValidID(%q) = %v, want %v", tc.id, got, tc.want)
			}
		})
	}
}

func TestModelRunListQuery(t *testing.T) {
	cases := []struct {
		name, raw, want string
		ok              bool
	}{
		{"empty", "", "", true},
		{"all", "status=completed&page=2&page_size=100", "page=2&page_size=100&status=completed", true},
		{"page_one", "page=1", "page=1", true},
		{"page_zero", "page=0", "", false},
		{"page_negative", "page=-1", "", false},
		{"page_plus", "page=%2B1", "", false},
		{"page_leading_zero", "page=01", "", false},
		{"page_exponent", "page=1e3", "", false},
		{"page_huge", "page=99999999999999999999", "", false},
		{"page_size_zero", "page_size=0", "", false},
		{"page_size_101", "page_size=101", "", false},
		{"status_bogus", "status=bogus", "", false},
		{"status_case", "status=Completed", "", false},
		{"repeated", "status=completed&status=failed", "", false},
		{"unknown", "foo=bar", "", false},
		{"semicolon", "page=1;page_size=5", "", false},
		{"bad_escape", "page=%zz", "", false},
		{"empty_value", "status=", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, perr := modelRunListQuery(tc.raw)
			if (perr == nil) != tc.ok {
				t.Fatalf("ok = %v, want %v (err %v)", perr == nil, tc.ok, perr)
			}
			if tc.ok && q.Encode() != tc.want {
				t.Errorf("query %q, want %q", q.Encode(), tc.want)
			}
		})
	}
}

func TestModelRunInfoQuery(t *testing.T) {
	cases := []struct {
		name, raw string
		ok        bool
	}{
		{"valid", "run_id=run_123", true},
		{"missing", "", false},
		{"empty", "run_id=", false},
		{"traversal", "run_id=..%2F..%2Finstance%2Flist", false},
		{"double_encoded", "run_id=..%252Finstance", false},
		{"repeated", "run_id=a&run_id=b", false},
		{"extra", "run_id=a&x=1", false},
		{"nul", "run_id=a%00", false},
		{"long", "run_id=" + strings.Repeat("a", 10<<10), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, perr := modelRunInfoQuery(tc.raw)
			if (perr == nil) != tc.ok {
				t.Fatalf("ok = %v, want %v (err %v)", perr == nil, tc.ok, perr)
			}
			if tc.ok && len(q) != 1 {
				t.Errorf("rebuilt query %v", q)
			}
		})
	}
}

func TestValidateUploadField(t *testing.T) {
	cases := []struct {
		name, field, value string
		ok                 bool
	}{
		{"media_image", "media_type", "image", true},
		{"media_file", "media_type", "file", true},
		{"media_bogus", "media_type", "document", false},
		{"media_empty", "media_type", "", false},
		{"purpose_ok", "purpose", "temp_input", true},
		{"purpose_other", "purpose", "persistent", false},
		{"ttl_one", "ttl_hours", "1", true},
		{"ttl_48", "ttl_hours", "48", true},
		{"ttl_zero", "ttl_hours", "0", false},
		{"ttl_negative", "ttl_hours", "-5", false},
		{"ttl_fraction", "ttl_hours", "1.5", false},
		{"ttl_text", "ttl_hours", "two", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if perr := validateUploadField(tc.field, tc.value); (perr == nil) != tc.ok {
				t.Errorf("validate(%s=%q) ok = %v, want %v", tc.field, tc.value, perr == nil, tc.ok)
			}
		})
	}
}

func TestCleanFilename(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"plain", "photo.png", "photo.png"},
		{"unix_path", "../../etc/passwd", "passwd"},
		{"windows_path", `C:\Users\x\photo.png`, "photo.png"},
		{"control", "a\r\nb.txt", "ab.txt"},
		{"empty", "", "upload"},
		{"dots", "..", "upload"},
		{"long", strings.Repeat("é", 200), strings.Repeat("é", 127)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := cleanFilename(tc.in); got != tc.want {
				t.Errorf("cleanFilename(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
