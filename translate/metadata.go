package translate

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// OpenAI's bounds of a request's `metadata` object: at most MetadataMaxPairs members, each
// key at most MetadataMaxKeyChars characters, each string value at most
// MetadataMaxValueChars. modelgate reads request tags from it (issue 28) and refuses what
// OpenAI itself would, so its tags stay bounded and no request OpenAI takes is refused.
const (
	MetadataMaxPairs      = 16
	MetadataMaxKeyChars   = 64
	MetadataMaxValueChars = 512
)

// CheckMetadata refuses a metadata object past OpenAI's bounds (400, param "metadata").
// Anything but an object is not checked here: the route's own type check says what it
// makes of that. Values that are not strings are left alone (they are forwarded as before).
func CheckMetadata(m gjson.Result) *Error {
	if !m.IsObject() {
		return nil
	}
	var err *Error
	n := 0
	m.ForEach(func(k, v gjson.Result) bool {
		n++
		switch {
		case n > MetadataMaxPairs:
			err = badRequest(codeInvalidValue, "metadata", "Invalid 'metadata': at most "+strconv.Itoa(MetadataMaxPairs)+" key-value pairs are allowed.")
		case utf8.RuneCountInString(k.Str) > MetadataMaxKeyChars:
			err = badRequest(codeInvalidValue, "metadata", "Invalid 'metadata': keys may be at most "+strconv.Itoa(MetadataMaxKeyChars)+" characters long.")
		case v.Type == gjson.String && utf8.RuneCountInString(v.Str) > MetadataMaxValueChars:
			err = badRequest(codeInvalidValue, "metadata", "Invalid 'metadata': values may be at most "+strconv.Itoa(MetadataMaxValueChars)+" characters long.")
		}
		return err == nil
	})
	return err
}

// EachMetadataString calls fn with each member of the metadata object raw (a JSON object,
// or "") whose value is a string, until fn returns false. The strings are views of raw.
func EachMetadataString(raw string, fn func(key, value string) bool) {
	if raw == "" {
		return
	}
	gjson.Parse(raw).ForEach(func(k, v gjson.Result) bool {
		if v.Type != gjson.String {
			return true
		}
		return fn(k.Str, v.Str)
	})
}

// metadataCopy is the metadata object kept on an Identity: a copy, so holding it keeps no
// view of the body; "" when the request has none, or an empty one. Out of line and given a
// pointer, so the parse's frame, under which a request's messages are walked, stays as
// small as it was (the proxy's TestOpenStreamStack).
//
//go:noinline
func metadataCopy(m *gjson.Result) string {
	if !m.IsObject() || strings.TrimSpace(m.Raw[1:len(m.Raw)-1]) == "" {
		return ""
	}
	return strings.Clone(m.Raw)
}

// MetadataString is the string value of key in a metadata object (raw JSON, "" when none),
// copied out of it; "" when it has none.
func MetadataString(raw, key string) string {
	var v string
	EachMetadataString(raw, func(k, val string) bool {
		if k == key {
			v = strings.Clone(val)
			return false
		}
		return true
	})
	return v
}
