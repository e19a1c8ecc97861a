package reqlog

import (
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Bounds of a request's tags (issue 28), OpenAI's own bounds for `metadata`, so no request
// OpenAI would take is refused here: at most MaxTags pairs from one source (the body's
// metadata, the x-modelgate-tags header), a key of at most MaxTagKeyChars characters and a
// value of at most MaxTagValueChars. Past them the request is refused (400).
const (
	MaxTags          = 16
	MaxTagKeyChars   = 64
	MaxTagValueChars = 512
)

// MaxLabelLen bounds what is recorded of an end user or a tag value, in bytes, once made a
// label (see appendLabel): the usage history keys its rows by them, so they stay short.
const MaxLabelLen = 128

// labelHashLen is the "~" and 16 hex digits that end a label cut to MaxLabelLen.
const labelHashLen = 17

// TagError says why a request's tags were refused, in words a client can act on. It names
// no value: the key alone, capped.
type TagError struct{ Msg string }

func (e *TagError) Error() string { return e.Msg }

func checkTag(source, key string, keyChars, valueChars int) *TagError {
	if keyChars > MaxTagKeyChars {
		return &TagError{"Invalid " + source + ": key '" + Printable(key, 32) + "...' is " + strconv.Itoa(keyChars) +
			" characters long; at most " + strconv.Itoa(MaxTagKeyChars) + " are allowed."}
	}
	if valueChars > MaxTagValueChars {
		return &TagError{"Invalid " + source + ": the value of '" + Printable(key, MaxTagKeyChars) + "' is " + strconv.Itoa(valueChars) +
			" characters long; at most " + strconv.Itoa(MaxTagValueChars) + " are allowed."}
	}
	return nil
}

// TooManyTags is the refusal of a source with more than MaxTags pairs.
func TooManyTags(source string, n int) *TagError {
	return &TagError{"Invalid " + source + ": " + strconv.Itoa(n) + " pairs; at most " + strconv.Itoa(MaxTags) + " are allowed."}
}

// TagsHeader is the request header clients that cannot set a body's metadata name their
// tags in (issue 28): "feature=search,customer=acme". It is never forwarded: modelgate
// builds the platform's request itself.
const TagsHeader = "X-Modelgate-Tags"

// HeaderTags parses the tags header of h into dst (ParseTagsHeader); several lines of it
// read as one list. The header is looked up by its canonical name as it is (the server
// canonicalizes the names it reads), not canonicalized again for every request.
func HeaderTags(dst []Tag, h http.Header) ([]Tag, *TagError) {
	vs := h[TagsHeader]
	switch len(vs) {
	case 0:
		return dst, nil
	case 1:
		return ParseTagsHeader(dst, vs[0])
	}
	return ParseTagsHeader(dst, strings.Join(vs, ","))
}

// ParseTagsHeader reads x-modelgate-tags, appending its tags to dst: "key=value" pairs
// separated by commas, spaces around each key and value ignored. A value may be empty and
// may hold '='; a key may not be empty, and may appear once. No control characters. An
// empty header names no tags. The strings appended are views of h; given room for MaxTags
// (a caller's array), it allocates nothing. On an error it returns nil.
func ParseTagsHeader(dst []Tag, h string) ([]Tag, *TagError) {
	h = strings.TrimSpace(h)
	if h == "" {
		return dst, nil
	}
	if n := strings.Count(h, ",") + 1; n > MaxTags {
		return nil, TooManyTags("x-modelgate-tags", n)
	}
	first := len(dst)
	for more := true; more; {
		var pair string
		pair, h, more = strings.Cut(h, ",")
		k, v, ok := strings.Cut(pair, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		kChars, kControl, kInvalid := scanText(k)
		vChars, vControl, vInvalid := scanText(v)
		switch {
		case !ok:
			return nil, &TagError{"Invalid x-modelgate-tags: expected key=value pairs separated by commas."}
		case k == "":
			return nil, &TagError{"Invalid x-modelgate-tags: a tag key is empty."}
		case kControl || vControl:
			return nil, &TagError{"Invalid x-modelgate-tags: control characters are not allowed."}
		case kInvalid || vInvalid:
			return nil, &TagError{"Invalid x-modelgate-tags: not valid UTF-8."}
		}
		if err := checkTag("x-modelgate-tags", k, kChars, vChars); err != nil {
			return nil, err
		}
		if _, dup := lookupTag(dst[first:], k); dup {
			return nil, &TagError{"Invalid x-modelgate-tags: the key '" + Printable(k, MaxTagKeyChars) + "' appears twice."}
		}
		dst = append(dst, Tag{k, v})
	}
	return dst, nil
}

// scanText reads s once for what the tags header's checks ask: its length in characters,
// whether it holds a control character, and whether it is not valid UTF-8. A header is
// ASCII as a rule: only text beyond it takes the slower, rune-aware passes.
func scanText(s string) (chars int, control, invalid bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return utf8.RuneCountInString(s), hasControl(s), !utf8.ValidString(s)
		}
		if c < 0x20 || c == 0x7f {
			control = true
		}
	}
	return len(s), control, false
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// Attribution is what a request records (issue 28): its end user made a label (appendLabel), and its
// tags written "k:v,k2:v2" (the access log's field, and the form Record.Tags keeps): for
// each key of allow (sorted, the usage.tag_keys), the header's value, else the body
// metadata's, else the key's default, made a label. Keys not allowed are dropped; "" when
// allow is empty or nothing matched. Keys are usage.tag_keys, which hold no ',' or ':',
// and labels hold no ',', so the text reads back unambiguously (CutTag). The pairs are
// written with ':', not the header's '=', because neither a label nor a key holds
// anything a logfmt line must quote: the text access log writes the field as it is, where
// quoting it cost about a third of what recording a request's tags costs.
// Both strings are views of one allocation, whatever the number of tags: the request
// path's only one.
func Attribution(user string, allow []string, header, body []Tag, defaults map[string]string) (endUser, tags string) {
	var picked [MaxTags]Tag // the chosen values, not yet labels; allow holds at most MaxTags
	n, room := 0, min(escapedLen(user), MaxLabelLen)
	for _, k := range allow {
		v, ok := lookupTag(header, k)
		if !ok {
			v, ok = lookupTag(body, k)
		}
		if !ok {
			v, ok = defaults[k]
		}
		if !ok || n == len(picked) {
			continue
		}
		picked[n] = Tag{Key: k, Value: v}
		n++
		room += len(k) + len(":,") + min(escapedLen(v), MaxLabelLen)
	}
	if room == 0 {
		return "", ""
	}
	// room bounds what is appended, so buf never grows and the views below stay its.
	buf := appendLabel(make([]byte, 0, room), user)
	userLen := len(buf)
	for i, t := range picked[:n] {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, t.Key...)
		buf = append(buf, ':')
		buf = appendLabel(buf, t.Value)
	}
	whole := unsafe.String(unsafe.SliceData(buf), len(buf))
	return whole[:userLen], whole[userLen:]
}

