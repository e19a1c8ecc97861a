package translate

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// Duplicate keys. JSON leaves a repeated key's meaning to the reader: gjson takes the first,
// encoding/json and most platforms the last. A gateway that checks one copy and forwards
// another lets a caller pass the allow-list, the price and the reservation with a second
// "model" or "max_output_tokens". So every route refuses a request that repeats a top-level
// field modelgate reads, naming the field: no client library sends one, the check costs a
// comparison per field, and a refusal leaves no doubt about what was meant, which keeping
// "the first" or "the last" would. Fields modelgate does not read are not judged.

// CodeDuplicateField is the error code of a repeated field.
const CodeDuplicateField = "duplicate_parameter"

// DuplicateField is the refusal of a request that repeats the top-level field key.
func DuplicateField(key string) *Error {
	name := capString(key, 64)
	return badRequest(CodeDuplicateField, name, "The request repeats the field "+strconv.Quote(name)+": send each field once.")
}

// take stores the value v of the field k in dst, which must not hold one yet.
func take(dst *gjson.Result, k, v gjson.Result) *Error {
	if dst.Exists() {
		return DuplicateField(k.Str)
	}
	*dst = v
	return nil
}
