package platformsim

import (
	"encoding/json"

	"github.com/tidwall/gjson"
)

// valueForSchema builds a deterministic value that satisfies simple JSON schemas: objects with
// string, number, integer, boolean, array and nested object properties, enums and consts.
// Property order follows the schema, so the same schema always gives the same bytes.
func valueForSchema(schema gjson.Result, name string) any {
	if c := schema.Get("const"); c.Exists() {
		return c.Value()
	}
	if e := schema.Get("enum"); e.IsArray() && len(e.Array()) > 0 {
		return e.Array()[0].Value()
	}
	typ := schema.Get("type")
	t := typ.Str
	if typ.IsArray() { // e.g. ["string","null"]: the first non-null type
		for _, x := range typ.Array() {
			if x.Str != "null" {
				t = x.Str
				break
			}
		}
	}
	if t == "" {
		if alts := schema.Get("anyOf"); alts.IsArray() && len(alts.Array()) > 0 {
			return valueForSchema(alts.Array()[0], name)
		}
		if schema.Get("properties").Exists() {
			t = "object"
		}
	}
	switch t {
	case "object", "":
		obj := orderedObject{}
		schema.Get("properties").ForEach(func(k, v gjson.Result) bool {
			obj = append(obj, field{k.Str, valueForSchema(v, k.Str)})
			return true
		})
		return obj
	case "string":
		return "sim " + name
	case "integer":
		if m := schema.Get("minimum"); m.Exists() {
			return m.Int()
		}
		return 1
	case "number":
		if m := schema.Get("minimum"); m.Exists() {
			return m.Float()
		}
		return 1.5
	case "boolean":
		return true
	case "array":
		return []any{valueForSchema(schema.Get("items"), name)}
	case "null":
		return nil
	}
	return "sim " + name
}

type field struct {
	key   string
	value any
}

// orderedObject marshals as a JSON object keeping insertion order.
type orderedObject []field

func (o orderedObject) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, f := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(f.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}