// CutTag reads the first tag of tags, written as Attribution writes them, and returns the
// rest; ok is false when tags is empty.
func CutTag(tags string) (t Tag, rest string, ok bool) {
	if tags == "" {
		return Tag{}, "", false
	}
	pair, rest, _ := strings.Cut(tags, ",")
	t.Key, t.Value, _ = strings.Cut(pair, ":") // a key holds no ':', a value may
	return t, rest, true
}

func lookupTag(tags []Tag, key string) (string, bool) {
	for i := range tags {
		if tags[i].Key == key {
			return tags[i].Value, true
		}
	}
	return "", false
}

// appendLabel appends s as it may be recorded, a label: a store key segment, a log field,
// a CSV cell and a dashboard label. Bytes other than ASCII letters, digits and "-._~:@+" are
// written %XX ('/' separates the history's key parts, '%' the escapes), so distinct values
// stay distinct; a label longer than MaxLabelLen keeps its head and ends in "~" and 16 hex
// digits of a hash of all of s, so long ids that share a head stay apart too. It never
// appends more than MaxLabelLen bytes, and what it appends is a copy: a label holds no
// view of a request body.
func appendLabel(dst []byte, s string) []byte {
	if len(s) <= MaxLabelLen && labelSafe(s) {
		return append(dst, s...)
	}
	whole := escapedLen(s) <= MaxLabelLen
	limit := MaxLabelLen
	if !whole {
		limit -= labelHashLen
	}
	start := len(dst)
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if labelByte(c) {
			if len(dst)-start+1 > limit {
				break
			}
			dst = append(dst, c)
			continue
		}
		if len(dst)-start+3 > limit {
			break
		}
		dst = append(dst, '%', hex[c>>4], hex[c&15])
	}
	if !whole {
		h := fnv.New64a()
		h.Write([]byte(s))
		sum := strconv.FormatUint(h.Sum64(), 16)
		dst = append(dst, '~')
		dst = append(dst, strings.Repeat("0", 16-len(sum))...)
		dst = append(dst, sum...)
	}
	return dst
}

func escapedLen(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if labelByte(s[i]) {
			n++
		} else {
			n += 3
		}
	}
	return n
}

func labelSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if !labelByte(s[i]) {
			return false
		}
	}
	return true
}

func labelByte(c byte) bool { return labelBytes[c] }

// labelBytes are the bytes a label keeps as they are: ASCII letters, digits and "-._~:@+".
// A table, since every byte of every recorded value is looked up; built once, never written.
var labelBytes = func() (t [256]bool) {
	for c := range 256 {
		b := byte(c)
		t[c] = 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || strings.IndexByte("-._~:@+", b) >= 0
	}
	return t
}()
