package config

import (
	"fmt"
	"strings"
)

// expand replaces each ${NAME} in s with the variable's value; "$${" stands for a literal "${".
// A "$" not followed by "{" is kept as written, so values such as "pa$$word" need no escaping.
// It returns the names it used and one message per problem (unset or malformed reference).
func expand(s string, getenv func(string) (string, bool)) (string, []string, []string) {
	if !strings.Contains(s, "${") {
		return s, nil, nil
	}
	var (
		b        strings.Builder
		vars     []string
		problems []string
	)
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				problems = append(problems, "unterminated ${ (write $${ for a literal ${)")
				return "", vars, problems
			}
			name := s[i+2 : i+2+end]
			i += 2 + end + 1
			if !validVarName(name) {
				problems = append(problems, fmt.Sprintf("invalid environment variable reference ${%s}: want letters, digits and _", name))
				continue
			}
			val, ok := getenv(name)
			if !ok {
				problems = append(problems, fmt.Sprintf("environment variable %s is not set", name))
				continue
			}
			vars = append(vars, name)
			b.WriteString(val)
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), vars, problems
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
