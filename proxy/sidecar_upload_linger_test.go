package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/config"
)

// writeAllThenRead is a client that sends its whole request before it looks at the answer,
// as an HTTP client that does not wait for 100-continue does: every write error is reported,
// and the answer must still be readable once the body is out.
func writeAllThenRead(t *testing.T, addr string, spec uploadSpec, chunked bool) (writeErr error, status int, body []byte, readErr error) {
	t.Helper()
	conn := dialRaw(t, addr, 2*time.Minute)
	defer conn.Close()
	r, n := spec.body()
	framing := fmt.Sprintf("Content-Length: %d", n)
	if chunked {
		framing = "Transfer-Encoding: chunked"
	}
	head := fmt.Sprintf("POST /api/open/v2/assets HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: multipart/form-data; boundary=%s\r\n%s\r\n\r\n", keyAlpha1, testBoundary, framing)
	if _, writeErr = io.WriteString(conn, head); writeErr == nil {
		if chunked {
			cw := httputil.NewChunkedWriter(conn)
			if _, writeErr = io.Copy(cw, r); writeErr == nil {
				if writeErr = cw.Close(); writeErr == nil {
					_, writeErr = io.WriteString(conn, "\r\n") // no trailers
				}
			}
		} else {
			_, writeErr = io.Copy(conn, r)
		}
	}
	resp, readErr := http.ReadResponse(bufio.NewReader(conn), nil)
	if readErr != nil {
		return writeErr, 0, nil, readErr
	}
	defer resp.Body.Close()
	body, readErr = io.ReadAll(resp.Body)
	return writeErr, resp.StatusCode, body, readErr
}

// TestSidecarUploadTooLargeWriteAllThenRead: a client that writes all of an upload over the
// 100 MB limit before it reads gets the 413, not a reset: modelgate reads and drops the rest
// of the body after answering (lingering close) instead of closing on unread bytes. The
// tail of 100 MB + 1 byte is one that net/http drains on its own (256 KiB); 20 MB more is
// not, whether refused at the limit (chunked) or on its declared length.
func TestSidecarUploadTooLargeWriteAllThenRead(t *testing.T) {
	cp, env := hundredMBEnv(t)
	for _, tc := range []struct {
		name     string
		file     int64
		chunked  bool
		declared bool // refused on its Content-Length: the platform sees nothing
	}{
		{"100MB_plus_1", hundredMB + 1, false, false},
		{"100MB_plus_1_chunked", hundredMB + 1, true, false},
		{"120MB_chunked", hundredMB + 20_000_000, true, false},
		{"120MB_declared", hundredMB + 20_000_000, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := uploadSpec{before: []formField{{"media_type", "file"}}, fileSize: tc.file,
				after: []formField{{"purpose", "temp_input"}}}
			writeErr, status, body, readErr := writeAllThenRead(t, env.front.Listener.Addr().String(), spec, tc.chunked)
			if writeErr != nil || readErr != nil {
				t.Fatalf("write: %v; read: %v", writeErr, readErr)
			}
			if status != http.StatusRequestEntityTooLarge || *assertEnvelope(t, body).Code != 1 {
				t.Fatalf("status %d: %s", status, body)
			}
			if tc.declared {
				cp.assertNoUpload(t)
				return
			}
			if s := cp.next(t); s.complete || s.fileBytes > hundredMB {
				t.Errorf("platform saw %d file bytes, complete=%v", s.fileBytes, s.complete)
			}
		})
	}
}

// startIdleUploadEnv serves uploads through a fresh countingPlatform with an
// upload_idle_timeout of 300ms, short enough that the stalled-client tests end quickly, and
// checks that the test leaks no goroutine.
func startIdleUploadEnv(t *testing.T) (*countingPlatform, *testEnv) {
	t.Helper()
	noLeaks(t)
	cp := newCountingPlatform(t)
	env := newTestEnv(t, "", func(c *config.Config) {
		withPlatform(cp, 0)(c)
		c.Server.UploadIdleTimeout = 300 * time.Millisecond
	})
	return cp, env
}

// TestSidecarUploadLingerBounded: the drain after a refused upload ends on its own, so a
// client cannot hold the connection (and its concurrency slot) by sending forever or by
// going silent: a client silent for upload_idle_timeout is closed on, and one that keeps
// sending is closed on after lingerBytes.
func TestSidecarUploadLingerBounded(t *testing.T) {
	cp, env := startIdleUploadEnv(t)
	addr := env.front.Listener.Addr().String()
	// Declared far past the limit: refused on its Content-Length, then drained.
	head := fmt.Sprintf("POST /api/open/v2/assets HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\n\r\n", keyAlpha1, testBoundary, int64(10)<<30)

	t.Run("silent", func(t *testing.T) {
		conn, br := dialUpload(t, addr, head+strings.Repeat("x", 64<<10))
		// Well short of lingerTime (10 s): only the idle bound can close it this soon.
		_ = conn.SetReadDeadline(time.Now().Add(8 * time.Second))
		if _, err := io.Copy(io.Discard, br); err != nil {
			t.Fatalf("the connection of a silent client was not closed: %v", err)
		}
	})

	t.Run("endless", func(t *testing.T) {
		conn, br := dialUpload(t, addr, head)
		var sent atomic.Int64
		done := make(chan error, 1)
		go func() {
			block := make([]byte, 64<<10)
			for {
				n, err := conn.Write(block)
				sent.Add(int64(n))
				if err != nil {
					done <- err
					return
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("modelgate was still reading an endless body after a minute")
		}
		_, _ = io.Copy(io.Discard, br)
		// lingerBytes (128 MiB) plus what the two sockets' buffers hold.
		if n := sent.Load(); n > 128<<20+64<<20 {
			t.Errorf("modelgate read %d bytes of an endless body", n)
		}
	})
	cp.assertNoUpload(t)
}

// dialUpload sends msg on a new connection and reads the answer's head, which must be the
// 413 of a file too large, sent before the body is drained.
func dialUpload(t *testing.T, addr, msg string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn := dialRaw(t, addr, time.Minute)
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, msg); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer before the body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || *assertEnvelope(t, b).Code != 1 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return conn, br
}

// TestSidecarUploadExpectContinueNotDrained: a client that waits for 100-continue and is
// refused on its declared length never sends the body, so nothing is drained: the 413 comes
// without a 100 Continue before it, and the connection closes at once rather than after
// lingerTime (10 s).
func TestSidecarUploadExpectContinueNotDrained(t *testing.T) {
	noLeaks(t)
	cp := newCountingPlatform(t)
	env := newTestEnv(t, "", withPlatform(cp, 0))
	head := fmt.Sprintf("POST /api/open/v2/assets HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		keyAlpha1, testBoundary, int64(10)<<30)
	conn, br := dialUpload(t, env.front.Listener.Addr().String(), head)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("the connection was not closed after the 413: %v", err)
	}
	cp.assertNoUpload(t)
}
