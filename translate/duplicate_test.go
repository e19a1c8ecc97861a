package translate

import (
	"strings"
	"testing"
)

// A top-level field modelgate reads, sent twice, is refused with the field named, on chat
// and on Messages (and count_tokens) alike; fields it does not read are left alone.
func TestDuplicateFieldsRefused(t *testing.T) {
	chat := func(extra string) string {
		return `{"model":"m","messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	tests := []struct {
		name, body, param string
		messages          bool
	}{
		{"chat_model", chat(`,"model":"forbidden"`), "model", false},
		{"chat_model_escaped", chat(`,"\u006dodel":"forbidden"`), "model", false},
		{"chat_max_tokens", chat(`,"max_tokens":1,"max_tokens":100000`), "max_tokens", false},
		{"chat_max_completion_tokens", chat(`,"max_completion_tokens":1,"max_completion_tokens":9`), "max_completion_tokens", false},
		{"chat_stream", chat(`,"stream":false,"stream":true`), "stream", false},
		{"chat_store", chat(`,"store":false,"store":true`), "store", false},
		{"chat_messages", chat(`,"messages":[]`), "messages", false},
		{"chat_copied_user", chat(`,"user":"a","user":"b"`), "user", false},
		{"messages_model", messagesBody(`,"model":"forbidden"`), "model", true},
		{"messages_max_tokens", messagesBody(`,"max_tokens":100000`), "max_tokens", true},
		{"messages_stream", messagesBody(`,"stream":false,"stream":true`), "stream", true},
		{"messages_system", messagesBody(`,"system":"a","system":"b"`), "system", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errs []error
			if tt.messages {
				_, e1 := ParseMessages([]byte(tt.body))
				_, e2 := ParseMessagesCount([]byte(tt.body))
				errs = append(errs, e1, e2)
			} else {
				_, e := ParseChat([]byte(tt.body))
				errs = append(errs, e)
			}
			for _, err := range errs {
				e, ok := err.(*Error)
				if !ok || e.HTTPStatus() != 400 || e.Code != CodeDuplicateField || e.Param != tt.param || !strings.Contains(e.Message, `"`+tt.param+`"`) {
					t.Errorf("error %v", err)
				}
			}
		})
	}
	// A field modelgate does not read is not judged: chat forwards one copy of it.
	r, err := ParseChat([]byte(chat(`,"seed":1,"seed":2`)))
	if err != nil {
		t.Fatal(err)
	}
	up, err := r.ToResponses("up", RequestOptions{})
	if err != nil || strings.Count(string(up), `"seed"`) != 1 {
		t.Errorf("upstream body %s, %v", up, err)
	}
}
