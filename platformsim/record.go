package platformsim

import (
	"bytes"
	"io"
	"net/http"
)

// Recorded is one request as the platform received it.
type Recorded struct {
	Method   string
	Path     string // escaped path as sent (RawPath when the client set one)
	RawQuery string
	Header   http.Header
	Body     []byte // nil for uploads, which are counted, never kept
	BodySize int64  // bytes of body read (uploads: the whole multipart body)

	// Uploads only: the multipart form field names in order (the file part included as
	// "file") and the size of the file part.
	FormFields []string
	FileSize   int64
}

// Request is another name for Recorded.
type Request = Recorded

// maxJSONBody bounds what the sim reads of a JSON request; beyond it the gateway answers 413.
const maxJSONBody = 32 << 20

// Requests returns a copy of everything received since New or the last Reset; callers may
// change it freely.
func (s *Sim) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Recorded, len(s.records))
	for i, r := range s.records {
		r.Header = r.Header.Clone()
		r.Body = bytes.Clone(r.Body)
		r.FormFields = append([]string(nil), r.FormFields...)
		out[i] = r
	}
	return out
}

// Reset clears records, scripts, totals and cancellations. Options, id counters and uploaded
// assets stay, so ids never repeat within one Sim.
func (s *Sim) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = nil
	s.scripts = map[string][]Reply{}
	s.modelScripts = nil
	s.totals = map[string]Totals{}
	s.billed = map[string]Totals{}
	s.cancellations = nil
}

func newRecord(r *http.Request) Recorded {
	return Recorded{
		Method:   r.Method,
		Path:     r.URL.EscapedPath(),
		RawQuery: r.URL.RawQuery,
		Header:   r.Header.Clone(),
	}
}

func (s *Sim) addRecord(rec Recorded) {
	if s.opts.Minimal {
		return
	}
	s.mu.Lock()
	s.records = append(s.records, rec)
	s.mu.Unlock()
}

// recordRequest reads r's body (up to maxJSONBody+1 bytes) and records the request.
// tooLarge reports a body over the limit.
func (s *Sim) recordRequest(r *http.Request) (body []byte, tooLarge bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxJSONBody+1))
	tooLarge = len(body) > maxJSONBody
	if s.opts.Minimal {
		return body, tooLarge
	}
	rec := newRecord(r)
	rec.BodySize = int64(len(body))
	if err == nil && !tooLarge {
		rec.Body = body
	}
	s.addRecord(rec)
	return body, tooLarge
}
