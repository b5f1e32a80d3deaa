package gsi

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Credential is a certificate chain and the leaf's private key: a proxy
// (leaf = proxy, then its issuers up to the end-entity certificate and any
// intermediate CAs, never the root) or an end-entity certificate.
type Credential struct {
	Chain []*x509.Certificate
	Key   crypto.Signer
}

// ErrEncryptedKey is returned for a private key protected by a pass phrase:
// ferry reads only unencrypted keys (make a proxy with grid-proxy-init).
var ErrEncryptedKey = errors.New("private key is encrypted (ferry reads only unencrypted keys: make a proxy with grid-proxy-init, or decrypt the key with `openssl pkey`)")

// TLSCertificate returns the credential for crypto/tls: the whole chain,
// leaf first, and the key.
func (c *Credential) TLSCertificate() tls.Certificate {
	tc := tls.Certificate{PrivateKey: c.Key}
	for _, cert := range c.Chain {
		tc.Certificate = append(tc.Certificate, cert.Raw)
	}
	if len(c.Chain) > 0 {
		tc.Leaf = c.Chain[0]
	}
	return tc
}

// Identity is the DN of the end-entity certificate (the first of the
// chain that is not a proxy) in OpenSSL's one-line form, as grid-proxy-info
// prints it: "/C=US/O=Grid/CN=Alice".
func (c *Credential) Identity() string {
	if len(c.Chain) == 0 {
		return ""
	}
	eec := c.Chain[len(c.Chain)-1]
	for _, cert := range c.Chain {
		if classify(cert).kind == notProxy {
			eec = cert
			break
		}
	}
	dn, _ := OneLine(eec.RawSubject)
	return dn
}

// NotAfter is the earliest NotAfter of the chain: the credential is of no
// use after it.
func (c *Credential) NotAfter() time.Time {
	return earliestNotAfter(c.Chain)
}

func earliestNotAfter(chain []*x509.Certificate) time.Time {
	var t time.Time
	for i, cert := range chain {
		if i == 0 || cert.NotAfter.Before(t) {
			t = cert.NotAfter
		}
	}
	return t
}

// ReadCredential reads a proxy file: PEM certificate, private key (PKCS#1
// "RSA PRIVATE KEY", PKCS#8 "PRIVATE KEY" or SEC 1 "EC PRIVATE KEY"), then
// the chain's certificates. grid-proxy-init writes PKCS#8 with OpenSSL 3.
func ReadCredential(path string) (*Credential, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseCredential(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ReadCertKey reads a certificate file (usercert.pem, hostcert.pem; the
// end-entity certificate, then any intermediate CAs) and its unencrypted
// key file (userkey.pem, hostkey.pem).
func ReadCertKey(certFile, keyFile string) (*Credential, error) {
	cb, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	var chain []*x509.Certificate
	for rest := cb; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", certFile, err)
		}
		chain = append(chain, cert)
	}
	if len(chain) == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate", certFile)
	}
	var key crypto.Signer
	for rest := kb; key == nil; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			return nil, fmt.Errorf("%s: no PEM private key", keyFile)
		}
		if key, err = parseKeyBlock(blk); err != nil {
			return nil, fmt.Errorf("%s: %w", keyFile, err)
		}
	}
	c := &Credential{Chain: chain, Key: key}
	if err := c.checkKey(); err != nil {
		return nil, fmt.Errorf("%s and %s: %w", certFile, keyFile, err)
	}
	return c, nil
}

