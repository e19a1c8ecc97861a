package audit

import (
	"reflect"
	"strings"

	"modelgate/config"
)

// ConfigChanges lists the paths of the settings that differ between two configs, in the
// config file's own spelling: "teams[search].limits.spend_per_day", "admin_keys". It names
// settings, never their values, so a changed secret shows as its path alone. Entries of a
// list that carry a name or an id (teams, keys, models) are matched by it and named by it,
// so adding a team is one path and not a shift of every later one; other lists (of keys,
// of model ids) are compared whole. A nil config on either side counts as the defaults of
// none: every set path of the other differs.
func ConfigChanges(old, cur *config.Config) []string {
	if old == nil {
		old = &config.Config{}
	}
	if cur == nil {
		cur = &config.Config{}
	}
	var out []string
	diffValue(reflect.ValueOf(*old), reflect.ValueOf(*cur), "", &out)
	return out
}

// maxName bounds a list entry's name inside a path; longer names, or names with characters
// a path cannot carry plainly, fall back to the entry's index.
const maxName = 64

func diffValue(a, b reflect.Value, path string, out *[]string) {
	switch a.Kind() {
	case reflect.Struct:
		t := a.Type()
		if !settable(t) { // a value such as time.Time: compared whole
			if !reflect.DeepEqual(a.Interface(), b.Interface()) {
				*out = append(*out, path)
			}
			return
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := config.KeyName(f)
			if name == "" {
				continue
			}
			diffValue(a.Field(i), b.Field(i), config.ChildPath(path, name), out)
		}
	case reflect.Pointer:
		switch {
		case a.IsNil() && b.IsNil():
		case a.IsNil() || b.IsNil():
			*out = append(*out, path)
		default:
			diffValue(a.Elem(), b.Elem(), path, out)
		}
	case reflect.Map:
		if !reflect.DeepEqual(emptyAsNil(a), emptyAsNil(b)) {
			*out = append(*out, path)
		}
	case reflect.Slice:
		if a.Type().Elem().Kind() == reflect.Struct && namedEntries(a) && namedEntries(b) {
			diffNamed(a, b, path, out)
			return
		}
		if !reflect.DeepEqual(emptyAsNil(a), emptyAsNil(b)) {
			*out = append(*out, path)
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, path)
		}
	}
}

// diffNamed compares two lists of named entries: those on both sides field by field, the
// others (added or removed) as one path each, in the order they appear.
func diffNamed(a, b reflect.Value, path string, out *[]string) {
	inB := make(map[string]int, b.Len())
	for j := 0; j < b.Len(); j++ {
		inB[entryName(b.Index(j))] = j
	}
	inA := make(map[string]bool, a.Len())
	for i := 0; i < a.Len(); i++ {
		name := entryName(a.Index(i))
		inA[name] = true
		p := path + "[" + name + "]"
		if j, ok := inB[name]; ok {
			diffValue(a.Index(i), b.Index(j), p, out)
		} else {
			*out = append(*out, p) // removed
		}
	}
	for j := 0; j < b.Len(); j++ {
		if name := entryName(b.Index(j)); !inA[name] {
			*out = append(*out, path+"["+name+"]") // added
		}
	}
}

// namedEntries reports whether every entry of a list of structs has a usable name or id,
// all different: only then can entries be matched by it.
func namedEntries(list reflect.Value) bool {
	seen := make(map[string]bool, list.Len())
	for i := 0; i < list.Len(); i++ {
		name := entryName(list.Index(i))
		if name == "" || seen[name] {
			return false
		}
		seen[name] = true
	}
	return true
}

// entryName is the value of an entry's "name" or "id" field, when it is a plain name.
func entryName(v reflect.Value) string {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		n := config.KeyName(t.Field(i))
		if (n == "name" || n == "id") && v.Field(i).Kind() == reflect.String {
			s := v.Field(i).String()
			if plainName(s) {
				return s
			}
			return ""
		}
	}
	return ""
}

// plainName allows what config names are made of; anything else could break up a path or
// smuggle text into it.
func plainName(s string) bool {
	if s == "" || len(s) > maxName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-:/@", c) >= 0) {
			return false
		}
	}
	return true
}

// settable reports whether a struct has fields a config file can set; one without (a
// time.Time) is one setting.
func settable(t reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		if config.KeyName(t.Field(i)) != "" {
			return true
		}
	}
	return false
}

// emptyAsNil makes an empty list (or map) and an absent one compare equal: the config treats them
// alike.
func emptyAsNil(v reflect.Value) any {
	if v.Len() == 0 {
		return nil
	}
	return v.Interface()
}
