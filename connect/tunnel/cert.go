package tunnel

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strconv"
)

// RelayName is the DNS name in the relay's certificate; agents check it
// whatever address they reach the relay by.
const RelayName = "ferry-relay"

// Pin is the unpadded base64url SHA-256 of a certificate: setup keys carry
// the pin of the service's CA, so that an agent that has nothing else yet
// can trust the relay.
func Pin(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// AgentSubject is the subject of the certificate of endpointID's agent,
// paired with the given generation of the endpoint's setup keys: the
// endpoint's ID as the common name, the generation as the serial number
// attribute, and nothing else.
func AgentSubject(endpointID string, generation int64) pkix.Name {
	return pkix.Name{CommonName: endpointID, SerialNumber: strconv.FormatInt(generation, 10)}
}

// ParseAgent reads whom an agent's certificate names (AgentSubject).
func ParseAgent(cert *x509.Certificate) (endpointID string, generation int64, err error) {
	generation, err = strconv.ParseInt(cert.Subject.SerialNumber, 10, 64)
	if err != nil || cert.Subject.CommonName == "" {
		return "", 0, errors.New("not an agent's certificate")
	}
	return cert.Subject.CommonName, generation, nil
}

// CertPEM encodes a DER certificate.
func CertPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// ParseCertPEM reads a PEM certificate.
func ParseCertPEM(b []byte) (*x509.Certificate, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(blk.Bytes)
}

// KeyPEM encodes a private key (PKCS #8).
func KeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseKeyPEM reads a PEM ECDSA private key (PKCS #8).
func ParseKeyPEM(b []byte) (*ecdsa.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, errors.New("no PEM private key")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("not an ECDSA key")
	}
	return ek, nil
}
