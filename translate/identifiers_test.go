package translate

import (
	"strings"
	"testing"
)

// A model name past MaxModelNameBytes is a 400 on model, on chat and Messages alike; one of
// exactly the bound is accepted.
func TestModelNameBounded(t *testing.T) {
	chat := func(m string) string { return `{"model":"` + m + `","messages":[{"role":"user","content":"hi"}]}` }
	msgs := func(m string) string {
		return `{"model":"` + m + `","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	}
	at, over := strings.Repeat("m", MaxModelNameBytes), strings.Repeat("m", MaxModelNameBytes+1)
	if _, err := ParseChat([]byte(chat(at))); err != nil {
		t.Errorf("chat at the bound: %v", err)
	}
	if _, err := ParseMessages([]byte(msgs(at))); err != nil {
		t.Errorf("messages at the bound: %v", err)
	}
	for _, huge := range []string{over, strings.Repeat("m", 8<<20)} {
		_, e1 := ParseChat([]byte(chat(huge)))
		_, e2 := ParseMessages([]byte(msgs(huge)))
		_, e3 := ParseMessagesCount([]byte(msgs(huge)))
		for _, err := range []error{e1, e2, e3} {
			e, ok := err.(*Error)
			if !ok || e.HTTPStatus() != 400 || e.Param != "model" || len(e.Message) > 200 {
				t.Errorf("a %d-byte model name: %v", len(huge), err)
			}
		}
	}
}
