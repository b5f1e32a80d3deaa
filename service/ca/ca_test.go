package ca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLoadOrCreate(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v; want 0600", err, st.Mode())
	}
	b, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Pin() != b.Pin() {
		t.Fatal("a second start made another CA")
	}
	if pub := a.Certificate().PublicKey.(*ecdsa.PublicKey); pub.Curve != elliptic.P256() {
		t.Fatalf("curve %v, want P-256", pub.Curve.Params().Name)
	}
	// A broken key file is refused, not replaced.
	os.WriteFile(filepath.Join(dir, KeyFile), []byte("junk"), 0o600)
	if _, err := LoadOrCreate(dir); err == nil {
		t.Fatal("a broken key file was accepted")
	}
}

func TestIssue(t *testing.T) {
	c, err := LoadOrCreate(t.TempDir())
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
	id, gen, err := Agent(cert)
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
	if _, err := relay.Leaf.Verify(x509.VerifyOptions{Roots: c.Pool(), DNSName: RelayName}); err != nil {
		t.Fatalf("relay certificate: %v", err)
	}
	if _, _, err := Agent(relay.Leaf); err == nil {
		t.Fatal("the relay's certificate reads as an agent's")
	}
	ca, _ := x509.ParseCertificate(relay.Certificate[1])
	if Pin(ca) != c.Pin() {
		t.Fatal("the relay's chain lacks the CA")
	}
}
