package proxy

import (
	"github.com/tidwall/gjson"

	"modelgate/reqlog"
	"modelgate/routing"
	"modelgate/upstream"
)

// noteFallback tells the health window and the metrics that a call for asked moved to the
// fallback served after failure f (issue 45).
func (s *Server) noteFallback(asked, served string, f *upstream.Failure) {
	reason := fallbackReason(f)
	s.window.Fallback(asked, served, reason, s.now())
	if s.hooks.Fallback != nil {
		s.hooks.Fallback(asked, served, reason)
	}
}

// fallbackReason names the failure a call fell back from, one of reqlog's Fallback* words.
func fallbackReason(f *upstream.Failure) string {
	switch {
	case f.Kind == upstream.KindBreakerOpen:
		return reqlog.FallbackBreakerOpen
	case f.Kind == upstream.KindFirstTokenTimeout:
		return reqlog.FallbackFirstTokenTimeout
	case f.Status == 400 && gjson.GetBytes(f.Body, "error.code").Str == routing.ContextLengthCode:
		return reqlog.FallbackContextLength
	case f.Status == 429:
		return reqlog.FallbackStatus429
	case f.Kind == "timeout":
		return reqlog.FallbackTimeout
	case f.Kind == "status_5xx":
		return reqlog.FallbackStatus5xx
	case f.Status == 502 || f.Status == 504:
		return reqlog.FallbackUnreachable
	}
	return reqlog.FallbackOther
}
