package journal

import (
	"strconv"
	"unicode/utf8"
)

// appendJSON writes e as the JSON Decode reads, without reflection: it is written on every
// admitted call's path, where encoding/json's reflection cost more than a microsecond and
// three allocations a call. The field names are those of Entry's tags; FuzzDecode checks
// that what it writes reads back as the same entry.
func (e *Entry) appendJSON(b []byte) []byte {
	b = append(b, `{"rid":`...)
	b = appendString(b, e.RequestID)
	b = append(b, `,"route":`...)
	b = appendString(b, e.Route)
	b = appendField(b, "team", e.Team)
	b = appendField(b, "key", e.Key)
	b = append(b, `,"model":`...)
	b = appendString(b, e.Model)
	b = appendField(b, "upstream_model", e.UpstreamModel)
	if e.Stream {
		b = append(b, `,"stream":true`...)
	}
	b = appendField(b, "end_user", e.EndUser)
	b = appendField(b, "tags", e.Tags)
	if e.InputReserved != 0 {
		b = append(b, `,"input_reserved":`...)
		b = strconv.AppendInt(b, e.InputReserved, 10)
	}
	if len(e.SpendScopes) > 0 {
		b = append(b, `,"spend":[`...)
		for i, s := range e.SpendScopes {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		b = append(b, ']')
	}
	b = appendField(b, "end_user_spend", e.EndUserSpend)
	b = append(b, `,"started_ms":`...)
	b = strconv.AppendInt(b, e.StartedMs, 10)
	t := &e.Ticket
	b = append(b, `,"ticket":{"id":`...)
	b = appendString(b, t.ID)
	b = appendField(b, "lease", t.Lease)
	b = append(b, `,"scopes":[`...)
	for i, sc := range t.Scopes {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendString(b, sc.ID)
		if sc.TokensPerMinute != 0 {
			b = append(b, `,"tpm":`...)
			b = strconv.AppendInt(b, sc.TokensPerMinute, 10)
		}
		b = append(b, '}')
	}
	b = append(b, `],"tokens":`...)
	b = strconv.AppendInt(b, t.Tokens, 10)
	b = append(b, `,"input":`...)
	b = strconv.AppendInt(b, t.Input, 10)
	b = append(b, `,"day":`...)
	b = strconv.AppendInt(b, t.Day, 10)
	for _, f := range [...]struct {
		name string
		set  bool
	}{{"charged", t.Charged}, {"counted", t.Counted}, {"unsure", t.Unsure}} {
		if f.set {
			b = append(b, `,"`...)
			b = append(b, f.name...)
			b = append(b, `":true`...)
		}
	}
	return append(b, "}}"...)
}

// appendField writes ,"name":"value" when value is not empty (omitempty).
func appendField(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	return appendString(b, value)
}

// appendString writes s as a JSON string: quotes, backslashes and control characters
// escaped, bytes that are not UTF-8 written as U+FFFD (as encoding/json does).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	// Ids, names and scopes are plain ASCII: copied whole, once the scan finds nothing to
	// escape (the common case, and one copy instead of an append per byte).
	plain := 0
	for plain < len(s) {
		c := s[plain]
		if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			break
		}
		plain++
	}
	b = append(b, s[:plain]...)
	for i := plain; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
