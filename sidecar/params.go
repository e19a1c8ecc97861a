package sidecar

import (
	"net/url"
	"strconv"

	"modelgate/reqlog"
)

// maxIDLen bounds run and asset ids. The platform's ids are far shorter; the bound only
// keeps hostile input out of logs and upstream URLs.
const maxIDLen = 128

// validID is the one pattern run and asset ids must match: letters, digits, '_' and '-'.
// No '.', '/', '\\', '%', ';' or control bytes can appear, so an id can never form a path
// segment other than itself, before or after any decoding.
func ValidID(id string) bool {
	if id == "" || len(id) > maxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		ch := id[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9', ch == '_', ch == '-':
		default:
			return false
		}
	}
	return true
}

// modelRunStatuses are the task states the platform lists by.
var modelRunStatuses = map[string]bool{
	"created": true, "queued": true, "running": true, "completed": true, "failed": true, "cancelled": true,
}

// paramError is a rejected query or form parameter; its text goes to the client.
type paramError struct{ msg string }

func (e *paramError) Error() string { return e.msg }

func badParam(name, want string) *paramError {
	return &paramError{msg: "invalid parameter " + printableName(name) + ": " + want}
}

// printableName quotes a caller-supplied parameter name in a message, short and printable.
func printableName(name string) string {
	if len(name) > 40 {
		name = name[:40] + "..."
	}
	return "'" + reqlog.Printable(name, 200) + "'"
}

// strictQuery parses a raw query and accepts only the allowed names, each at most once.
// Anything else is refused rather than dropped, so a caller never believes a filter was
// applied when it was not.
func strictQuery(raw string, allowed ...string) (map[string]string, *paramError) {
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return nil, &paramError{msg: "the query string could not be parsed"}
	}
	out := make(map[string]string, len(vals))
	for name, vs := range vals {
		known := false
		for _, a := range allowed {
			if name == a {
				known = true
				break
			}
		}
		switch {
		case !known:
			return nil, &paramError{msg: "unknown parameter " + printableName(name)}
		case len(vs) != 1:
			return nil, badParam(name, "given more than once")
		}
		out[name] = vs[0]
	}
	return out, nil
}

// boundedInt parses a plain decimal in [lo, hi]: no sign, no spaces, no leading zeros
// beyond a single "0", so the upstream sees exactly the number that was validated.
func boundedInt(s string, lo, hi int) (int, bool) {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, false
	}
	return n, true
}

// maxPage bounds page numbers; a page beyond it could only be empty.
const maxPage = 1_000_000

// modelRunInfoQuery validates GET model-runs/info and rebuilds its upstream query.
func modelRunInfoQuery(raw string) (url.Values, *paramError) {
	q, perr := strictQuery(raw, "run_id")
	if perr != nil {
		return nil, perr
	}
	id, ok := q["run_id"]
	if !ok || id == "" {
		return nil, &paramError{msg: "missing required parameter 'run_id'"}
	}
	if !ValidID(id) {
		return nil, badParam("run_id", "expected 1 to 128 letters, digits, '_' or '-'")
	}
	return url.Values{"run_id": {id}}, nil
}

// modelRunListQuery validates GET model-runs/list and rebuilds its upstream query.
// Absent parameters stay absent so the platform's defaults apply.
func modelRunListQuery(raw string) (url.Values, *paramError) {
	q, perr := strictQuery(raw, "status", "page", "page_size")
	if perr != nil {
		return nil, perr
	}
	out := url.Values{}
	if v, ok := q["status"]; ok {
		if !modelRunStatuses[v] {
			return nil, badParam("status", "expected one of created, queued, running, completed, failed, cancelled")
		}
		out.Set("status", v)
	}
	if v, ok := q["page"]; ok {
		n, ok := boundedInt(v, 1, maxPage)
		if !ok {
			return nil, badParam("page", "expected an integer from 1")
		}
		out.Set("page", strconv.Itoa(n))
	}
	if v, ok := q["page_size"]; ok {
		n, ok := boundedInt(v, 1, 100)
		if !ok {
			return nil, badParam("page_size", "expected an integer from 1 to 100")
		}
		out.Set("page_size", strconv.Itoa(n))
	}
	return out, nil
}
