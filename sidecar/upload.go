package sidecar

import (
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"modelgate/platform"
)

// Upload streaming.
//
// The client's multipart body is parsed part by part (mime/multipart) and re-emitted through
// an io.Pipe by a multipart.Writer whose reader is the upstream request body. Only the four
// parts the platform defines go out, each rebuilt from validated values, so nothing else the
// client wrote (extra parts, part headers, transfer encodings) reaches the platform. At any
// moment modelgate holds one copy buffer and the parsers' small windows, never the file.
//
// Order of events:
//   - Fields before the file part are read and validated first; a bad one is answered with
//     400 before any connection to the platform is made.
//   - The upstream request starts when the file part begins. File bytes are counted as they
//     pass; byte limit+1 is never forwarded: the upload is aborted and the client gets 413.
//   - Fields after the file are validated as they come. A bad one aborts the upstream
//     request before the closing boundary is sent, so the platform never sees a complete
//     upload, and the client gets 400.
//
// Aborting closes the pipe with an error: the transport then drops the connection without
// the terminating chunk, which the platform can only treat as a failed request.

// multipartSlack is what the body may carry besides the file: boundaries, part headers and
// the three short fields. The body as a whole is capped at the file limit plus this.
const multipartSlack = 1 << 20

// maxFieldBytes bounds a text field; the longest valid value is "temp_input".
const maxFieldBytes = 64

// maxTTLHours only keeps ttl_hours a plain number; the platform sets no maximum.
const maxTTLHours = 999_999_999

var uploadFields = []string{"media_type", "purpose", "ttl_hours"}

var mediaTypes = map[string]bool{"image": true, "video": true, "audio": true, "file": true}

// errUploadAborted is what the upstream body reader sees when modelgate stops an upload.
var errUploadAborted = errors.New("upload aborted by modelgate")

// errUpstreamAnswered stops the copy once the platform has answered: it needs no more bytes.
var errUpstreamAnswered = errors.New("platform answered before the upload ended")

func validateUploadField(name, value string) *paramError {
	switch name {
	case "media_type":
		if !mediaTypes[value] {
			return badParam(name, "expected one of image, video, audio, file")
		}
	case "purpose":
		if value != "temp_input" {
			return badParam(name, "expected temp_input")
		}
	case "ttl_hours":
		if _, ok := boundedInt(value, 1, maxTTLHours); !ok {
			return badParam(name, "expected an integer of at least 1")
		}
	}
	return nil
}

// uploadAsset serves POST assets.
func (r *Routes) uploadAsset(c *gin.Context) {
	call := callOf(c)
	limit := call.Settings.MaxUploadBytes
	if c.Request.ContentLength > limit+multipartSlack {
		// Refused on the declaration alone; the body is never read, only drained when the
		// client sends it without waiting (lingering close, linger.go).
		if waitsForContinue(c.Request) {
			uploadTooLarge(c, limit)
		} else {
			answerAndLinger(c, call.Settings.UploadIdleTimeout, func() { uploadTooLarge(c, limit) })
		}
		return
	}
	if !noQuery(c) {
		return
	}
	mt, params, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		abort(c, http.StatusBadRequest, platform.CodeBusiness, "expected a multipart/form-data body")
		return
	}
	body := io.Reader(http.MaxBytesReader(c.Writer, c.Request.Body, limit+multipartSlack))
	idle := call.Settings.UploadIdleTimeout
	if idle > 0 {
		rc := http.NewResponseController(c.Writer)
		body = &idleDeadlineReader{r: body, rc: rc, idle: idle}
		// The connection may carry another request after this one; it must not inherit the deadline.
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	u := &upload{
		routes: r, c: c, call: call, limit: limit,
		mr: multipart.NewReader(body, params["boundary"]),
	}
	out := u.run()
	if !out.clientGone && !u.bodyDone {
		// The rest of the body was not read; the connection cannot be reused, and the client
		// may still be sending it: answer, then drain it (lingering close, linger.go).
		c.Header("Connection", "close")
		answerAndLinger(c, idle, func() { out.write(c) })
		return
	}
	out.write(c)
}

func uploadTooLarge(c *gin.Context, limit int64) {
	c.Header("Connection", "close")
	abort(c, http.StatusRequestEntityTooLarge, platform.CodeBusiness,
		"file too large: the limit is "+strconv.FormatInt(limit, 10)+" bytes")
}

// upload is one POST assets on its way through.
type upload struct {
	routes   *Routes
	c        *gin.Context
	call     *Call
	limit    int64
	mr       *multipart.Reader
	seen     map[string]bool
	ttlHours int  // 0 when the client left it to the platform's default
	bodyDone bool // the client's body was read to its end

	pw     *io.PipeWriter
	mw     *multipart.Writer
	cancel context.CancelFunc
	result chan upstreamResult
	lease  Lease // the platform key the upload goes with
}

