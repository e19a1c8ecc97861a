package config

import (
	"crypto/x509"
	"errors"
	"fmt"
)

// maxCAFileBytes bounds upstream.tls.ca_file: a bundle of a few hundred CA certificates.
const maxCAFileBytes = 1 << 20

// ReadCAFile returns the system's roots plus every certificate in the PEM file at path, the
// pool upstream.tls.ca_file asks the platform's certificate to chain to. A file holding no
// certificate is an error, so a wrong path to some other PEM (a key, say) is caught at load.
func ReadCAFile(path string) (*x509.CertPool, error) {
	pem, err := readBounded(path, maxCAFileBytes)
	if errors.Is(err, errTooLarge) {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxCAFileBytes)
	}
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool() // no system roots (a scratch container): the file alone
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New(path + ": no PEM certificate in it")
	}
	return pool, nil
}
