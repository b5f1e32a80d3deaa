package gridftp

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"

	"ferry/gsi/gss"
)

// Data channel security (DCAU A), as GCT's data channels do it: every
// data connection runs a GSI security context (gss.Over) in which the
// connecting side is the TLS client and the accepting side the TLS
// server, each presenting the session's data credential and checking the
// other's. Between ferry's ends (FEAT DATATLS), in the spirit of GCT's
// DCSC, a client hands both servers of a third-party transfer one
// credential of its own making (DCSC P), and each end accepts only a peer
// that presents that same certificate; after a GSI login the credential
// is the one the client delegated, and the peer must prove the same grid
// identity (or the subject of DCAU S). So a stranger that connects to a
// passive port gets nothing and injects nothing, and a PORT aimed at a
// service that is not the other end moves no payload. With PROT P the
// payload goes over TLS, with PROT C over the bare connection after the
// exchange, as GCT does; the exchange never reads past its own records,
// so bare payload that follows it at once is not lost to TLS's buffer.

// DataCredential is the certificate and key a session's data connections
// present, and how they check the other end's.
type DataCredential struct {
	cert tls.Certificate
	// verify checks the peer's chain; nil accepts only a peer that
	// presents cert itself.
	verify func(chain []*x509.Certificate) error

	once sync.Once
	dcsc string
	err  error
}

// PeerCheckedCredential is a data credential that presents cert and
// accepts the peers verify accepts: a GSI session's delegated proxy,
// checked against the session's identity.
func PeerCheckedCredential(cert tls.Certificate, verify func(chain []*x509.Certificate) error) *DataCredential {
	return &DataCredential{cert: cert, verify: verify}
}

// PeerChecked reports whether dc checks peers itself (a grid credential)
// rather than by its own certificate (a DCSC credential).
func (dc *DataCredential) PeerChecked() bool { return dc.verify != nil }

// NewDataCredential makes a one-time credential: an ECDSA P-256 key and a
// self-signed certificate valid for lifetime.
func NewDataCredential(lifetime time.Duration) (*DataCredential, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return newDataCredential(key, lifetime)
}

// NewRSADataCredential is NewDataCredential with an RSA 2048 key: what
// GCT's servers take in DCSC P (they read the key as RSA).
func NewRSADataCredential(lifetime time.Duration) (*DataCredential, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	return newDataCredential(key, lifetime)
}

func newDataCredential(key crypto.Signer, lifetime time.Duration) (*DataCredential, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "ferry data channel"},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(lifetime),
		// No extensions, as globus-url-copy's -data-cred auto
		// certificate: the chain a DCSC blob hands over is what a GCT
		// server trusts on its data channels, and OpenSSL takes a
		// self-signed certificate as that anchor when no key usage or
		// basic constraints say it may not sign, and then checks the
		// peer's identity like any other.
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &DataCredential{cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}}, nil
}

// ErrBadCredential reports a DCSC blob that holds no usable credential.
var ErrBadCredential = errors.New("gridftp: bad data channel credential")

// DCSC is the argument of "DCSC P": the certificate and the key in PEM,
// base64-encoded on one line.
func (dc *DataCredential) DCSC() (string, error) {
	dc.once.Do(func() {
		// GCT's layout: the certificate, its key (PKCS#1 for RSA), then
		// the chain, which the server trusts for the data channels: the
		// self-signed certificate again.
		keyBlock := &pem.Block{Type: "PRIVATE KEY"}
		if k, ok := dc.cert.PrivateKey.(*rsa.PrivateKey); ok {
			keyBlock.Type, keyBlock.Bytes = "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(k)
		} else if keyBlock.Bytes, dc.err = x509.MarshalPKCS8PrivateKey(dc.cert.PrivateKey); dc.err != nil {
			return
		}
		var b bytes.Buffer
		pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: dc.cert.Certificate[0]})
		pem.Encode(&b, keyBlock)
		pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: dc.cert.Certificate[0]})
		dc.dcsc = base64.StdEncoding.EncodeToString(b.Bytes())
	})
	return dc.dcsc, dc.err
}