type upstreamResult struct {
	resp *http.Response
	err  error
}

func (u *upload) fail(status int, msg string) reply {
	return envelopeReply(status, platform.CodeBusiness, msg)
}

func (u *upload) tooLarge() reply {
	return u.fail(http.StatusRequestEntityTooLarge, "file too large: the limit is "+strconv.FormatInt(u.limit, 10)+" bytes")
}

// readErr answers a failure to read the client's body.
func (u *upload) readErr(err error) reply {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return u.tooLarge()
	case errors.Is(err, os.ErrDeadlineExceeded):
		// Checked before the context: net/http cancels it on any read error, this one included.
		return u.fail(http.StatusRequestTimeout, "the upload stalled: no data for "+u.call.Settings.UploadIdleTimeout.String())
	case u.c.Request.Context().Err() != nil:
		return reply{clientGone: true}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return u.fail(http.StatusBadRequest, "the multipart body ended before its closing boundary")
	}
	return u.fail(http.StatusBadRequest, "the multipart body could not be parsed")
}

// run reads the client's body and drives the upstream upload; the returned reply has
// not been written yet.
func (u *upload) run() reply {
	u.seen = map[string]bool{}
	var before []field
	for {
		part, err := u.mr.NextRawPart()
		if err == io.EOF {
			u.bodyDone = true
			return u.fail(http.StatusBadRequest, "missing required part 'file'")
		}
		if err != nil {
			return u.readErr(err)
		}
		name := part.FormName()
		if name == "file" {
			return u.stream(before, part)
		}
		f, r, ok := u.readField(name, part)
		if !ok {
			return r
		}
		before = append(before, f)
	}
}

type field struct{ name, value string }

// readField reads and validates one text part.
func (u *upload) readField(name string, part *multipart.Part) (field, reply, bool) {
	known := false
	for _, f := range uploadFields {
		known = known || f == name
	}
	if !known {
		return field{}, u.fail(http.StatusBadRequest, "unknown part "+printableName(name)), false
	}
	if u.seen[name] {
		return field{}, u.fail(http.StatusBadRequest, "part "+printableName(name)+" given more than once"), false
	}
	u.seen[name] = true
	b, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
	if err != nil {
		return field{}, u.readErr(err), false
	}
	if len(b) > maxFieldBytes {
		return field{}, u.fail(http.StatusBadRequest, badParam(name, "value too long").msg), false
	}
	if perr := validateUploadField(name, string(b)); perr != nil {
		return field{}, u.fail(http.StatusBadRequest, perr.msg), false
	}
	if name == "ttl_hours" {
		u.ttlHours, _ = boundedInt(string(b), 1, maxTTLHours)
	}
	return field{name, string(b)}, reply{}, true
}

// stream opens the upstream request, sends the fields read so far and the file, then the
// fields after it. Every way out waits for the upstream call to end.
func (u *upload) stream(before []field, file *multipart.Part) reply {
	u.start()
	for _, f := range before {
		if err := u.mw.WriteField(f.name, f.value); err != nil {
			return u.finish(reply{}, err)
		}
	}
	fw, err := u.mw.CreatePart(filePartHeader(file))
	if err != nil {
		return u.finish(reply{}, err)
	}
	if r, werr, ok := u.copyFile(fw, file); !ok {
		return u.finish(r, werr)
	}
	for {
		part, err := u.mr.NextRawPart()
		if err == io.EOF {
			u.bodyDone = true
			break
		}
		if err != nil {
			return u.finish(u.readErr(err), nil)
		}
		name := part.FormName()
		if name == "file" {
			return u.finish(u.fail(http.StatusBadRequest, "part 'file' given more than once"), nil)
		}
		f, r, ok := u.readField(name, part)
		if !ok {
			return u.finish(r, nil)
		}
		if err := u.mw.WriteField(f.name, f.value); err != nil {
			return u.finish(reply{}, err)
		}
	}
	if err := u.mw.Close(); err != nil {
		return u.finish(reply{}, err)
	}
	return u.finish(reply{}, nil)
}

// copyFile forwards the file part, never more than the limit. ok=false returns either a
// local reply (client side failed or file too large) or the upstream write error.
func (u *upload) copyFile(fw io.Writer, file *multipart.Part) (reply, error, bool) {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		room := u.limit - n
		chunk := buf
		if room < int64(len(chunk)) {
			// One byte past the limit is read to learn there is more, and never sent.
			chunk = buf[:room+1]
		}
		k, rerr := file.Read(chunk)
		if int64(k) > room {
			return u.tooLarge(), nil, false
		}
		if k > 0 {
			if _, werr := fw.Write(chunk[:k]); werr != nil {
				return reply{}, werr, false
			}
			n += int64(k)
		}
		if rerr == io.EOF {
			return reply{}, nil, true
		}
		if rerr != nil {
			return u.readErr(rerr), nil, false
		}
	}
}

