package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decoder turns a yaml.Node tree into a Config by hand rather than with Node.Decode: it must
// reject unknown keys (Node.Decode has no KnownFields), expand ${VAR} inside scalars only, and
// report every problem with its line and key path.
type decoder struct {
	file   string
	getenv func(string) (string, bool)
	errs   []*Error
	// lines maps a key path to the line it appears on, so validation can point at the file.
	lines map[string]int
	// envVars maps a key path to the variables its value was built from, to explain an empty
	// value that came from a set-but-empty variable.
	envVars map[string][]string
	// failed holds the paths whose value could not be decoded, and the known key an unknown
	// one was probably meant to be: validation runs anyway (every problem in one pass), but
	// its complaints about these paths would only restate the decoding error.
	failed map[string]bool
	// unset lists each unset environment variable once, in the order met, with the lines
	// naming it: they are reported in one message, not one per reference.
	unset      []string
	unsetLines map[string][]int
	unsetPaths map[string][]string // key path to the unset variables its value names
}

func newDecoder(file string, getenv func(string) (string, bool)) *decoder {
	return &decoder{file: file, getenv: getenv, lines: map[string]int{}, envVars: map[string][]string{},
		failed: map[string]bool{}, unsetLines: map[string][]int{}, unsetPaths: map[string][]string{}}
}

var durationType = reflect.TypeFor[time.Duration]()

var byteSizeType = reflect.TypeFor[ByteSize]()

func (d *decoder) fail(line int, path, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
	d.failed[path] = true
}

// ChildPath is the path of key under parent, as errors and the audit log name config keys:
// "server.max_body_bytes".
func ChildPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// kindName describes a node for "want X, got Y" messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", unmaskRefs(n.Value))
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}

// value decodes n into v. A null leaves v at its zero value, like an absent key.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		// Aliases would let one node appear under several paths (and expand exponentially);
		// a config this small has no need for them.
		d.fail(n.Line, path, "YAML anchors and aliases are not supported")
		return
	}
	if tag := n.ShortTag(); tag == "!!binary" || (tag != "" && !strings.HasPrefix(tag, "!!")) {
		// Custom and binary tags would give the text a meaning this loader does not apply.
		d.fail(n.Line, path, "YAML tag %s is not supported", tag)
		return
	}
	if isNull(n) {
		return
	}
	t := v.Type()
	switch {
	case t.Kind() == reflect.Pointer:
		elem := reflect.New(t.Elem())
		d.value(n, elem.Elem(), path)
		v.Set(elem)
	case t.Kind() == reflect.Struct:
		d.mapping(n, v, path)
	case t.Kind() == reflect.Slice:
		d.sequence(n, v, path)
	case t.Kind() == reflect.Map:
		d.stringMap(n, v, path)
	default:
		d.scalar(n, v, path)
	}
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n.Line, path, "want a mapping of keys, got %s", kindName(n))
		return
	}
	fields := yamlFields(v.Type())
	d.eachKey(n, path, func(name, p string, k, val *yaml.Node) {
		idx, ok := fields[name]
		if !ok {
			hint, near, sure := suggestKey(name, fields)
			d.fail(k.Line, p, "unknown key%s", hint)
			if sure && !hasKey(n, near) {
				// The typo left the key it meant unset: "missing" complaints about it are the
				// same mistake.
				d.failed[ChildPath(path, near)] = true
			}
			return
		}
		d.lines[p] = k.Line
		d.value(val, v.Field(idx), p)
	})
}

// stringMap decodes a mapping of names to scalars (a key's default tags): the names are the
// user's own, so there is no list of known keys, but each appears once.
func (d *decoder) stringMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n.Line, path, "want a mapping of names to values, got %s", kindName(n))
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	d.eachKey(n, path, func(name, p string, k, val *yaml.Node) {
		d.lines[p] = k.Line
		elem := reflect.New(v.Type().Elem()).Elem()
		d.value(val, elem, p)
		m.SetMapIndex(reflect.ValueOf(name), elem)
	})
	v.Set(m)
}

