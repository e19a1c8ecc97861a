package translate

import (
	"net/url"
	"strings"
)

// The sources of Messages image and document blocks become data URLs and file URLs the
// platform fetches or decodes. They are checked here as Anthropic's API checks them, so what
// goes upstream is what the client could have sent Anthropic: base64 that decodes, a media
// type the block allows, and a URL on the web (a file:, data: or javascript: URL has no
// business reaching a platform that fetches what it is given).

// imageMediaTypes are the media types an image block may declare.
var imageMediaTypes = [...]string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// documentMediaTypes are those a base64 document may declare ("" is read as a PDF).
var documentMediaTypes = [...]string{"application/pdf", "text/plain"}

func allowedMediaType(mt string, allowed []string) bool {
	for _, a := range allowed {
		if mt == a {
			return true
		}
	}
	return false
}

// validBase64 reports whether s is standard base64 (RFC 4648 section 4), padded or not:
// what Anthropic's API accepts as inline data. It reads s once and allocates nothing, so an
// image of many megabytes is checked without a second copy.
func validBase64(s string) bool {
	body := strings.TrimRight(s, "=")
	pad := len(s) - len(body)
	switch {
	case len(body) == 0 || pad > 2:
		return false
	case pad > 0 && len(s)%4 != 0:
		return false
	case len(body)%4 == 1:
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/') {
			return false
		}
	}
	return true
}

// webURL reports whether s is an absolute http or https URL with a host.
func webURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return false
	}
	scheme := strings.ToLower(u.Scheme)
	return scheme == "http" || scheme == "https"
}

// checkSource checks an image or document block's source; param names the source.
func checkSource(typ, sourceType, mediaType, data, link, param string) *Error {
	switch sourceType {
	case "base64":
		allowed := imageMediaTypes[:]
		if typ == "document" {
			allowed = documentMediaTypes[:]
			if mediaType == "" {
				mediaType = "application/pdf"
			}
		}
		if !allowedMediaType(mediaType, allowed) {
			return badRequest(codeInvalidValue, param+".media_type", param+".media_type: Input should be "+quoteList(allowed))
		}
		if !validBase64(data) {
			return badRequest(codeInvalidValue, param+".data", param+".data: Input should be valid base64 data")
		}
	case "url":
		if !webURL(link) {
			return badRequest(codeInvalidValue, param+".url", param+".url: Input should be an http or https URL")
		}
	}
	return nil
}

func quoteList(items []string) string {
	var b strings.Builder
	for i, s := range items {
		switch {
		case i > 0 && i == len(items)-1:
			b.WriteString(" or ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString("'" + s + "'")
	}
	return b.String()
}
