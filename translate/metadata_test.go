package translate

import (
	"strconv"
	"strings"
	"testing"
)

func TestChatMetadataBounds(t *testing.T) {
	pairs := func(n int) string {
		var b []string
		for i := range n {
			b = append(b, `"k`+strconv.Itoa(i)+`":"v"`)
		}
		return "{" + strings.Join(b, ",") + "}"
	}
	cases := []struct {
		name, metadata string
		bad            bool
		kept           string // Identity.Metadata
	}{
		{"none", "", false, ""},
		{"null", "null", false, ""},
		{"empty", "{}", false, ""},
		{"two", `{"feature":"search","customer":"acme"}`, false, `{"feature":"search","customer":"acme"}`},
		{"sixteen", pairs(16), false, pairs(16)},
		{"seventeen", pairs(17), true, ""},
		{"key of 64", `{"` + strings.Repeat("é", 64) + `":"v"}`, false, `{"` + strings.Repeat("é", 64) + `":"v"}`},
		{"key of 65", `{"` + strings.Repeat("k", 65) + `":"v"}`, true, ""},
		{"value of 512", `{"k":"` + strings.Repeat("é", 512) + `"}`, false, `{"k":"` + strings.Repeat("é", 512) + `"}`},
		{"value of 513", `{"k":"` + strings.Repeat("v", 513) + `"}`, true, ""},
		{"number value left alone", `{"k":12}`, false, `{"k":12}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","messages":[{"role":"user","content":"hi"}]`
			if tc.metadata != "" {
				body += `,"metadata":` + tc.metadata
			}
			req, err := ParseChat([]byte(body + "}"))
			if tc.bad {
				var te *Error
				if err == nil || !errorAs(err, &te) || te.Status != 400 || te.Param != "metadata" {
					t.Fatalf("ParseChat: %v, want a 400 naming metadata", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.Identity.Metadata != tc.kept {
				t.Fatalf("Identity.Metadata = %q, want %q", req.Identity.Metadata, tc.kept)
			}
		})
	}
}

func errorAs(err error, te **Error) bool {
	e, ok := err.(*Error)
	*te = e
	return ok
}

func TestEachMetadataString(t *testing.T) {
	var got []string
	EachMetadataString(`{"a":"1","b":2,"c":"3"}`, func(k, v string) bool { got = append(got, k+"="+v); return true })
	if strings.Join(got, ",") != "a=1,c=3" {
		t.Fatalf("got %v", got)
	}
	EachMetadataString("", func(k, v string) bool { t.Fatal("called on none"); return false })
}
