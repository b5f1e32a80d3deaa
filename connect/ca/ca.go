// Package ca is the service's private certificate authority for ferry
// connect: an ECDSA P-256 root, made once (Generate) and kept by the
// service in its PEM form (PEM, Parse), that issues short-lived client
// certificates to agents and to the service's processes, and the relay's
// server certificate. An agent's certificate names nothing but its
// endpoint's ID and the generation of the endpoint's setup keys it was
// paired with (tunnel.AgentSubject, which the agent checks too), so the
// relay can refuse the certificates of an endpoint whose key was issued
// again. A process's certificate names the process
// (common name) under the organizational unit ProcessUnit; processes show
// it to each other's relays to reach the agents connected there.
package ca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"ferry/connect/tunnel"
)

// Lifetimes.
const (
	// Lifetime is how long an issued certificate lasts; the relay renews
	// an agent's once half of it has passed.
	Lifetime     = 30 * 24 * time.Hour
	rootLifetime = 20 * 365 * 24 * time.Hour
	skew         = 5 * time.Minute // NotBefore lies this far back
)

// ProcessUnit is the organizational unit of a process's certificate.
const ProcessUnit = "ferry-process"

// Files of a CA directory, where the CA was kept before it moved into the
// service's database.
const (
	CertFile = "ca.pem"
	KeyFile  = "ca.key"
)

// CA issues certificates.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Generate makes a new CA.
func Generate() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "ferry connect CA"},
		NotBefore:             now.Add(-skew),
		NotAfter:              now.Add(rootLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return newCA(cert, key)
}

// PEM is the CA's certificate and then its private key, in PEM; it is
// secret.
func (c *CA) PEM() []byte {
	key, err := tunnel.KeyPEM(c.key)
	if err != nil {
		panic(err) // a P-256 key always marshals
	}
	return append(tunnel.CertPEM(c.cert.Raw), key...)
}

// Parse reads a CA written by PEM.
func Parse(b []byte) (*CA, error) {
	cert, err := tunnel.ParseCertPEM(b)
	if err != nil {
		return nil, fmt.Errorf("ca: %w", err)
	}
	_, rest := pem.Decode(b)
	key, err := tunnel.ParseKeyPEM(rest)
	if err != nil {
		return nil, fmt.Errorf("ca: %w", err)
	}
	return newCA(cert, key)
}

// LoadDir reads the CA kept in dir (CertFile and KeyFile); an error that
// is fs.ErrNotExist when dir holds none.
func LoadDir(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("ca: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("ca: %s without its key: %w", certPath, err)
	}
	c, err := Parse(append(certPEM, keyPEM...))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return c, nil
}

func newCA(cert *x509.Certificate, key *ecdsa.PrivateKey) (*CA, error) {
	if !cert.IsCA {
		return nil, errors.New("ca: the certificate is not a CA's")
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("ca: the key does not match the certificate")
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{cert: cert, key: key, pool: pool}, nil
}

func (c *CA) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Certificate is the CA's own certificate.
func (c *CA) Certificate() *x509.Certificate { return c.cert }

// Pool holds the CA's certificate, to verify what it issued.
func (c *CA) Pool() *x509.CertPool { return c.pool }

// Pin is the CA's pin (see tunnel.Pin).
func (c *CA) Pin() string { return tunnel.Pin(c.cert) }

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// IssueAgent certifies pub as the agent of endpointID for the given
// generation of the endpoint's setup keys.
func (c *CA) IssueAgent(pub crypto.PublicKey, endpointID string, generation int64) (*x509.Certificate, error) {
	if endpointID == "" {
		return nil, errors.New("ca: no endpoint")
	}
	return c.issue(pub, &x509.Certificate{
		Subject:     tunnel.AgentSubject(endpointID, generation),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// IssueProcess certifies pub as the service process processID.
func (c *CA) IssueProcess(pub crypto.PublicKey, processID string) (*x509.Certificate, error) {
	if processID == "" {
		return nil, errors.New("ca: no process")
	}
	return c.issue(pub, &x509.Certificate{
		Subject:     pkix.Name{CommonName: processID, OrganizationalUnit: []string{ProcessUnit}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// Process reads which process a certificate issued by IssueProcess names.
func Process(cert *x509.Certificate) (string, error) {
	ou := cert.Subject.OrganizationalUnit
	if len(ou) != 1 || ou[0] != ProcessUnit || cert.Subject.CommonName == "" || cert.Subject.SerialNumber != "" {
		return "", errors.New("ca: not a process's certificate")
	}
	return cert.Subject.CommonName, nil
}

// Relay makes the relay's server certificate, with a new key; its chain
// includes the CA's certificate, which the pin of a setup key matches.
func (c *CA) Relay() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err := c.issue(&key.PublicKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: tunnel.RelayName},
		DNSNames:    []string{tunnel.RelayName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{cert.Raw, c.cert.Raw}, PrivateKey: key, Leaf: cert}, nil
}

// issue signs tmpl, given its names and usage, for pub.
func (c *CA) issue(pub crypto.PublicKey, tmpl *x509.Certificate) (*x509.Certificate, error) {
	if _, ok := pub.(*ecdsa.PublicKey); !ok {
		return nil, errors.New("ca: want an ECDSA public key")
	}
	now := c.now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-skew), now.Add(Lifetime)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, pub, c.key)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// Renew reports whether cert is past half its life at now.
func Renew(cert *x509.Certificate, now time.Time) bool {
	return now.After(cert.NotBefore.Add(cert.NotAfter.Sub(cert.NotBefore) / 2))
}
