package admin_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestIssueKeyWithTags: an issued key's default tags are checked like a config key's,
// persisted with it and shown in GET /admin/keys beside the config keys' own.
func TestIssueKeyWithTags(t *testing.T) {
	y := strings.Replace(testYAML, "        key: mg-alpha-config-key\n", "        key: mg-alpha-config-key\n        tags: {feature: search}\n", 1)
	dir := t.TempDir()
	r := startReplica(t, envOptions{yaml: y, dataDir: dir})
	cases := []struct {
		name   string
		tags   any
		status int
	}{
		{"two", map[string]string{"feature": "chat", "customer": "acme"}, 201},
		{"empty is none", map[string]string{}, 201},
		{"key too long", map[string]string{strings.Repeat("k", 65): "v"}, 400},
		{"value too long", map[string]string{"k": strings.Repeat("v", 513)}, 400},
		{"control character", map[string]string{"k": "a\nb"}, 400},
		{"seventeen", manyTags(17), 400},
		{"not an object", []string{"a"}, 400},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, _, b := r.do(t, "POST", "/admin/keys", adminKey, map[string]any{"team": "alpha", "name": fmt.Sprintf("t%d", i), "tags": c.tags})
			if status != c.status {
				t.Fatalf("%d %s, want %d", status, b, c.status)
			}
			if status == 400 && !strings.Contains(string(b), `"param":"tags"`) && !strings.Contains(string(b), "invalid_json") {
				t.Fatalf("refusal names no param: %s", b)
			}
		})
	}
	want := map[string]string{"alpha-cfg": `{"feature":"search"}`, "t0": `{"customer":"acme","feature":"chat"}`, "t1": "null", "beta-cfg": "null"}
	check := func(r *replica) {
		t.Helper()
		status, _, b := r.do(t, "GET", "/admin/keys", adminKey, nil)
		if status != 200 {
			t.Fatalf("list: %d %s", status, b)
		}
		var listed struct {
			Keys []struct {
				Name string
				Tags json.RawMessage
			}
		}
		if err := json.Unmarshal(b, &listed); err != nil {
			t.Fatal(err)
		}
		for _, k := range listed.Keys {
			if w, ok := want[k.Name]; ok && string(k.Tags) != w {
				t.Errorf("key %s: tags %s, want %s", k.Name, k.Tags, w)
			}
		}
	}
	check(r)
	r.stop()
	check(startReplica(t, envOptions{yaml: y, dataDir: dir})) // kept with the key
}

func manyTags(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = "v"
	}
	return m
}
