package translate

import (
	"strings"

	"github.com/tidwall/gjson"
)

// Gemini's Schema, the OpenAPI 3.0 subset of responseSchema and a declaration's parameters,
// written as the JSON Schema the platform takes.

// geminiSchemaFields are a Schema's members, by their lowerCamelCase names; the index of one
// is its bit in schema's record of the members seen.
func geminiSchemaFields() []string {
	return []string{"type", "format", "title", "description", "nullable", "enum", "maxItems",
		"minItems", "properties", "required", "minProperties", "maxProperties", "minLength",
		"maxLength", "pattern", "example", "anyOf", "propertyOrdering", "default", "items",
		"minimum", "maximum"}
}

// schema writes a Schema as JSON Schema, member by member in the client's order: the
// upper-case type names in lower case, nullable as a type union with "null", 64-bit integers
// written as strings as numbers; propertyOrdering, example and nullable itself, which JSON
// Schema has no use for, are left out. Unknown members are refused, as Google refuses them.
// It recurses once per nested schema and keeps no table of the members, so a schema nested
// to the body's depth bound costs a small frame per level.
func (w *geminiWriter) schema(s gjson.Result, at string) *Error {
	if !s.IsObject() {
		return geminiType(at, "a Schema object")
	}
	names := geminiSchemaFields()
	nullable := false
	var seen uint32
	var err *Error
	s.ForEach(func(k, v gjson.Result) bool {
		i := geminiFieldIndex(k.Str, names)
		switch {
		case i < 0:
			err = unknownGeminiField(k.Str, at)
		case seen&(1<<i) != 0:
			err = DuplicateField(geminiPath(at, names[i]))
		case names[i] == "nullable":
			if present(v) && v.Type != gjson.True && v.Type != gjson.False {
				err = geminiType(at+".nullable", "a boolean")
			}
			nullable = v.Type == gjson.True
		}
		seen |= 1 << max(i, 0)
		return err == nil
	})
	if err != nil {
		return err
	}
	w.b = append(w.b, '{')
	start := len(w.b)
	s.ForEach(func(k, v gjson.Result) bool {
		if present(v) {
			err = w.schemaMember(names[geminiFieldIndex(k.Str, names)], v, at, start, nullable)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	w.b = append(w.b, '}')
	return nil
}

// schemaKey starts the member name of the schema object opened at start.
func (w *geminiWriter) schemaKey(start int, name string) {
	w.sep(start)
	w.b = append(w.b, '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, `":`...)
}

// schemaMember writes one member of a Schema, named name, whose value v is not null.
func (w *geminiWriter) schemaMember(name string, v gjson.Result, at string, start int, nullable bool) *Error {
	path := at + "." + name
	switch name {
	case "type":
		if v.Type != gjson.String || !geminiSchemaType(v.Str) {
			return geminiInvalid(path, "expected STRING, NUMBER, INTEGER, BOOLEAN, ARRAY, OBJECT or NULL.")
		}
		t := strings.ToLower(v.Str)
		if t == "type_unspecified" {
			return nil
		}
		w.schemaKey(start, name)
		if nullable && t != "null" {
			w.b = append(w.b, `["`...)
			w.b = append(w.b, t...)
			w.b = append(w.b, `","null"]`...)
			return nil
		}
		w.b = append(w.b, '"')
		w.b = append(w.b, t...)
		w.b = append(w.b, '"')
	case "format", "title", "description", "pattern":
		if v.Type != gjson.String {
			return geminiType(path, "a string")
		}
		w.schemaKey(start, name)
		w.b = append(w.b, v.Raw...)
	case "maxItems", "minItems", "minProperties", "maxProperties", "minLength", "maxLength":
		n, _, err := geminiInt(v, path)
		if err != nil {
			return err
		}
		w.schemaKey(start, name)
		w.b = appendInt(w.b, n)
	case "minimum", "maximum":
		if v.Type != gjson.Number {
			return geminiType(path, "a number")
		}
		w.schemaKey(start, name)
		w.b = append(w.b, v.Raw...)
	case "default":
		w.schemaKey(start, name)
		w.b = append(w.b, v.Raw...)
	case "enum", "required":
		ok := v.IsArray()
		each(v, func(_, e gjson.Result) bool {
			ok = e.Type == gjson.String
			return ok
		})
		if !ok {
			return geminiType(path, "a list of strings")
		}
		w.schemaKey(start, name)
		w.b = append(w.b, v.Raw...)
	case "properties":
		if !v.IsObject() {
			return geminiType(path, "a map of Schema")
		}
		w.schemaKey(start, name)
		w.b = append(w.b, '{')
		pstart := len(w.b)
		var err *Error
		v.ForEach(func(k, p gjson.Result) bool {
			w.sep(pstart)
			w.b = appendString(w.b, k.Str)
			w.b = append(w.b, ':')
			err = w.schema(p, path+"."+capString(k.Str, 64))
			return err == nil
		})
		if err != nil {
			return err
		}
		w.b = append(w.b, '}')
	case "items":
		w.schemaKey(start, name)
		return w.schema(v, path)
	case "anyOf":
		if !v.IsArray() {
			return geminiType(path, "a list of Schema")
		}
		w.schemaKey(start, name)
		w.b = append(w.b, '[')
		astart := len(w.b)
		if err := walk(v, func(i int, e gjson.Result) *Error {
			w.sep(astart)
			return w.schema(e, geminiIndex(path, i))
		}); err != nil {
			return err
		}
		w.b = append(w.b, ']')
	}
	// nullable was read before; example and propertyOrdering mean nothing to JSON Schema.
	return nil
}

// geminiSchemaType reports one of Gemini's Schema type names (Google takes them in either
// case, as its enum reader does).
func geminiSchemaType(t string) bool {
	switch strings.ToUpper(t) {
	case "TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL":
		return true
	}
	return false
}
