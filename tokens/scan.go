package tokens

import "bytes"

// scanner walks a JSON body front to back for EstimateResponsesInput. It never recurses on
// the body's own nesting (skip counts brackets), so a hostile body's depth costs nothing, and
// it never reads past the end: on malformed input it stops early.
type scanner struct {
	b []byte
	i int
	c counter
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek is the next value's first byte, 0 at the end.
func (s *scanner) peek() byte {
	s.space()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// open consumes the opening bracket c of an object or array, and reports whether it was
// there.
func (s *scanner) open(c byte) bool {
	if s.peek() != c {
		return false
	}
	s.i++
	return true
}

// enter consumes the opening bracket c of the container that should come next; whatever
// else comes is skipped, and enter reports false.
func (s *scanner) enter(c byte) bool {
	if s.open(c) {
		return true
	}
	s.skip()
	return false
}

// more reports whether the container being read has another member, consuming the comma
// before it or the closing bracket after the last; first is the caller's "no member read
// yet". A container that does not go on as JSON does ends the walk.
func (s *scanner) more(closing byte, first *bool) bool {
	c := s.peek()
	switch {
	case c == closing:
		s.i++
		return false
	case c == 0:
		return false
	case *first:
		*first = false
		return true
	case c != ',':
		s.i = len(s.b)
		return false
	}
	s.i++
	return s.peek() != 0
}

// key reads an object member's key and the colon after it; the value is next.
func (s *scanner) key() []byte {
	if s.peek() != '"' {
		s.i = len(s.b)
		return nil
	}
	k := s.str()
	if s.peek() == ':' {
		s.i++
	}
	return k
}

// str reads a string at s.i and returns its content as written (escapes included).
func (s *scanner) str() []byte {
	s.i++ // the opening quote
	start := s.i
	for {
		q := bytes.IndexByte(s.b[s.i:], '"')
		if q < 0 {
			s.i = len(s.b)
			return s.b[start:]
		}
		end := s.i + q
		s.i = end + 1
		escapes := 0
		for j := end - 1; j >= start && s.b[j] == '\\'; j-- {
			escapes++
		}
		if escapes%2 == 0 {
			return s.b[start:end]
		}
	}
}

// strOrSkip reads a string value, or skips a value of another type and returns nil.
func (s *scanner) strOrSkip() []byte {
	if s.peek() == '"' {
		return s.str()
	}
	s.skip()
	return nil
}

// raw skips a value and returns its JSON.
func (s *scanner) raw() []byte {
	s.space()
	start := s.i
	s.skip()
	return s.b[start:s.i]
}

// skip passes over one value of any type.
func (s *scanner) skip() {
	switch s.peek() {
	case 0:
		return
	case '"':
		s.str()
		return
	case '{', '[':
	default: // a number, true, false or null
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			s.i++
		}
		return
	}
	// One tight loop: schemas are many short strings, where a call per string would cost
	// more than the string.
	b, i, depth := s.b, s.i, 0
	for i < len(b) {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				s.i = i + 1
				return
			}
		}
		i++
	}
	s.i = len(b)
}
