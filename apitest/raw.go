package apitest

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// RawHTTP writes msg, an HTTP/1.1 request byte for byte, on a fresh connection to addr and
// reads the answer, all within timeout: for requests no well-behaved client would send (a
// lying Content-Length, a body that stops). A failed dial fails the test; a connection cut
// before an answer is returned as err, since some tests expect it. A write the server cut
// short does not count when its answer still arrives.
func RawHTTP(t testing.TB, addr string, timeout time.Duration, msg string) (status int, body []byte, err error) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	_, werr := io.WriteString(conn, msg)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		if werr != nil {
			err = werr
		}
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, _ = io.ReadAll(resp.Body)
	return resp.StatusCode, body, nil
}
