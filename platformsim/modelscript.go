package platformsim

import (
	"net/http"

	"github.com/tidwall/gjson"
)

// SetModelScript scripts the next requests that name model (the platform's model name, as
// the body's "model" carries it): they get replies in order, ahead of any Enqueue'd reply,
// which they do not consume; once replies are used up the model answers as it always does.
// It is how a model is made to fail for fallback tests: 500s and 429s (Status), a stall
// before the first output event (Silence with AfterEvents 1: the stream opens, then waits),
// a context-window error (ContextLengthReply). Calling it again replaces the script; no
// replies clears it.
func (s *Sim) SetModelScript(model string, replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.modelScripts == nil {
		s.modelScripts = map[string][]Reply{}
	}
	if len(replies) == 0 {
		delete(s.modelScripts, model)
		return
	}
	s.modelScripts[model] = append([]Reply(nil), replies...)
}

// modelReply takes the next scripted reply of the model body names, if it has a script.
func (s *Sim) modelReply(body []byte) (Reply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.modelScripts) == 0 {
		return Reply{}, false
	}
	return pop(s.modelScripts, gjson.GetBytes(body, "model").Str)
}

// ContextLengthReply is the platform's answer to an input larger than the model's context
// window: a 400 whose code is context_length_exceeded, as the Responses API sends it.
func ContextLengthReply() Reply {
	return Reply{Status: http.StatusBadRequest, Header: map[string]string{"Content-Type": "application/json"},
		Body: []byte(`{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`)}
}
