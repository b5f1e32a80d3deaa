package gsi

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"sync/atomic"
	"testing"
	"time"
)

// The tests' clock: every Go-made certificate is valid around t0, now.
var t0 = time.Now().UTC().Truncate(time.Second)

var serials atomic.Int64

// testCert is a certificate made in a test, with its key.
type testCert struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func (c testCert) cred(chain ...testCert) *Credential {
	cr := &Credential{Chain: []*x509.Certificate{c.cert}, Key: c.key}
	for _, x := range chain {
		cr.Chain = append(cr.Chain, x.cert)
	}
	return cr
}

func newKey(t testing.TB) crypto.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustName(t testing.TB, n pkix.Name) []byte {
	t.Helper()
	b, err := asn1.Marshal(n.ToRDNSequence())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sign makes a certificate from tmpl, signed by parent (nil: self-signed).
func sign(t testing.TB, tmpl *x509.Certificate, parent *testCert, key crypto.Signer) testCert {
	t.Helper()
	if key == nil {
		key = newKey(t)
	}
	if tmpl.SerialNumber == nil {
		tmpl.SerialNumber = big.NewInt(serials.Add(1) + 100)
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = t0.Add(-24 * time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = t0.Add(365 * 24 * time.Hour)
	}
	pc, pk := tmpl, key
	if parent != nil {
		pc, pk = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, pc, key.Public(), pk)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCert{c, key}
}

func newCA(t testing.TB, cn string, parent *testCert) testCert {
	return sign(t, &x509.Certificate{
		Subject:               pkix.Name{Country: []string{"US"}, Organization: []string{"Grid"}, CommonName: cn},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}, parent, nil)
}

func newEEC(t testing.TB, ca testCert, cn string, mod func(*x509.Certificate)) testCert {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{Country: []string{"US"}, Organization: []string{"Grid"}, CommonName: cn},
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	if mod != nil {
		mod(tmpl)
	}
	return sign(t, tmpl, &ca, nil)
}

// proxySpec describes a hand-made proxy, hostile or not.
type proxySpec struct {
	cn         string                // the added CN; "" = serial
	subject    []byte                // replaces issuer subject + CN
	pci        []byte                // nil: inheritAll, no path length
	pciOID     asn1.ObjectIdentifier // nil: RFC 3820
	noPCI      bool                  // legacy proxy
	nonCrit    bool
	keyUsage   x509.KeyUsage
	notBefore  time.Time
	notAfter   time.Time
	signer     crypto.Signer // nil: the issuer's key
	isCA       bool
	extraExtns []pkix.Extension
}

func pciBytes(t testing.TB, pathLen int, lang asn1.ObjectIdentifier) []byte {
	t.Helper()
	b, err := marshalPCI(pathLen, lang)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func makeProxy(t testing.TB, issuer testCert, s proxySpec) testCert {
	t.Helper()
	key := newKey(t)
	cn := s.cn
	if cn == "" {
		cn = proxyCN(key.Public())
	}
	subject := s.subject
	if subject == nil {
		var err error
		if subject, err = appendCN(issuer.cert.RawSubject, cn); err != nil {
			t.Fatal(err)
		}
	}
	tmpl := &x509.Certificate{
		SerialNumber:    big.NewInt(serials.Add(1) + 1000),
		RawSubject:      subject,
		NotBefore:       s.notBefore,
		NotAfter:        s.notAfter,
		KeyUsage:        x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | s.keyUsage,
		ExtraExtensions: s.extraExtns,
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = t0.Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = t0.Add(12 * time.Hour)
	}
	if s.isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	}
	if !s.noPCI {
		oid := s.pciOID
		if oid == nil {
			oid = OIDProxyCertInfo
		}
		v := s.pci
		if v == nil {
			v = pciBytes(t, -1, OIDInheritAll)
		}
		tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, pkix.Extension{Id: oid, Critical: !s.nonCrit, Value: v})
	}
	parent, signer := issuer.cert, issuer.key
	if s.signer != nil {
		// x509 refuses a key that is not the parent's: lie to it.
		fake := *issuer.cert
		fake.PublicKey, fake.SubjectKeyId = s.signer.Public(), nil
		parent, signer = &fake, s.signer
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCert{c, key}
}

func certs(cs ...testCert) []*x509.Certificate {
	out := make([]*x509.Certificate, len(cs))
	for i, c := range cs {
		out[i] = c.cert
	}
	return out
}
