package translate

import (
	"strings"

	"github.com/tidwall/gjson"
)

// A JSON schema a Gemini client gives as is (responseJsonSchema, a declaration's
// parametersJsonSchema) goes to the platform as is, but for one thing: Google's backend reads
// the OpenAPI type names of its Schema in either case there too, and clients count on it (the
// Gemini CLI's model router asks for {"type":"OBJECT",...}), while a JSON Schema validator
// knows only the lower-case names. Those type names are lower-cased, everywhere a schema
// holds a type; values that are data (enum, const, default, examples) are copied untouched.

// geminiUpperTypes are the type names lower-cased, as they appear quoted in a schema.
var geminiUpperTypes = []string{`"STRING"`, `"NUMBER"`, `"INTEGER"`, `"BOOLEAN"`, `"ARRAY"`, `"OBJECT"`, `"NULL"`}

// appendJSONSchema appends the schema s (a JSON object) with its upper-case type names
// lower-cased. A schema that holds none, the usual case, is copied byte for byte.
func appendJSONSchema(b []byte, s gjson.Result) []byte {
	upper := false
	for _, t := range geminiUpperTypes {
		if strings.Contains(s.Raw, t) {
			upper = true
			break
		}
	}
	if !upper {
		return append(b, s.Raw...)
	}
	return appendSchemaValue(b, s, false)
}

// appendSchemaValue appends v, a schema or a part of one; named says v maps names to
// schemas (properties, $defs, ...), whose members are schemas whatever they are called. The
// body passed the nesting check, so the recursion is bounded.
func appendSchemaValue(b []byte, v gjson.Result, named bool) []byte {
	switch {
	case v.IsObject():
		return appendEach(b, v, '{', '}', func(b []byte, k, x gjson.Result) []byte {
			b = append(b, k.Raw...)
			b = append(b, ':')
			switch {
			case named:
				return appendSchemaValue(b, x, false)
			case k.Str == "type" && (x.Type == gjson.String || x.IsArray()):
				return appendSchemaType(b, x)
			case k.Str == "enum" || k.Str == "const" || k.Str == "default" || k.Str == "examples" || k.Str == "example":
				return append(b, x.Raw...)
			}
			return appendSchemaValue(b, x, schemaMaps(k.Str))
		})
	case v.IsArray():
		return appendEach(b, v, '[', ']', func(b []byte, _, x gjson.Result) []byte { return appendSchemaValue(b, x, false) })
	}
	return append(b, v.Raw...)
}

// appendEach appends v, an object or an array, between open and close: each member (key k)
// or item written by item, comma separated.
func appendEach(b []byte, v gjson.Result, open, close byte, item func(b []byte, k, x gjson.Result) []byte) []byte {
	b = append(b, open)
	n := 0
	v.ForEach(func(k, x gjson.Result) bool {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = item(b, k, x)
		return true
	})
	return append(b, close)
}

// schemaMaps reports a keyword whose value maps names to schemas.
func schemaMaps(key string) bool {
	switch key {
	case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
		return true
	}
	return false
}

// appendSchemaType appends a type: a name, or a list of names ("type": ["STRING", "NULL"]).
func appendSchemaType(b []byte, t gjson.Result) []byte {
	if t.IsArray() {
		return appendEach(b, t, '[', ']', func(b []byte, _, x gjson.Result) []byte { return appendSchemaType(b, x) })
	}
	if t.Type == gjson.String {
		for _, u := range geminiUpperTypes {
			if len(u) == len(t.Raw) && u == t.Raw {
				return append(b, strings.ToLower(t.Raw)...)
			}
		}
	}
	return append(b, t.Raw...)
}
