package platformsim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"time"
)

// Certificate is a server certificate for the loopback names, signed by a CA made for it
// alone, in PEM. The CA's key is dropped once the certificate is signed: no other certificate
// can ever chain to it.
type Certificate struct {
	CertPEM, KeyPEM, CAPEM []byte
}

// NewCertificate makes a Certificate. The simulator serves --simulate-upstream h2 with one,
// and the benchmark its --upstream h2.
func NewCertificate() (Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Certificate{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "modelgate simulated platform CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(30 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return Certificate{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Certificate{}, err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(30 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return Certificate{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Certificate{}, err
	}
	encode := func(kind string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}) }
	return Certificate{CertPEM: encode("CERTIFICATE", leafDER), KeyPEM: encode("EC PRIVATE KEY", keyDER), CAPEM: encode("CERTIFICATE", caDER)}, nil
}

// makeCert is NewCertificate as the embedded simulator uses it: the TLS certificate, and a
// pool holding only its CA, which modelgate's transport then trusts alone.
func makeCert() (tls.Certificate, *x509.CertPool, error) {
	c, err := NewCertificate()
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(c.CAPEM)
	return cert, roots, nil
}
