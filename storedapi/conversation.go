package storedapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"modelgate/apierr"
	"modelgate/stored"
	"modelgate/translate"
)

// Ask is what a Responses request asks of stored responses, read from its fields by Asked:
// whether to keep its answer, the response it continues, and its own input.
type Ask struct {
	Keep      bool
	Continued bool   // previous_response_id was given ("" included: it names no response)
	Prev      string // previous_response_id
	InputRaw  string // the request's own input, raw JSON
	Model     string // client-facing
}

// Asked reads what the request asks of stored responses, refusing a store or
// previous_response_id of the wrong type (then it has answered the client). It keeps plain
// values only: the parsed fields stay in the check's frame.
func Asked(c *gin.Context, f *translate.ResponsesFields) (Ask, bool) {
	t := Ask{Keep: true, InputRaw: f.Input.Raw, Model: f.Model.Str}
	switch {
	case !f.Store.Exists() || f.Store.Type == gjson.Null:
	case f.Store.IsBool():
		t.Keep = f.Store.Bool()
	default:
		apierr.Abort(c, http.StatusBadRequest, apierr.TypeInvalidRequest, "invalid_type", "store", "Invalid type for 'store': expected a boolean.")
		return t, false
	}
	switch {
	case !f.Previous.Exists() || f.Previous.Type == gjson.Null:
	case f.Previous.Type == gjson.String:
		t.Prev, t.Continued = f.Previous.Str, true
	default:
		apierr.Abort(c, http.StatusBadRequest, apierr.TypeInvalidRequest, "invalid_type", "previous_response_id", "Invalid type for 'previous_response_id': expected a string.")
		return t, false
	}
	return t, true
}

// Expand replaces a previous_response_id by the conversation it names: the earlier turns'
// items, oldest first, then the new input. The conversation is read from k under owner
// who, and held whole, so it is bounded like a body (maxBody). It returns the body to send
// and this turn's own input items, to keep with its answer (when t.Keep). A refusal has
// answered the client; nothing went upstream.
func (s *Service) Expand(c *gin.Context, k *stored.Keeper, who string, body []byte, t Ask, maxBody int64) ([]byte, []byte, bool) {
	if t.Keep && k.Full() {
		// The store refuses writes and the memory that holds its records meanwhile is
		// full: this answer's id could not be kept, so the call is refused before it
		// costs anything.
		s.storeFull(c, k.RetryEvery())
		return nil, nil, false
	}
	turnInput, err := stored.TurnInput(t.InputRaw)
	if err != nil {
		apierr.Abort(c, http.StatusBadRequest, apierr.TypeInvalidRequest, "invalid_type", "input", "Invalid type for 'input': expected a string or an array.")
		return nil, nil, false
	}
	if !t.Continued {
		return body, turnInput, true
	}
	prev := t.Prev
	ctx, cancel := context.WithTimeout(c.Request.Context(), StoreTimeout)
	chain, err := k.Chain(ctx, who, prev, maxBody)
	cancel()
	switch {
	case errors.Is(err, stored.ErrTooLarge):
		apierr.Abort(c, http.StatusBadRequest, apierr.TypeInvalidRequest, "context_length_exceeded", "previous_response_id",
			"The conversation of response '"+apierr.SanitizePath(prev)+"' is larger than "+apierr.FormatBytes(maxBody)+" and cannot be sent whole; start a new one.")
		return nil, nil, false
	case errors.Is(err, stored.ErrNotFound), errors.Is(err, stored.ErrBrokenChain):
		msg := "Previous response with id '" + apierr.SanitizePath(prev) + "' not found."
		if errors.Is(err, stored.ErrBrokenChain) {
			msg = "Previous response with id '" + apierr.SanitizePath(prev) + "' cannot be continued: an earlier response of its conversation has expired or was deleted."
		}
		apierr.Abort(c, http.StatusBadRequest, apierr.TypeInvalidRequest, "previous_response_not_found", "previous_response_id", msg)
		return nil, nil, false
	case err != nil:
		s.Unavailable(c, err)
		return nil, nil, false
	case stored.Unfinished(chain[len(chain)-1].Status) && s.stillRunning(c, k, who, chain[len(chain)-1]):
		apierr.Abort(c, http.StatusBadRequest, apierr.TypeInvalidRequest, "invalid_request", "previous_response_id",
			"Previous response with id '"+apierr.SanitizePath(prev)+"' is not finished yet; wait until it is completed.")
		return nil, nil, false
	}
	body, err = sjson.SetRawBytes(body, "input", stored.ExpandedInput(chain, turnInput))
	if err == nil {
		body, err = DeleteAll(body, "previous_response_id")
	}
	if err != nil {
		apierr.Abort(c, http.StatusBadRequest, apierr.TypeInvalidRequest, "invalid_json", "", "The request body could not be prepared.")
		return nil, nil, false
	}
	return body, turnInput, true
}

// stillRunning reports whether an unfinished background response is still being run (one
// whose runner is gone is marked failed here, and can be continued).
func (s *Service) stillRunning(c *gin.Context, k *stored.Keeper, who string, r *stored.Record) bool {
	ctx, cancel := context.WithTimeout(c.Request.Context(), StoreTimeout)
	defer cancel()
	return stored.Unfinished(s.CheckOrphan(ctx, k, who, r).Status)
}

// DeleteAll removes every top-level occurrence of key (a duplicated key included).
func DeleteAll(body []byte, key string) ([]byte, error) {
	var err error
	for gjson.GetBytes(body, key).Exists() {
		if body, err = sjson.DeleteBytes(body, key); err != nil {
			return nil, err
		}
	}
	return body, nil
}

// storeFull refuses a call whose response could not be kept: 503 with Retry-After, in the
// route's shape.
func (s *Service) storeFull(c *gin.Context, retry time.Duration) {
	apierr.Record(c).UpstreamErr = "store"
	c.Header("Retry-After", strconv.Itoa(max(int((retry+time.Second-1)/time.Second), storeFullRetryAfter)))
	apierr.Abort(c, http.StatusServiceUnavailable, apierr.TypeServer, "store_unavailable", "store",
		"modelgate cannot keep responses right now (its record store refuses writes); try again shortly, or send store: false.")
}

// storeFullRetryAfter is the least Retry-After of a call refused while the store refuses
// writes, in seconds: a disk that filled or a Redis that went down is seldom back within
// one retry of the held records.
const storeFullRetryAfter = 5
