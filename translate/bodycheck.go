package translate

import (
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// A client's body is judged more strictly than what the platform sends. Two readers may
// disagree about a body that gjson accepts, and a gateway that checks one reading and
// forwards bytes the platform reads another way lets a caller past its checks:
//
//   - Case. A platform that decodes JSON as Go's encoding/json does matches field names
//     without regard to case (and folds 'ſ' to 's' and the Kelvin sign to 'k'), and keeps
//     the last match. {"model":"allowed","Model":"forbidden"} passed the allow-list with
//     the first and ran the second. So a top-level key that is not a field modelgate knows
//     but folds to one is refused, naming it. No client library sends one.
//   - Encoding. JSON is UTF-8 (RFC 8259). A string holding invalid UTF-8 was forwarded raw,
//     for each reader downstream to repair, refuse or misread in its own way.
//
// Both are found in the one validating pass every client body already gets (the case of a
// key is looked at only when it holds an upper-case letter, a non-ASCII byte or an escape,
// so the common body pays a byte loop over its top-level keys), and the UTF-8 check runs
// over the body once it is known to be JSON: outside strings valid JSON is ASCII, so the
// body is valid UTF-8 exactly when its strings are. Nested objects are not judged: their
// keys are the caller's own data (metadata, schemas, tool arguments) as often as fields.

// More verdicts of CheckClientBody; CheckJSON never gives them.
const (
	JSONNotUTF8   JSONCheck = iota + JSONTooDeep + 1 // valid JSON whose strings are not all UTF-8
	JSONFieldCase                                    // a top-level key folds to a known field
)

// CheckClientBody judges a client's request body (or WebSocket message): CheckJSON's
// verdict, then JSONNotUTF8, then JSONFieldCase with the first top-level key, decoded, that
// differs from a field modelgate knows (KnownField) only in case.
func CheckClientBody(body []byte) (check JSONCheck, key string) {
	var ok bool
	i := skipSpace(body, 0)
	if i < len(body) && body[i] == '{' {
		i, key, ok = topObject(body, i+1)
	} else {
		i, ok = validValue(body, i, 0)
	}
	switch {
	case i == tooDeep:
		return JSONTooDeep, ""
	case !ok || skipSpace(body, i) != len(body):
		return JSONInvalid, ""
	case !utf8.Valid(body):
		return JSONNotUTF8, ""
	case key != "":
		return JSONFieldCase, key
	}
	return JSONValid, ""
}

// ClientBodyError is the refusal for a verdict of CheckClientBody other than JSONValid,
// in the words every route uses (each renders it in its own error shape).
func ClientBodyError(check JSONCheck, key string) *Error {
	switch check {
	case JSONValid:
		return nil
	case JSONNotUTF8:
		return badRequest("invalid_json", "", "The request body holds a string that is not valid UTF-8: JSON text must be UTF-8.")
	case JSONFieldCase:
		return FieldCaseError(key)
	case JSONTooDeep:
		return badRequest("invalid_json", "", "The request body nests objects and arrays more than "+strconv.Itoa(MaxEventDepth)+" levels deep.")
	}
	return badRequest("invalid_json", "", "The request body is not valid JSON.")
}

// CodeFieldCase is the error code of a key that differs from a known field only in case:
// OpenAI's own for a field it does not know, which such a key is.
const CodeFieldCase = "unknown_parameter"

// FieldCaseError refuses the top-level key, which folds to a field modelgate knows.
func FieldCaseError(key string) *Error {
	name := capString(key, 64)
	folded, _ := foldKey(key)
	return badRequest(CodeFieldCase, name, "Unknown parameter "+strconv.Quote(name)+": field names are case-sensitive; did you mean "+strconv.Quote(folded)+"?")
}

// topObject reads the top-level object from just past its brace, as validObject does, and
// returns the first key that is a case variant of a known field ("" if none).
func topObject(data []byte, i int) (next int, variant string, ok bool) {
	if i = skipSpace(data, i); i < len(data) && data[i] == '}' {
		return i + 1, "", true
	}
	for {
		if i == len(data) || data[i] != '"' {
			return i, variant, false
		}
		start := i
		var esc bool
		if i, esc, ok = validString(data, i+1); !ok {
			return i, variant, false
		}
		if variant == "" {
			variant = caseVariant(data[start:i], esc)
		}
		if i = skipSpace(data, i); i == len(data) || data[i] != ':' {
			return i, variant, false
		}
		if i, ok = validValue(data, i+1, 1); !ok {
			return i, variant, false
		}
		var done bool
		if i, done, ok = nextMember(data, i, '}'); !ok || done {
			return i, variant, ok
		}
		i = skipSpace(data, i)
	}
}

// maxKnownKey is at least the length of the longest KnownField; a \uXXXX escape spells one
// byte of a key in six, so a raw key longer than six times it cannot fold to a known field.
const maxKnownKey = 24

// caseVariant is the decoded key whose JSON string (quotes included) is quoted, when it is
// not a known field but folds to one; "" otherwise. Keys of lower-case ASCII without an
// escape are their own fold, known or not, and are passed by the byte loop alone.
func caseVariant(quoted []byte, esc bool) string {
	if !esc {
		plain := true
		for _, c := range quoted {
			if c >= 'A' && c <= 'Z' || c >= utf8.RuneSelf {
				plain = false
				break
			}
		}
		if plain {
			return ""
		}
	}
	if len(quoted) > 6*maxKnownKey+2 {
		return ""
	}
	key := string(quoted[1 : len(quoted)-1])
	if esc {
		key = gjson.Parse(string(quoted)).Str
	}
	if folded, changed := foldKey(key); changed && KnownField(folded) {
		return key
	}
	return ""
}

// foldKey spells key as a known field would be spelled if key folds to one: ASCII letters
// lower-cased, and the few non-ASCII letters whose case folding reaches an ASCII letter
// replaced by it. changed reports a difference; a key with any other non-ASCII character
// comes back "", as no known field holds one.
func foldKey(key string) (folded string, changed bool) {
	b := make([]byte, 0, len(key))
	for _, r := range key {
		switch {
		case r >= 'A' && r <= 'Z':
			b, changed = append(b, byte(r)+'a'-'A'), true
		case r < utf8.RuneSelf:
			b = append(b, byte(r))
		default:
			c, ok := asciiFold(r)
			if !ok {
				return "", false
			}
			b, changed = append(b, c), true
		}
	}
	return string(b), changed
}

// asciiFold is the lower-case ASCII letter the non-ASCII rune r matches under any of the
// case mappings a JSON decoder may apply to field names (simple folding, as bytes.EqualFold;
// upper of lower, as encoding/json's own fold; lower of upper), if there is one: 'ſ' (U+017F)
// is 's', the Kelvin sign (U+212A) 'k', 'İ' (U+0130) and 'ı' (U+0131) 'i'.
func asciiFold(r rune) (byte, bool) {
	for _, c := range [...]rune{unicode.ToLower(r), unicode.ToUpper(r), unicode.ToUpper(unicode.ToLower(r)), unicode.ToLower(unicode.ToUpper(r))} {
		if c < utf8.RuneSelf {
			return asciiLower(c)
		}
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return asciiLower(f)
		}
	}
	return 0, false
}

func asciiLower(c rune) (byte, bool) {
	switch {
	case c >= 'A' && c <= 'Z':
		return byte(c) + 'a' - 'A', true
	case c >= 'a' && c <= 'z':
		return byte(c), true
	}
	return 0, false
}

// CheckClientObject is CheckClientBody for a body that must be a JSON object (a Responses
// body, a WebSocket client message): anything else is JSONInvalid.
func CheckClientObject(body []byte) (JSONCheck, string) {
	if i := skipSpace(body, 0); i == len(body) || body[i] != '{' {
		return JSONInvalid, ""
	}
	return CheckClientBody(body)
}
