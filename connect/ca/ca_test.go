package ca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"ferry/connect/tunnel"
)

// A CA survives its PEM form; an old CA directory (before the CA moved
// into the store) reads as it was written.
func TestPEM(t *testing.T) {
	a, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if pub := a.Certificate().PublicKey.(*ecdsa.PublicKey); pub.Curve != elliptic.P256() {
		t.Fatalf("curve %v, want P-256", pub.Curve.Params().Name)
	}
	b, err := Parse(a.PEM())
	if err != nil || b.Pin() != a.Pin() {
		t.Fatalf("parsed CA: %v; pin the same: %v", err, err == nil && b.Pin() == a.Pin())
	}
	other, _ := Generate()
	for _, c := range []struct {
		name string
		pem  []byte
	}{
		{"junk", []byte("junk")},
		{"no key", tunnel.CertPEM(a.Certificate().Raw)},
		{"another's key", append(tunnel.CertPEM(a.Certificate().Raw), other.PEM()[len(tunnel.CertPEM(other.Certificate().Raw)):]...)},
	} {
		if _, err := Parse(c.pem); err == nil {
			t.Errorf("%s: parsed", c.name)
		}
	}

	dir := t.TempDir()
	if _, err := LoadDir(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("empty directory: %v, want fs.ErrNotExist", err)
	}
	keyPEM, _ := tunnel.KeyPEM(a.key)
	os.WriteFile(filepath.Join(dir, CertFile), tunnel.CertPEM(a.Certificate().Raw), 0o644)
	os.WriteFile(filepath.Join(dir, KeyFile), keyPEM, 0o600)
	if c, err := LoadDir(dir); err != nil || c.Pin() != a.Pin() {
		t.Fatalf("LoadDir: %v", err)
	}
	os.WriteFile(filepath.Join(dir, KeyFile), []byte("junk"), 0o600)
	if _, err := LoadDir(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a broken key file: %v; want an error, not fs.ErrNotExist", err)
	}
}

func TestIssue(t *testing.T) {
	c, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	cert, err := c.IssueAgent(&key.PublicKey, "ep-1", 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: c.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("agent certificate does not verify as a client's: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: c.Pool()}); err == nil {
		t.Fatal("an agent certificate verifies as a server's")
	}
	id, gen, err := tunnel.ParseAgent(cert)
	if err != nil || id != "ep-1" || gen != 3 {
		t.Fatalf("Agent = %q, %d, %v", id, gen, err)
	}
	if len(cert.DNSNames)+len(cert.IPAddresses)+len(cert.EmailAddresses)+len(cert.URIs) != 0 || cert.Subject.Organization != nil {
		t.Fatalf("agent certificate names more than its endpoint: %+v", cert.Subject)
	}
	if got := cert.NotAfter.Sub(cert.NotBefore); got > Lifetime+skew {
		t.Fatalf("lifetime %v", got)
	}
	if Renew(cert, time.Now()) || !Renew(cert, time.Now().Add(Lifetime/2+time.Hour)) {
		t.Fatal("Renew: want false now and true past half the life")
	}

	relay, err := c.Relay()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Leaf.Verify(x509.VerifyOptions{Roots: c.Pool(), DNSName: tunnel.RelayName}); err != nil {
		t.Fatalf("relay certificate: %v", err)
	}
	if _, _, err := tunnel.ParseAgent(relay.Leaf); err == nil {
		t.Fatal("the relay's certificate reads as an agent's")
	}
	ca, _ := x509.ParseCertificate(relay.Certificate[1])
	if tunnel.Pin(ca) != c.Pin() {
		t.Fatal("the relay's chain lacks the CA")
	}

	// A process's certificate names the process, and is no agent's.
	proc, err := c.IssueProcess(&key.PublicKey, "host:42")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := proc.Verify(x509.VerifyOptions{Roots: c.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("process certificate does not verify as a client's: %v", err)
	}
	if id, err := Process(proc); err != nil || id != "host:42" {
		t.Fatalf("Process = %q, %v", id, err)
	}
	if _, _, err := tunnel.ParseAgent(proc); err == nil {
		t.Fatal("a process's certificate reads as an agent's")
	}
	for _, other := range []*x509.Certificate{cert, relay.Leaf} {
		if _, err := Process(other); err == nil {
			t.Fatalf("certificate of %s reads as a process's", other.Subject.CommonName)
		}
	}
}
