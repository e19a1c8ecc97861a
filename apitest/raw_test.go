package apitest

import (
	"net/http"
	"testing"
	"time"
)

// RawHTTP sends the bytes it is given and reads the answer; a server that never answers is
// an error once the timeout passes.
func TestRawHTTP(t *testing.T) {
	addr := echoServer(t).Listener.Addr().String()
	status, body, err := RawHTTP(t, addr, 5*time.Second, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
	if err != nil || status != http.StatusOK || string(body) != "POST /x hi" {
		t.Errorf("status %d body %q err %v", status, body, err)
	}
	// Two of four declared bytes: the server waits for the rest until the deadline ends it.
	if _, _, err := RawHTTP(t, addr, 200*time.Millisecond, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nhi"); err == nil {
		t.Error("an unanswered request returned no error")
	}
}