// maxDCSC bounds a DCSC blob: a certificate chain and a key.
const maxDCSC = 64 << 10

// ParseDCSC reads the argument of "DCSC P": base64 of PEM blocks, the
// first certificate and a private key of it (PKCS#8, PKCS#1 or SEC 1); a
// credential that has expired or is not yet valid is refused.
func ParseDCSC(arg string, now time.Time) (*DataCredential, error) {
	if len(arg) > maxDCSC {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrBadCredential, maxDCSC)
	}
	raw, err := base64.StdEncoding.DecodeString(arg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCredential, err)
	}
	var certPEM, keyPEM []byte
	for rest := raw; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		switch {
		case blk.Type == "CERTIFICATE" && certPEM == nil:
			certPEM = pem.EncodeToMemory(blk)
		case (blk.Type == "PRIVATE KEY" || blk.Type == "RSA PRIVATE KEY" || blk.Type == "EC PRIVATE KEY") && keyPEM == nil:
			keyPEM = pem.EncodeToMemory(blk)
		}
	}
	if certPEM == nil || keyPEM == nil {
		return nil, fmt.Errorf("%w: want a certificate and its key in PEM", ErrBadCredential)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCredential, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadCredential, err)
		}
	}
	if now.Before(cert.Leaf.NotBefore) || now.After(cert.Leaf.NotAfter) {
		return nil, fmt.Errorf("%w: the certificate is valid from %s to %s", ErrBadCredential,
			cert.Leaf.NotBefore.UTC().Format(time.RFC3339), cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return &DataCredential{cert: cert}, nil
}

// ErrDataAuth reports a data connection whose other end did not prove the
// session's credential.
var ErrDataAuth = errors.New("gridftp: data connection not authenticated")

// SecureData does the TLS handshake of a fresh data connection with the
// credential; connector is the side that opened the TCP connection. It
// returns what carries the payload: the TLS connection when private (PROT
// P), else c itself. On failure c is closed.
//
// The exchange reads c one TLS record at a time (gss.RecordConn), never
// past its last record: the bare payload that the other end may send
// right after it is left to the caller, whichever way the data flows.
func SecureData(ctx context.Context, c net.Conn, dc *DataCredential, connector, private bool, timeout time.Duration) (net.Conn, error) {
	verify := dc.verify
	if verify == nil {
		verify = func(chain []*x509.Certificate) error {
			if !bytes.Equal(chain[0].Raw, dc.cert.Certificate[0]) {
				return ErrDataAuth
			}
			return nil
		}
	}
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	cfg := gss.Config{Certificate: dc.cert, VerifyPeer: verify, MinVersion: tls.VersionTLS12}
	if weaklySigned(dc.cert.Leaf) {
		// globus-url-copy -data-cred auto makes an MD5-signed
		// certificate. Under TLS 1.3 OpenSSL (GCT) will not present it to
		// a peer that cannot check MD5 signatures, which Go cannot; under
		// TLS 1.2 it does. Both ends hold the same certificate, so nothing
		// rests on its own signature.
		cfg.MaxVersion = tls.VersionTLS12
	}
	tc, err := gss.Over(ctx, c, cfg, connector, private)
	if err != nil {
		c.Close()
		if errors.Is(err, ErrDataAuth) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", ErrDataAuth, err)
	}
	if private {
		return tc, nil
	}
	return c, nil
}

// TCPConn finds the TCP connection under a data connection, through the
// TLS of an authenticated one.
func TCPConn(c net.Conn) (*net.TCPConn, bool) {
	for {
		switch x := c.(type) {
		case *net.TCPConn:
			return x, true
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return nil, false
		}
	}
}

// weaklySigned reports a certificate signed with MD5 or SHA-1.
func weaklySigned(c *x509.Certificate) bool {
	switch c.SignatureAlgorithm {
	case x509.MD5WithRSA, x509.SHA1WithRSA, x509.ECDSAWithSHA1, x509.DSAWithSHA1:
		return true
	}
	return false
}