// ParseCredential parses the PEM of a proxy file (see ReadCredential):
// the first certificate is the leaf, the others its chain in order.
func ParseCredential(pemBytes []byte) (*Credential, error) {
	c := &Credential{}
	for rest := pemBytes; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if blk.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("certificate %d: %w", len(c.Chain), err)
			}
			c.Chain = append(c.Chain, cert)
			continue
		}
		key, err := parseKeyBlock(blk)
		if err != nil {
			return nil, err
		}
		if key != nil {
			if c.Key != nil {
				return nil, errors.New("more than one private key")
			}
			c.Key = key
		}
	}
	switch {
	case len(c.Chain) == 0:
		return nil, errors.New("no PEM certificate")
	case c.Key == nil:
		return nil, errors.New("no PEM private key")
	}
	if err := c.checkKey(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseKeyBlock returns the key in a PEM block, or nil for a block that is
// no private key.
func parseKeyBlock(blk *pem.Block) (crypto.Signer, error) {
	var (
		k   any
		err error
	)
	switch blk.Type {
	case "ENCRYPTED PRIVATE KEY":
		return nil, ErrEncryptedKey
	case "RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY":
		if blk.Headers["Proc-Type"] == "4,ENCRYPTED" {
			return nil, ErrEncryptedKey
		}
	default:
		return nil, nil
	}
	switch blk.Type {
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(blk.Bytes)
	default:
		k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", blk.Type, err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: a %T cannot sign", blk.Type, k)
	}
	return s, nil
}

// checkKey makes sure the key belongs to the leaf certificate.
func (c *Credential) checkKey() error {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	pub, ok := c.Key.Public().(equaler)
	if !ok || !pub.Equal(c.Chain[0].PublicKey) {
		return fmt.Errorf("the private key does not belong to the certificate %q", oneLineOrHex(c.Chain[0].RawSubject))
	}
	return nil
}

// Encode returns the credential as GCT writes a proxy file
// (globus_gsi_credential.c, globus_gsi_cred_write): the leaf certificate,
// its key, then the rest of the chain. An RSA key is written as PKCS#1
// "RSA PRIVATE KEY" (every GSI implementation reads it, the older ones
// nothing else), an ECDSA key as SEC 1 "EC PRIVATE KEY", an Ed25519 key as
// PKCS#8. A key of another type (a hardware signer) cannot be exported and
// is left out; WriteProxyFile refuses such a credential.
func (c *Credential) Encode() []byte {
	b, _ := c.encode()
	return b
}

func (c *Credential) encode() ([]byte, error) {
	if len(c.Chain) == 0 {
		return nil, errors.New("credential has no certificate")
	}
	var buf bytes.Buffer
	pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Chain[0].Raw})
	blk, err := keyBlock(c.Key)
	if err == nil {
		pem.Encode(&buf, blk)
	}
	for _, cert := range c.Chain[1:] {
		pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	}
	return buf.Bytes(), err
}

func keyBlock(k crypto.Signer) (*pem.Block, error) {
	switch k := k.(type) {
	case *rsa.PrivateKey:
		return &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}, nil
	case *ecdsa.PrivateKey:
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, err
		}
		return &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}, nil
	case ed25519.PrivateKey:
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return nil, err
		}
		return &pem.Block{Type: "PRIVATE KEY", Bytes: der}, nil
	}
	return nil, fmt.Errorf("cannot export a %T private key", k)
}

// WriteProxyFile writes Encode's bytes to path with mode 0600, atomically:
// a temporary file in the same directory, synced, then renamed over path.
func (c *Credential) WriteProxyFile(path string) error {
	b, err := c.encode()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write proxy %s: %w", path, err)
	}
	return nil
}

// DefaultProxyPath is where GSI tools look for the user's proxy:
// $X509_USER_PROXY, else /tmp/x509up_u<uid>.
func DefaultProxyPath() string {
	if p := os.Getenv("X509_USER_PROXY"); p != "" {
		return p
	}
	return "/tmp/x509up_u" + strconv.Itoa(os.Getuid())
}

// DefaultCADir is where GSI tools look for trusted CAs: $X509_CERT_DIR,
// else /etc/grid-security/certificates.
func DefaultCADir() string {
	if d := os.Getenv("X509_CERT_DIR"); d != "" {
		return d
	}
	return "/etc/grid-security/certificates"
}

// oneLineOrHex names a DN in messages even when it does not parse.
func oneLineOrHex(raw []byte) string {
	if s, err := OneLine(raw); err == nil {
		return s
	}
	return fmt.Sprintf("%x", raw)
}
