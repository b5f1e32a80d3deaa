package server

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"os"
	"time"
)

// The control channel between a striped endpoint's front end and its data
// movers is TLS 1.3 in which both sides prove the same secret, the mover
// key: each derives an Ed25519 key pair from it and presents a
// certificate for that key, and each accepts only a peer whose
// certificate carries the same public key (and which proves it holds the
// private key, in the handshake). A stranger who connects to a mover gets
// no banner and no command: the handshake fails first.

// minMoverKey is the least secret a mover key file must hold.
const minMoverKey = 32

// LoadMoverKey reads a mover key file: at least 32 bytes of secret, the
// same file on the front end and on each of its movers (made with
// "head -c 32 /dev/urandom > mover.key").
func LoadMoverKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mover key: %w", err)
	}
	if len(b) < minMoverKey { // the bytes as they are: the same file on every host
		return nil, fmt.Errorf("mover key %s: %d bytes, want at least %d of secret (head -c 32 /dev/urandom > %s)", path, len(b), minMoverKey, path)
	}
	return b, nil
}

// MoverTLS is the TLS configuration of both ends of a front end's
// control channel to a mover: as a listener it demands the peer's
// certificate, as a dialer it checks the mover's.
func MoverTLS(key []byte) (*tls.Config, error) {
	if len(key) < minMoverKey {
		return nil, errors.New("mover key too short")
	}
	seed := sha256.Sum256(append([]byte("ferry mover key v1\x00"), key...))
	priv := ed25519.NewKeyFromSeed(seed[:])
	pub := priv.Public().(ed25519.PublicKey)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "ferry data mover"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(100, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: priv}},
		ClientAuth:   tls.RequireAnyClientCert,
		// The peer is checked below, by its key, not by a CA or a name.
		InsecureSkipVerify: true,
		MinVersion:         tls.VersionTLS13,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("no mover key certificate")
			}
			c, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return err
			}
			if k, ok := c.PublicKey.(ed25519.PublicKey); !ok || !k.Equal(pub) {
				return errors.New("peer holds another mover key")
			}
			return nil
		},
	}, nil
}
