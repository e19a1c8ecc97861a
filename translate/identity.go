package translate

import (
	"strings"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
)

// Identity is what a request says about who asks and in which conversation. The parse reads
// it on its way through the body, so a gateway that routes by end user or conversation (sticky
// routes) or records who spent what needs no second pass over the body. Its strings are copies
// cut to MaxIdentityLen bytes: holding them keeps no view of the body alive.
type Identity struct {
	// User is the end user the request names: Chat's `user`, Messages' metadata.user_id.
	User string
	// SafetyIdentifier is Chat's `safety_identifier`, the field OpenAI now prefers to `user`.
	SafetyIdentifier string
	// PromptCacheKey is Chat's `prompt_cache_key`: clients that set it name their conversation.
	PromptCacheKey string
	// FirstUser marks the conversation: Mark of the JSON of its first user message, which
	// every turn of a chat resends unchanged (a system prompt is shared by all the
	// conversations of an application, so it marks none). 0 when there is no user message.
	FirstUser uint64
	// Metadata is Chat's `metadata` object as the client sent it (a copy, within OpenAI's
	// bounds: CheckMetadata), where request tags are read from; "" when there is none.
	Metadata string
}

// EndUser is the end user the request names: `user`, else `safety_identifier` (OpenAI's
// newer name for the same thing).
func (id *Identity) EndUser() string { return endUserOf(id.User, id.SafetyIdentifier) }

func endUserOf(user, safety string) string {
	if user != "" {
		return user
	}
	return safety
}

// MaxIdentityLen bounds each string of an Identity. Longer values are cut: ids that long are
// not ids a person chose, and the cut keeps a hostile body from pinning megabytes per request.
const MaxIdentityLen = 256

// Mark is the fixed hash (xxHash64, no seed) an Identity marks a conversation with: the same
// on every replica and after every restart.
func Mark(raw string) uint64 { return xxhash.Sum64String(raw) }

// identityString is s copied out of the body, cut to MaxIdentityLen at a character boundary.
func identityString(s string) string {
	if len(s) > MaxIdentityLen {
		n := MaxIdentityLen
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return strings.Clone(s)
}

// markFirstUser marks the conversation with raw, the JSON of a user message, unless an earlier
// one did. A message's raw JSON is the exact bytes the client sent, which a client resends
// unchanged turn after turn.
func (w *bodyWriter) markFirstUser(raw string) {
	if w.firstUser == 0 {
		w.firstUser = Mark(raw) | 1 // never 0, which says "none"
	}
}

// set records one of Chat's identity fields, by name; other names are not identity.
func (id *Identity) set(key, value string) {
	switch key {
	case "user":
		id.User = identityString(value)
	case "safety_identifier":
		id.SafetyIdentifier = identityString(value)
	case "prompt_cache_key":
		id.PromptCacheKey = identityString(value)
	}
}
