package translate

import (
	"strings"
	"testing"
)

// TestIdentityReadByTheParse: what each dialect's parse reads of who asks and in which
// conversation.
func TestIdentityReadByTheParse(t *testing.T) {
	first := `{"role":"user","content":"first"}`
	long := strings.Repeat("é", MaxIdentityLen) // 2 bytes each: twice the bound
	odd := "x" + long                           // the bound falls inside a character
	cases := []struct {
		name    string
		parse   func([]byte) (Identity, error)
		body    string
		want    Identity
		firstOf string // the raw message that marks the conversation; "" for none
	}{
		{"chat all fields", chatIdentity, `{"model":"m","user":"u","safety_identifier":"s","prompt_cache_key":"p","messages":[{"role":"system","content":"sys"},` + first + `,{"role":"user","content":"later"}]}`,
			Identity{User: "u", SafetyIdentifier: "s", PromptCacheKey: "p"}, first},
		{"chat none", chatIdentity, `{"model":"m","messages":[{"role":"developer","content":"d"}]}`, Identity{}, ""},
		{"chat escaped user", chatIdentity, `{"model":"m","user":"a\u0062c","messages":[` + first + `]}`, Identity{User: "abc"}, first},
		{"chat long user cut", chatIdentity, `{"model":"m","user":"` + long + `","messages":[` + first + `]}`, Identity{User: long[:MaxIdentityLen]}, first},
		{"chat cut at a character", chatIdentity, `{"model":"m","user":"` + odd + `","messages":[` + first + `]}`, Identity{User: odd[:MaxIdentityLen-1]}, first},
		{"messages user_id", messagesIdentity, `{"model":"m","max_tokens":9,"metadata":{"user_id":"u-7"},"messages":[` + first + `]}`, Identity{User: "u-7"}, first},
		{"messages no metadata", messagesIdentity, `{"model":"m","max_tokens":9,"system":"s","messages":[` + first + `]}`, Identity{}, first},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.parse([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if c.firstOf != "" {
				c.want.FirstUser = Mark(c.firstOf) | 1
			}
			if got != c.want {
				t.Fatalf("identity %+v, want %+v", got, c.want)
			}
		})
	}
}

// A conversation keeps its mark turn after turn: the first user message is resent unchanged
// while the history after it grows.
func TestConversationMarkStaysAcrossTurns(t *testing.T) {
	turn1 := `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"plan a trip"}]}`
	turn2 := `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"plan a trip"},{"role":"assistant","content":"where to?"},{"role":"user","content":"Lisbon"}]}`
	other := `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"fix my code"}]}`
	a, _ := chatIdentity([]byte(turn1))
	b, _ := chatIdentity([]byte(turn2))
	c, _ := chatIdentity([]byte(other))
	if a.FirstUser == 0 || a.FirstUser != b.FirstUser || a.FirstUser == c.FirstUser {
		t.Fatalf("marks %x %x %x: want the first two equal and the third different", a.FirstUser, b.FirstUser, c.FirstUser)
	}
}

func chatIdentity(body []byte) (Identity, error) {
	r, err := ParseChat(body)
	if err != nil {
		return Identity{}, err
	}
	return r.Identity, nil
}

func messagesIdentity(body []byte) (Identity, error) {
	r, err := ParseMessages(body)
	if err != nil {
		return Identity{}, err
	}
	return r.Identity, nil
}

// BenchmarkIdentity is what reading the identity adds to a parse of typicalChat: the copy of
// its user and the mark of its first user message.
func BenchmarkIdentity(b *testing.B) {
	r, err := ParseChat(typicalChat)
	if err != nil {
		b.Fatal(err)
	}
	first := `{"role":"user","content":"` + strings.Repeat("how do I rotate a key? ", 8) + `"}`
	b.ReportAllocs()
	for b.Loop() {
		var id Identity
		id.set("user", r.Identity.User)
		var w bodyWriter
		w.markFirstUser(first)
		id.FirstUser = w.firstUser
	}
}

// The end user is `user`, else `safety_identifier`, on both readings of a request.
func TestEndUser(t *testing.T) {
	for _, tc := range []struct{ user, safety, want string }{
		{"u", "s", "u"},
		{"", "s", "s"},
		{"", "", ""},
	} {
		id := Identity{User: tc.user, SafetyIdentifier: tc.safety}
		f := ResponsesFields{User: tc.user, Safety: tc.safety}
		if id.EndUser() != tc.want || f.EndUser() != tc.want {
			t.Errorf("%+v: %q and %q, want %q", tc, id.EndUser(), f.EndUser(), tc.want)
		}
	}
}
