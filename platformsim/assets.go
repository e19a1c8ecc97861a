package platformsim

import (
	"crypto/subtle"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
)

// maxUpload is the platform's per-file limit: 100 MB.
const maxUpload = 100 * 1000 * 1000

// maxFieldSize bounds a non-file form field.
const maxFieldSize = 1024

type asset struct {
	owner   string
	expires time.Time
	data    assetJSON
}

type assetJSON struct {
	AssetID          string `json:"asset_id"`
	AssetURI         string `json:"asset_uri"`
	URL              string `json:"url"`
	ContentURL       string `json:"content_url"`
	SignedURL        string `json:"signed_url"`
	MediaType        string `json:"media_type"`
	MimeType         string `json:"mime_type"`
	SizeBytes        int64  `json:"size_bytes"`
	Purpose          string `json:"purpose"`
	Persistent       bool   `json:"persistent"`
	ExpiresAt        string `json:"expires_at"`
	Status           string `json:"status"`
	OriginalFilename string `json:"original_filename"`
}

// countingReader counts what passes through, so an upload's size is known without keeping it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// upload is what the sim learned from a multipart body.
type upload struct {
	fields   map[string]string
	names    []string
	hasFile  bool
	filename string
	fileType string
	size     int64
	tooLarge bool
}

var errBadForm = errors.New("bad multipart form")

// readUpload streams the multipart body: the file part is counted and discarded.
func readUpload(r *http.Request) (*upload, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, errBadForm
	}
	u := &upload{fields: map[string]string{}}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return u, nil
		}
		if err != nil {
			return u, errBadForm
		}
		name := part.FormName()
		u.names = append(u.names, name)
		if name == "file" {
			if u.hasFile {
				return u, errors.New("only one file part is allowed")
			}
			u.hasFile, u.filename, u.fileType = true, part.FileName(), part.Header.Get("Content-Type")
			n, err := io.Copy(io.Discard, io.LimitReader(part, maxUpload+1))
			u.size = n
			if n > maxUpload {
				u.tooLarge = true
				return u, nil
			}
			if err != nil {
				return u, errBadForm
			}
			continue
		}
		v, err := io.ReadAll(io.LimitReader(part, maxFieldSize+1))
		if err != nil || len(v) > maxFieldSize {
			return u, errors.New("form field " + name + " is too long")
		}
		u.fields[name] = string(v)
	}
}

// serveUpload is POST /api/open/v2/assets.
func (s *Sim) serveUpload(w http.ResponseWriter, r *http.Request) {
	rec := newRecord(r)
	if r.Method != http.MethodPost {
		s.addRecord(rec)
		w.Header().Set("Allow", http.MethodPost)
		writeEnvelope(w, http.StatusMethodNotAllowed, codeBusiness, "method not allowed", nil)
		return
	}
	key := s.bearerKey(r)
	if key == "" {
		s.addRecord(rec)
		writeEnvelope(w, http.StatusUnauthorized, codeNotLoggedIn, "not logged in", nil)
		return
	}
	body := &countingReader{r: r.Body}
	r.Body = io.NopCloser(body)
	u, err := readUpload(r)
	rec.BodySize = body.n
	if u != nil {
		rec.FormFields, rec.FileSize = u.names, u.size
	}
	s.addRecord(rec)

	rep, scripted := s.dequeue(r)
	if scripted && rep.replaces() {
		s.send(w, r, rep.answer(), rep)
		return
	}
	var a answer
	switch {
	case u != nil && u.tooLarge:
		a = envelopeAnswer(http.StatusRequestEntityTooLarge, codeBusiness, "file exceeds the 100 MB limit", nil)
	case err != nil:
		a = envelopeAnswer(http.StatusBadRequest, codeBusiness, err.Error(), nil)
	default:
		a = s.storeAsset(u, key)
	}
	s.send(w, r, a, rep)
}

// storeAsset validates the fields as the specification states and keeps the asset for key.
func (s *Sim) storeAsset(u *upload, key string) answer {
	bad := func(msg string) answer { return envelopeAnswer(http.StatusBadRequest, codeBusiness, msg, nil) }
	if !u.hasFile {
		return bad("file is required")
	}
	mimeType := u.fileType
	if mimeType == "" || mimeType == "application/octet-stream" {
		if t := mime.TypeByExtension(path.Ext(u.filename)); t != "" {
			mimeType = t
		} else {
			mimeType = "application/octet-stream"
		}
	}
	mediaType := u.fields["media_type"]
	switch mediaType {
	case "image", "video", "audio", "file":
	case "":
		mediaType = "file"
		for _, m := range []string{"image", "video", "audio"} {
			if strings.HasPrefix(mimeType, m+"/") {
				mediaType = m
			}
		}
	default:
		return bad("media_type must be one of image, video, audio, file")
	}
	purpose := u.fields["purpose"]
	switch purpose {
	case "":
		purpose = "temp_input"
	case "temp_input":
	default:
		return bad("purpose must be temp_input")
	}
	ttl := 48
	if v, ok := u.fields["ttl_hours"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 24*365 {
			return bad("ttl_hours must be an integer of at least 1")
		}
		ttl = n
	}

	id := s.nextID("ast")
	expires := s.opts.Now().Add(time.Duration(ttl) * time.Hour).UTC().Truncate(time.Second)
	content := "https://assets.sim.invalid/" + id + "/" + url.PathEscape(u.filename)
	a := &asset{owner: key, expires: expires, data: assetJSON{
		AssetID: id, AssetURI: "asset://" + id, URL: content, ContentURL: content,
		SignedURL: content + "?expires=" + strconv.FormatInt(expires.Unix(), 10) + "&signature=sim-" + id,
		MediaType: mediaType, MimeType: mimeType, SizeBytes: u.size, Purpose: purpose, Persistent: false,
		ExpiresAt: expires.Format(time.RFC3339), Status: "confirmed", OriginalFilename: u.filename,
	}}
	s.mu.Lock()
	s.assets[id] = a
	s.mu.Unlock()
	return envelopeAnswer(http.StatusOK, codeOK, "upload succeeded", a.data)
}

// assetInfo shows an asset only to the key that uploaded it, and only until it expires; every
// refusal looks the same as a missing asset.
func (s *Sim) assetInfo(id, key string) answer {
	s.mu.Lock()
	a := s.assets[id]
	s.mu.Unlock()
	if a == nil || subtle.ConstantTimeCompare([]byte(a.owner), []byte(key)) != 1 || !s.opts.Now().Before(a.expires) {
		return envelopeAnswer(http.StatusOK, codeBusiness, "asset not found", nil)
	}
	return envelopeAnswer(http.StatusOK, codeOK, "success", a.data)
}
