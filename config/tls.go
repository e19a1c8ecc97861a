package config

import (
	"crypto/x509"
	"errors"
	"fmt"
)

// maxCAFileBytes bounds upstream.tls.ca_file: a bundle of a few hundred CA certificates.
const maxCAFileBytes = 1 << 20

// ReadCAFile returns the system's roots plus every certificate in the PEM file at path, the
// pool upstream.tls.ca_file asks the platform's certificate to chain to.
func ReadCAFile(path string) (*x509.CertPool, error) {
	pem, err := readCAPEM(path)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool() // no system roots (a scratch container): the file alone
	}
	pool.AppendCertsFromPEM(pem) // readCAPEM found a certificate in it
	return pool, nil
}

// readCAPEM reads the PEM file at path and checks that it holds a certificate, so a wrong
// path to some other PEM (a key, say) is caught at load. It is all validation needs: the
// system's roots are loaded once, by ReadCAFile when the transport is built, not on every
// load and reload.
func readCAPEM(path string) ([]byte, error) {
	pem, err := readBounded(path, maxCAFileBytes)
	if errors.Is(err, errTooLarge) {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxCAFileBytes)
	}
	if err != nil {
		return nil, err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return nil, errors.New(path + ": no PEM certificate in it")
	}
	return pem, nil
}