// start opens the upstream request with the pipe's reading end as its body.
func (u *upload) start() {
	pr, pw := io.Pipe()
	u.pw = pw
	u.mw = multipart.NewWriter(pw)
	u.result = make(chan upstreamResult, 1)
	// A streamed body cannot be sent twice, so an upload gets no failover: one key, chosen
	// like any call's, whose answer still updates the key's state.
	ctx, lease := u.call.Keys.Lease(u.c.Request.Context())
	ctx, cancel := context.WithCancel(ctx)
	u.cancel = cancel
	u.lease = lease
	call := platform.Call{
		Method: http.MethodPost, Path: AssetsPath, BodyReader: pr,
		ContentType: u.mw.FormDataContentType(), Accept: "application/json",
		Key: lease.Key(), RequestID: u.call.RequestID,
	}
	plat := u.routes.platform
	go func() {
		var res upstreamResult
		req, err := plat.NewOpenAPIRequest(ctx, call)
		if err == nil {
			res.resp, res.err = plat.Do(req)
		} else {
			res.err = err
		}
		lease.Done(res.resp, res.err)
		// Whatever the platform said, it takes no more bytes; unblock the copy.
		pr.CloseWithError(errUpstreamAnswered)
		u.result <- res
	}()
}

// finish ends the upload. With a local reply (the client's fault) or a write error before
// the body was complete, the upstream request is aborted and the local reply wins; otherwise
// the platform's answer is judged and, on success, the asset's owner recorded.
func (u *upload) finish(local reply, writeErr error) reply {
	defer u.cancel()
	aborted := local.status != 0 || local.clientGone
	if aborted {
		u.pw.CloseWithError(errUploadAborted)
		u.cancel()
		res := <-u.result
		if res.resp != nil {
			res.resp.Body.Close()
		}
		return local
	}
	if writeErr != nil {
		u.pw.CloseWithError(writeErr)
	} else {
		u.pw.Close()
	}
	res := <-u.result
	if res.err != nil {
		return transportReply(res.err)
	}
	defer res.resp.Body.Close()
	out := u.routes.judge(u.call, res.resp)
	if !out.success || !u.call.Shared {
		return out
	}
	if alt, ok := u.routes.recordOwner(u.c.Request.Context(), u.call, u.lease.Fingerprint(), out.body, u.ttl()); !ok {
		return alt
	}
	return out
}

// ttl is the lifetime asked for, used for the ownership record when the platform's answer
// carries no usable expires_at.
func (u *upload) ttl() time.Duration {
	switch {
	case u.ttlHours > int(maxOwnershipTTL/time.Hour):
		return maxOwnershipTTL // also keeps the multiplication below from overflowing
	case u.ttlHours > 0:
		return time.Duration(u.ttlHours) * time.Hour
	}
	return defaultAssetTTL
}

// filePartHeader rebuilds the file part's headers from the client's filename and content
// type, both cleaned; nothing else of the client's part headers is kept.
func filePartHeader(p *multipart.Part) textproto.MIMEHeader {
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="file"; filename="`+quoteEscape(cleanFilename(p.FileName()))+`"`)
	ct := "application/octet-stream"
	if mt, params, err := mime.ParseMediaType(p.Header.Get("Content-Type")); err == nil {
		if f := mime.FormatMediaType(mt, params); f != "" {
			ct = f
		}
	}
	h.Set("Content-Type", ct)
	return h
}

// cleanFilename keeps the last path element, printable characters only, at most 255 bytes.
func cleanFilename(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	var b strings.Builder
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > 255 {
			break
		}
		b.WriteRune(r)
	}
	if s := b.String(); s != "" && s != "." && s != ".." {
		return s
	}
	return "upload"
}

func quoteEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// idleDeadlineReader pushes the connection's read deadline forward as the body arrives, so a
// client that stops sending mid-upload is cut after the idle time instead of holding its
// concurrency slot and an upstream connection for ever. The deadline is moved at most every
// quarter of the idle time (and at most once a second), not on every small read.
type idleDeadlineReader struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration
	last time.Time
}

func (d *idleDeadlineReader) Read(p []byte) (int, error) {
	if now := time.Now(); now.Sub(d.last) >= min(time.Second, d.idle/4) {
		_ = d.rc.SetReadDeadline(now.Add(d.idle)) // unsupported writers just keep no deadline
		d.last = now
	}
	return d.r.Read(p)
}
