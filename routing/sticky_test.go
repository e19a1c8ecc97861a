package routing

import "testing"

// A sticky value is the first set of the keys a dialect reads; a Responses conversation
// without an id is placed by its first user input item, or its input when that is a string.
func TestStickyKeys(t *testing.T) {
	user := `{"role":"user","content":"first"}`
	for _, tc := range []struct {
		name string
		got  Sticky
		want Sticky
	}{
		{"first_set", First(StringKey(""), StringKey("u"), StringKey("v")), StringKey("u")},
		{"none_set", First(StringKey(""), Sticky{}), Sticky{}},
		{"input_items", FirstInputKey([]byte(`{"input":[{"role":"system","content":"s"},` + user + `]}`)), Sticky{Hash: Key(user), OK: true}},
		{"input_string", FirstInputKey([]byte(`{"input":"hello"}`)), StringKey("hello")},
		{"no_user_item", FirstInputKey([]byte(`{"input":[{"role":"system","content":"s"}]}`)), Sticky{}},
		{"no_input", FirstInputKey([]byte(`{"model":"m"}`)), Sticky{}},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, tc.got, tc.want)
		}
	}
}
