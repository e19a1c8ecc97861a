package wsmode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// A response.create with generate: false prepares a chain without asking the model: the
// Codex CLI sends its whole prefix (instructions, tools, history) this way when it opens a
// connection, then sends each turn with only its new items. Nothing reaches the platform and
// no token is charged: the input is kept as a response of the connection, and the client gets
// response.created and response.completed with no output and no usage, as it expects (it
// falls back to HTTP when it gets anything else). It is still a request: Options.Prepares
// authenticates, counts and logs it first, or the client gets its refusal instead, so a
// client sending thousands a second meets its key's limits as it would with turns.

// preparedResponse is the response object of a prepared chain.
type preparedResponse struct {
	ID        string          `json:"id"`
	Object    string          `json:"object"`
	CreatedAt int64           `json:"created_at"`
	Status    string          `json:"status"`
	Model     string          `json:"model"`
	Output    json.RawMessage `json:"output"`
	Usage     preparedUsage   `json:"usage"`
}

type preparedUsage struct {
	InputTokens         int64          `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int64          `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int64          `json:"total_tokens"`
}

// preparedEvents are the two events that answer a prepare, and the response they name.
func preparedEvents(model string, now time.Time) (created, completed, response []byte) {
	r := preparedResponse{ID: newResponseID(), Object: "response", CreatedAt: now.Unix(), Status: "in_progress",
		Model: model, Output: json.RawMessage("[]"),
		Usage: preparedUsage{InputTokensDetails: map[string]int{"cached_tokens": 0}, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}}}
	created = event("response.created", 0, r)
	r.Status = "completed"
	completed = event("response.completed", 1, r)
	response, _ = json.Marshal(r)
	return created, completed, response
}

func event(typ string, seq int, r preparedResponse) []byte {
	b, _ := json.Marshal(struct {
		Type     string           `json:"type"`
		Sequence int              `json:"sequence_number"`
		Response preparedResponse `json:"response"`
	}{typ, seq, r})
	return b
}

// newResponseID is a response id of modelgate's own, for a prepared chain: "resp_" and 24
// random bytes in hex, the shape of the ids modelgate gives background responses
// (jobs.NewResponseID), so that no id tells which of the two made it.
func newResponseID() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return "resp_" + hex.EncodeToString(b[:])
}

// errNoStream stops an admission's answer that would stream: an admission never does.
var errNoStream = errors.New("wsmode: an admission answered with a stream")

// admitPrepare asks Options.Prepares whether the connection's key may have one more message
// served now. A refusal is sent as the error event its answer makes, with the answer's
// Retry-After and x-ratelimit-* headers, as a refused turn's is; then it reports false.
func (c *conn) admitPrepare(ctx context.Context, lane string) bool {
	if c.s.opts.Prepares == nil {
		return true
	}
	w := newTurnWriter(func([]byte) error { return errNoStream })
	c.s.opts.Prepares.ServeHTTP(w, turnRequest(ctx, nil, &c.who))
	if w.status == http.StatusNoContent {
		return true
	}
	// Whatever else it answered is a refusal, to become one error event; a success status
	// other than 204 (or a stream) is the handler's fault, not the client's.
	w.stream = false
	if w.status < http.StatusMultipleChoices {
		w.status = http.StatusInternalServerError
	}
	c.write(ctx, withLane(w.finish(), lane))
	return false
}
