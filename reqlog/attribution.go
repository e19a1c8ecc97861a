package reqlog

import (
	"hash/fnv"
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
// label (see Label): the usage history keys its rows by them, so they stay short.
const MaxLabelLen = 128

// labelHashLen is the "~" and 16 hex digits that end a label cut to MaxLabelLen.
const labelHashLen = 17

// TagError says why a request's tags were refused, in words a client can act on. It names
// no value: the key alone, capped.
type TagError struct{ Msg string }

func (e *TagError) Error() string { return e.Msg }

// CheckTag refuses a tag past the bounds; source names where it came from ("metadata",
// "x-modelgate-tags") for the message.
func CheckTag(source, key string, valueChars int) *TagError {
	if n := utf8.RuneCountInString(key); n > MaxTagKeyChars {
		return &TagError{"Invalid " + source + ": key '" + Printable(key, 32) + "...' is " + strconv.Itoa(n) +
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

// ParseTagsHeader reads x-modelgate-tags: "key=value" pairs separated by commas, spaces
// around each key and value ignored. A value may be empty and may hold '='; a key may not be
// empty, and may appear once. No control characters. An empty header names no tags. The
// strings returned are views of h.
func ParseTagsHeader(h string) ([]Tag, *TagError) {
	h = strings.TrimSpace(h)
	if h == "" {
		return nil, nil
	}
	if n := strings.Count(h, ",") + 1; n > MaxTags {
		return nil, TooManyTags("x-modelgate-tags", n)
	}
	var tags []Tag
	for pair := range strings.SplitSeq(h, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok:
			return nil, &TagError{"Invalid x-modelgate-tags: expected key=value pairs separated by commas."}
		case k == "":
			return nil, &TagError{"Invalid x-modelgate-tags: a tag key is empty."}
		case hasControl(k) || hasControl(v):
			return nil, &TagError{"Invalid x-modelgate-tags: control characters are not allowed."}
		case !utf8.ValidString(k) || !utf8.ValidString(v):
			return nil, &TagError{"Invalid x-modelgate-tags: not valid UTF-8."}
		}
		if err := CheckTag("x-modelgate-tags", k, utf8.RuneCountInString(v)); err != nil {
			return nil, err
		}
		for _, t := range tags {
			if t.Key == k {
				return nil, &TagError{"Invalid x-modelgate-tags: the key '" + Printable(k, MaxTagKeyChars) + "' appears twice."}
			}
		}
		if tags == nil {
			tags = make([]Tag, 0, strings.Count(h, ",")+1)
		}
		tags = append(tags, Tag{k, v})
	}
	return tags, nil
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// SelectTags is what a request records: for each key of allow (sorted, the usage.tag_keys),
// the header's value, else the body metadata's, else the key's default, each made a Label.
// Keys not allowed are dropped. nil when allow is empty or nothing matched. The labels share
// one allocation, and the tags another, whatever their number.
func SelectTags(allow []string, header, body []Tag, defaults map[string]string) []Tag {
	var picked [MaxTags]Tag // the chosen values, not yet labels; allow holds at most MaxTags
	n, room := 0, 0
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
		room += min(escapedLen(v), MaxLabelLen)
	}
	if n == 0 {
		return nil
	}
	// room bounds every label's length, so buf never grows and the views below stay its.
	buf := make([]byte, 0, room)
	out := make([]Tag, n)
	for i, t := range picked[:n] {
		start := len(buf)
		buf = appendLabel(buf, t.Value)
		out[i] = Tag{Key: t.Key, Value: unsafe.String(unsafe.SliceData(buf[start:]), len(buf)-start)}
	}
	return out
}

func lookupTag(tags []Tag, key string) (string, bool) {
	for i := range tags {
		if tags[i].Key == key {
			return tags[i].Value, true
		}
	}
	return "", false
}

// Label is s as it may be recorded: a store key segment, a log field, a CSV cell and a
// dashboard label. Bytes other than ASCII letters, digits and "-._~:@+" are written %XX
// ('/' separates the history's key parts, '%' the escapes), so distinct values stay
// distinct; a label longer than MaxLabelLen keeps its head and ends in "~" and 16 hex
// digits of a hash of all of s, so long ids that share a head stay apart too. Always a
// copy: a label holds no view of a request body.
func Label(s string) string {
	if len(s) <= MaxLabelLen && labelSafe(s) {
		return strings.Clone(s)
	}
	b := appendLabel(make([]byte, 0, MaxLabelLen), s)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// appendLabel appends Label(s) to dst; it never appends more than MaxLabelLen bytes.
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

// TagsField writes tags for a log line: "k=v,k2=v2", labels already safe.
func TagsField(tags []Tag) string {
	if len(tags) == 0 {
		return ""
	}
	var b strings.Builder
	n := len(tags) - 1
	for _, t := range tags {
		n += len(t.Key) + 1 + len(t.Value)
	}
	b.Grow(n)
	for i, t := range tags {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(t.Key)
		b.WriteByte('=')
		b.WriteString(t.Value)
	}
	return b.String()
}
