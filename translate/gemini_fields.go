package translate

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// Google's JSON reader (protobuf's JSON mapping) takes each field under its lowerCamelCase
// name, as the REST reference spells it, or under the snake_case name of the proto field, as
// Google's own curl examples do ("system_instruction", "inline_data"), and refuses any other
// name. The Gemini dialect reads every object it translates the same way: an unknown member
// is refused in Google's words rather than dropped, and a field given twice, in one spelling
// or both, is refused as every other route refuses a repeated field. Since the translated
// body is written fresh from the fields read, a member the gateway did not read can never
// reach the platform under a meaning it did not check (the case-variant rule of bodycheck.go
// comes for free: "Contents" is no field of a request).

// geminiObject reads obj's members into dst: the member named names[i], in either spelling,
// fills dst[i]. at is obj's path in Google's notation ("" for the request itself), for the
// errors. A null member counts as given, and reads as absent (present).
func geminiObject(obj gjson.Result, at string, names []string, dst []*gjson.Result) *Error {
	var err *Error
	obj.ForEach(func(k, v gjson.Result) bool {
		i := geminiFieldIndex(k.Str, names)
		switch {
		case i < 0:
			err = unknownGeminiField(k.Str, at)
		case dst[i].Exists():
			err = DuplicateField(geminiPath(at, names[i]))
		default:
			*dst[i] = v
		}
		return err == nil
	})
	return err
}

// geminiMessage reads v, which must be the object what names ("a Blob object"), into dst as
// geminiObject does.
func geminiMessage(v gjson.Result, at, what string, names []string, dst []*gjson.Result) *Error {
	if !v.IsObject() {
		return geminiType(at, what)
	}
	return geminiObject(v, at, names, dst)
}

// geminiFieldIndex is the index in names of the field key spells, -1 if none.
func geminiFieldIndex(key string, names []string) int {
	for i, n := range names {
		if key == n || snakeOf(key, n) {
			return i
		}
	}
	return -1
}

// snakeOf reports whether key is camel (a lowerCamelCase name) in snake_case: every
// upper-case letter of camel written as '_' and its lower case. It allocates nothing.
func snakeOf(key, camel string) bool {
	j := 0
	for i := 0; i < len(camel); i++ {
		c := camel[i]
		if c >= 'A' && c <= 'Z' {
			if j+1 >= len(key) || key[j] != '_' || key[j+1] != c+'a'-'A' {
				return false
			}
			j += 2
			continue
		}
		if j >= len(key) || key[j] != c {
			return false
		}
		j++
	}
	return j == len(key)
}

// present reports a member given with a value other than null.
func present(v gjson.Result) bool { return v.Exists() && v.Type != gjson.Null }

// geminiPath joins a path and a field name.
func geminiPath(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

// geminiIndex is the path of element i of the list at path.
func geminiIndex(at string, i int) string { return at + "[" + strconv.Itoa(i) + "]" }

// unknownGeminiField refuses a member no Gemini object of that place has, as Google words it.
func unknownGeminiField(key, at string) *Error {
	name := capString(key, 64)
	msg := "Invalid JSON payload received. Unknown name " + strconv.Quote(name)
	if at != "" {
		msg += " at '" + at + "'"
	}
	return badRequest("unknown_parameter", geminiPath(at, name), msg+": Cannot find field.")
}

// geminiInvalid is a 400 about the value at path.
func geminiInvalid(path, msg string) *Error {
	return badRequest(codeInvalidValue, path, "Invalid value at '"+path+"': "+msg)
}

// geminiType refuses the value at path, which is not what expected names.
func geminiType(path, expected string) *Error {
	return badRequest(codeInvalidType, path, "Invalid value at '"+path+"': expected "+expected+".")
}

// geminiString reads an optional string member.
func geminiString(v gjson.Result, path string) (string, *Error) {
	switch {
	case !present(v):
		return "", nil
	case v.Type != gjson.String:
		return "", geminiType(path, "a string")
	}
	return v.Str, nil
}

// geminiInt reads an optional integer member: a JSON number or, as protobuf writes 64-bit
// integers, a string of digits. ok is false when it is absent.
func geminiInt(v gjson.Result, path string) (n int64, ok bool, err *Error) {
	if !present(v) {
		return 0, false, nil
	}
	if v.Type == gjson.String {
		n, perr := strconv.ParseInt(v.Str, 10, 64)
		if perr != nil {
			return 0, false, geminiType(path, "an integer")
		}
		return n, true, nil
	}
	if n, ok := intValue(v); ok {
		return n, true, nil
	}
	return 0, false, geminiType(path, "an integer")
}