// eachKey calls fn for each key of the mapping n that is a plain name met for the first
// time, with its path; a key that is not a scalar or comes twice is reported instead.
func (d *decoder) eachKey(n *yaml.Node, path string, fn func(name, p string, k, val *yaml.Node)) {
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.fail(k.Line, path, "keys must be plain names, got %s", kindName(k))
			continue
		}
		name := unmaskRefs(k.Value)
		p := ChildPath(path, name)
		if first, dup := seen[name]; dup {
			d.fail(k.Line, p, "duplicate key (first set on line %d)", first)
			continue
		}
		seen[name] = k.Line
		fn(name, p, k, val)
	}
}

func (d *decoder) sequence(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n.Line, path, "want a list, got %s", kindName(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		d.lines[p] = item.Line
		d.value(item, s.Index(i), p)
	}
	v.Set(s)
}

func (d *decoder) scalar(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n.Line, path, "want a single value, got %s", kindName(n))
		return
	}
	// Expansion happens on the scalar's text after parsing, so a variable's value can never
	// add keys, items or YAML syntax; it is always exactly one value.
	s, vars, unset, problems := expand(unmaskRefs(n.Value), d.getenv)
	for _, p := range problems {
		d.fail(n.Line, path, "%s", p)
	}
	for _, name := range unset {
		if _, seen := d.unsetLines[name]; !seen {
			d.unset = append(d.unset, name)
		}
		d.unsetLines[name] = append(d.unsetLines[name], n.Line)
		d.unsetPaths[path] = append(d.unsetPaths[path], name)
		d.failed[path] = true
	}
	if len(problems)+len(unset) > 0 {
		return
	}
	if len(vars) > 0 {
		d.envVars[path] = vars
	}
	t := v.Type()
	switch {
	case t == durationType:
		dur, err := time.ParseDuration(s)
		if err != nil {
			d.fail(n.Line, path, "want a duration such as \"30s\" or \"5m\", got %q", s)
			return
		}
		v.SetInt(int64(dur))
	case t == byteSizeType:
		size, ok := parseByteSize(s)
		if !ok {
			d.fail(n.Line, path, "want a size in bytes such as \"268435456\" or \"256MiB\" (KiB, MiB, GiB, TiB), got %q", s)
			return
		}
		v.SetInt(int64(size))
	case t.Kind() == reflect.String:
		v.SetString(s)
	case (t.Kind() == reflect.Int || t.Kind() == reflect.Int64 || t.Kind() == reflect.Float64) && quoted(n) && len(vars) == 0:
		// "1.00" is text in YAML; taking it as a number would hide a value that a template or
		// a hand edit turned into a string. A quoted ${VAR} is fine: the environment is text.
		d.fail(n.Line, path, "want a number, got the string %q: write it without quotes", s)
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
		i, err := strconv.ParseInt(s, 10, t.Bits())
		if err != nil {
			d.fail(n.Line, path, "want a whole number, got %q", s)
			return
		}
		v.SetInt(i)
	case t.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.fail(n.Line, path, "want a number, got %q", s)
			return
		}
		v.SetFloat(f)
	case t.Kind() == reflect.Bool:
		switch strings.ToLower(s) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			d.fail(n.Line, path, "want true or false, got %q", s)
		}
	default:
		// Only reachable if types.go gains a field type this decoder does not know.
		d.fail(n.Line, path, "unsupported field type %s", t)
	}
}

// yamlFields maps each yaml tag name of struct type t to its field index.
func yamlFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if name := KeyName(t.Field(i)); name != "" {
			m[name] = i
		}
	}
	return m
}

// KeyName is a struct field's key in the config file: its yaml tag's name, else its name in
// lower case; "" for a field the file cannot set (unexported, or tagged "-").
func KeyName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return strings.ToLower(f.Name)
	}
	return name
}
