package reqlog

// MaxClientRequestID bounds the caller's X-Request-Id as it is logged.
const MaxClientRequestID = 128

// ClientRequestID is the caller's X-Request-Id as the access log keeps it: at most
// MaxClientRequestID bytes, each outside A-Z a-z 0-9 - _ . : replaced by '_', so it is one
// plain token in either log format; "" when none was sent. It is never modelgate's own id:
// that one is sent to the platform and keys what it bills, and two callers (or one, twice)
// could otherwise make their requests share it.
func ClientRequestID(id string) string {
	id = id[:min(len(id), MaxClientRequestID)]
	for i := 0; i < len(id); i++ {
		if !plainIDByte(id[i]) {
			b := []byte(id)
			for j := i; j < len(b); j++ {
				if !plainIDByte(b[j]) {
					b[j] = '_'
				}
			}
			return string(b)
		}
	}
	return id // the common case: no copy
}

func plainIDByte(ch byte) bool {
	switch {
	case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9':
		return true
	}
	return ch == '-' || ch == '_' || ch == '.' || ch == ':'
}
