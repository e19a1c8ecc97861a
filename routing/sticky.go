package routing

import (
	"unsafe"

	"github.com/tidwall/gjson"
)

// Sticky is what keeps a request on its route: the hash (Key) of its end user, session or
// conversation, when it names one.
type Sticky struct {
	Hash uint64
	OK   bool
}

// KeyOf hashes a sticky value: a non-empty string, or the raw JSON of anything else that is
// present (a conversation's first message).
func KeyOf(v gjson.Result) Sticky {
	switch {
	case v.Type == gjson.String && v.Str != "":
		return Sticky{Key(v.Str), true}
	case v.Type == gjson.JSON && v.Raw != "":
		return Sticky{Key(v.Raw), true}
	}
	return Sticky{}
}

// StringKey hashes a sticky value given as a string; "" names none.
func StringKey(s string) Sticky {
	if s == "" {
		return Sticky{}
	}
	return Sticky{Key(s), true}
}

// First returns the first of keys that is set.
func First(keys ...Sticky) Sticky {
	for _, k := range keys {
		if k.OK {
			return k
		}
	}
	return Sticky{}
}

// FirstUserItem is the first element of a list of messages or input items whose role is
// user, or nothing.
func FirstUserItem(list gjson.Result) gjson.Result {
	var found gjson.Result
	list.ForEach(func(_, item gjson.Result) bool {
		if item.Get("role").Str == "user" {
			found = item
			return false
		}
		return true
	})
	return found
}

// FirstInputKey is the sticky value of a Responses conversation without an id: its first
// user input item (or its input, when that is a string). With previous_response_id kept by
// modelgate the expanded input starts with the conversation's first turn, so every turn
// lands on the same route.
//
//go:noinline
func FirstInputKey(body []byte) Sticky {
	// A view of the body, not a copy: what is read from it is hashed before it returns.
	in := gjson.Get(unsafe.String(unsafe.SliceData(body), len(body)), "input")
	if in.IsArray() {
		return KeyOf(FirstUserItem(in))
	}
	return KeyOf(in)
}
