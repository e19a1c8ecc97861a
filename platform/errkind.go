package platform

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"
)

// IsDialError reports whether err is a failure to connect: no request left, so the call
// may be tried again whatever it was.
func IsDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// ErrorKind names a transport failure for logs and metrics (bounded label values).
func ErrorKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &ne) && ne.Timeout():
		// Before the dial check: a connect that timed out (a blackholed platform) is a
		// gateway timeout, 504, like a platform that does not answer; a refused one is 502.
		return "timeout"
	case isTrustError(err):
		// Before the dial check: the handshake runs inside the dial. A platform whose
		// certificate is not trusted is a configuration fault (upstream.tls.ca_file), not a
		// platform that is down, and the operator should be able to tell the two apart.
		return "tls"
	case IsDialError(err):
		return "dial"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF):
		return "reset"
	}
	return "other"
}

// isTrustError reports whether err is the platform's certificate failing verification: an
// unknown issuer, a wrong host name, or a certificate not valid now.
func isTrustError(err error) bool {
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid)
}
