package config

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// expand replaces each ${NAME} in s with the variable's value; "$${" stands for a literal "${".
// A "$" not followed by "{" is kept as written, so values such as "pa$$word" need no escaping.
// It returns the names it used, the names that are not set (reported together by the caller,
// so a file needing five secrets says so once) and one message per malformed reference.
func expand(s string, getenv func(string) (string, bool)) (out string, vars, unset, problems []string) {
	if !strings.Contains(s, "${") {
		return s, nil, nil, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				problems = append(problems, "unterminated ${ (write $${ for a literal ${)")
				return "", vars, unset, problems
			}
			name := s[i+2 : i+2+end]
			i += 2 + end + 1
			if !validVarName(name) {
				problems = append(problems, fmt.Sprintf("invalid environment variable reference ${%s}: want letters, digits and _", name))
				continue
			}
			val, ok := getenv(name)
			if !ok {
				unset = append(unset, name)
				continue
			}
			vars = append(vars, name)
			b.WriteString(val)
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), vars, unset, problems
}

func validVarName(name string) bool {
	if name == "" || len(name) > 256 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// YAML ends a plain scalar at '{' or '}' inside [..] and {..}, so the documented form
// `admin_keys: [${MODELGATE_ADMIN_KEY}]` would not even parse. Before parsing, each well-formed
// reference is therefore rewritten to a marker made of characters YAML treats as ordinary text;
// after parsing, scalars get their original text back and only then are expanded. No variable
// value is ever seen by the YAML parser.
const (
	envMarker = ".mg-env-Q7z."
	litMarker = ".mg-lit-Q7z."
)

var (
	refRE    = regexp.MustCompile(`\$?\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	markerRE = regexp.MustCompile(`\.mg-(env|lit)-Q7z\.([A-Za-z_][A-Za-z0-9_]*)\.`)
)

// maskRefs returns data with references replaced by markers, and false if data already
// contains a marker (it could not be told apart from one of ours).
func maskRefs(data []byte) ([]byte, bool) {
	if bytes.Contains(data, []byte(envMarker)) || bytes.Contains(data, []byte(litMarker)) {
		return nil, false
	}
	if !bytes.Contains(data, []byte("${")) {
		return data, true
	}
	return refRE.ReplaceAllFunc(data, func(ref []byte) []byte {
		name := ref[bytes.IndexByte(ref, '{')+1 : len(ref)-1]
		marker := envMarker
		if ref[1] == '$' {
			marker = litMarker
		}
		return append(append([]byte(marker), name...), '.')
	}), true
}

// unmaskRefs restores the text a scalar had in the file.
func unmaskRefs(s string) string {
	if !strings.Contains(s, "-Q7z.") {
		return s
	}
	return markerRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := markerRE.FindStringSubmatch(m)
		if sub[1] == "lit" {
			return "$${" + sub[2] + "}"
		}
		return "${" + sub[2] + "}"
	})
}
