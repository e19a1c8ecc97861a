package auth

import (
	"fmt"
	"log/slog"
)

const redacted = "REDACTED"

// Secret holds a credential. Every way of printing or serialising it yields "REDACTED", so a
// Principal can be logged or dumped without leaking; Reveal is the one way to the value.
type Secret string

// Reveal returns the credential itself: call it only where the upstream header is set.
func (s Secret) Reveal() string { return string(s) }

func (s Secret) String() string               { return redacted }
func (s Secret) GoString() string             { return redacted }
func (s Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// Format covers every verb, including %x and %q, which would otherwise print the bytes of a
// string type without consulting String.
func (s Secret) Format(f fmt.State, verb rune) {
	_, _ = f.Write([]byte(redacted))
}
