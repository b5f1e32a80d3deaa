package gsi

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNewProxy(t *testing.T) {
	root := newCA(t, "Test Root CA", nil)
	alice := newEEC(t, root, "Alice", nil)
	trust := NewTrust([]*x509.Certificate{root.cert}, nil)
	user := alice.cred()
	now := time.Now()

	lim, err := NewProxyCredential(user, ProxyOptions{Limited: true, PathLen: NoPathLen})
	if err != nil {
		t.Fatal(err)
	}
	pl0, err := NewProxyCredential(user, ProxyOptions{PathLen: 0})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		issuer  *Credential
		o       ProxyOptions
		life    time.Duration
		limited bool
		pathLen int
		err     string
	}{
		{name: "default lifetime", issuer: user, o: ProxyOptions{PathLen: NoPathLen}, life: DefaultLifetime, pathLen: -1},
		{name: "one hour", issuer: user, o: ProxyOptions{Lifetime: time.Hour, PathLen: NoPathLen}, life: time.Hour, pathLen: -1},
		{name: "capped at the issuer", issuer: user, o: ProxyOptions{Lifetime: 10 * 365 * 24 * time.Hour, PathLen: NoPathLen}, life: time.Until(alice.cert.NotAfter), pathLen: -1},
		{name: "limited", issuer: user, o: ProxyOptions{Limited: true, PathLen: 3}, life: DefaultLifetime, limited: true, pathLen: 3},
		{name: "under a limited proxy is limited", issuer: lim, o: ProxyOptions{PathLen: NoPathLen}, life: DefaultLifetime, limited: true, pathLen: -1},
		{name: "path length 0 is written", issuer: user, o: ProxyOptions{PathLen: 0}, life: DefaultLifetime, pathLen: 0},
		{name: "under path length 0", issuer: pl0, o: ProxyOptions{PathLen: NoPathLen}, err: "allows no further proxy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cred, err := NewProxyCredential(tc.issuer, tc.o)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := cred.Chain[0]
			if _, ok := cred.Key.(*ecdsa.PrivateKey); !ok {
				t.Errorf("key %T for an ECDSA issuer", cred.Key)
			}
			wantSubject, _ := appendCN(tc.issuer.Chain[0].RawSubject, p.SerialNumber.String())
			if !bytes.Equal(p.RawSubject, wantSubject) || p.Subject.CommonName != proxyCN(cred.Key.Public()) {
				t.Errorf("subject %s, want issuer's + CN=%s", p.Subject, p.SerialNumber)
			}
			if got := p.NotAfter.Sub(now); got < tc.life-time.Minute || got > tc.life+time.Minute {
				t.Errorf("lifetime %v, want %v", got, tc.life)
			}
			if d := now.Sub(p.NotBefore); d < ClockSkew-time.Minute || d > ClockSkew+time.Minute {
				t.Errorf("NotBefore %v before now, want %v", d, ClockSkew)
			}
			pi := classify(p)
			if pi.kind != rfcProxy || !pi.critical || pi.limited != tc.limited || pi.pathLen != tc.pathLen || pi.hasPolicy {
				t.Errorf("classify = %+v", pi)
			}
			if p.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment || len(p.ExtKeyUsage) != 2 {
				t.Errorf("key usage %v %v, want the issuer's", p.KeyUsage, p.ExtKeyUsage)
			}
			id, err := trust.Verify(cred.Chain, now)
			if err != nil {
				t.Fatal(err)
			}
			if id.DN != "/C=US/O=Grid/CN=Alice" || id.Limited != tc.limited || cred.Identity() != id.DN {
				t.Errorf("Verify = %+v", id)
			}
		})
	}
}

func TestProxyIssuerKinds(t *testing.T) {
	root := newCA(t, "Test Root CA", nil)
	trust := NewTrust([]*x509.Certificate{root.cert}, nil)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	bob := sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: "Bob"}, KeyUsage: x509.KeyUsageDigitalSignature}, &root, rsaKey)
	cred, err := NewProxyCredential(bob.cred(), ProxyOptions{PathLen: NoPathLen})
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := cred.Key.(*rsa.PrivateKey); !ok || k.N.BitLen() != 2048 {
		t.Errorf("key %T for an RSA-2048 issuer", cred.Key)
	}
	if _, err := trust.Verify(cred.Chain, time.Now()); err != nil {
		t.Fatal(err)
	}
	legacy := makeProxy(t, bob, proxySpec{noPCI: true, cn: "proxy"})
	if _, err := NewProxyCredential(legacy.cred(bob), ProxyOptions{}); err == nil || !strings.Contains(err.Error(), "legacy") {
		t.Errorf("proxy of a legacy proxy: %v", err)
	}
}

func TestDelegation(t *testing.T) {
	root := newCA(t, "Test Root CA", nil)
	alice := newEEC(t, root, "Alice", nil)
	trust := NewTrust([]*x509.Certificate{root.cert}, nil)
	issuer, err := NewProxyCredential(alice.cred(), ProxyOptions{PathLen: NoPathLen})
	if err != nil {
		t.Fatal(err)
	}
	csr, key, err := NewRequest(1024)
	if err != nil {
		t.Fatal(err)
	}
	der, err := SignRequest(issuer, csr, ProxyOptions{Lifetime: time.Hour, Limited: true, PathLen: NoPathLen})
	if err != nil {
		t.Fatal(err)
	}
	cred, err := AcceptDelegation(der, key, issuer.Chain)
	if err != nil {
		t.Fatal(err)
	}
	id, err := trust.Verify(cred.Chain, time.Now())
	if err != nil || !id.Limited || len(id.Chain) != 3 {
		t.Fatalf("Verify = %+v, %v", id, err)
	}
	// A request whose signature does not check.
	bad := append([]byte(nil), csr...)
	bad[len(bad)-5] ^= 1
	if _, err := SignRequest(issuer, bad, ProxyOptions{}); err == nil || !strings.Contains(err.Error(), "bad signature") {
		t.Errorf("tampered request: %v", err)
	}
	if _, err := SignRequest(issuer, []byte("junk"), ProxyOptions{}); err == nil {
		t.Error("junk request accepted")
	}
	// The delegated proxy with another key.
	if _, err := AcceptDelegation(der, newKey(t), issuer.Chain); err == nil {
		t.Error("AcceptDelegation with the wrong key")
	}
}

func TestCredentialFiles(t *testing.T) {
	root := newCA(t, "Test Root CA", nil)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	alice := sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: "Alice"}, KeyUsage: x509.KeyUsageDigitalSignature}, &root, rsaKey)
	cred, err := NewProxyCredential(alice.cred(), ProxyOptions{PathLen: NoPathLen})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "x509up_u1")
	os.WriteFile(path, []byte("old"), 0o644)
	if err := cred.WriteProxyFile(path); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	b, _ := os.ReadFile(path)
	var types []string
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		types = append(types, blk.Type)
	}
	if got := strings.Join(types, ","); got != "CERTIFICATE,RSA PRIVATE KEY,CERTIFICATE" {
		t.Errorf("blocks %s, want cert, PKCS#1 key, chain", got)
	}
	if !bytes.Equal(b, cred.Encode()) {
		t.Error("file differs from Encode")
	}
	back, err := ReadCredential(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Chain) != 2 || !back.Chain[1].Equal(alice.cert) || back.Identity() != "/CN=Alice" || !back.NotAfter().Equal(cred.NotAfter()) {
		t.Errorf("read back %+v", back)
	}
	tc := back.TLSCertificate()
	if len(tc.Certificate) != 2 || tc.Leaf != back.Chain[0] || tc.PrivateKey != back.Key {
		t.Errorf("TLSCertificate %+v", tc)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temporary file left: %v", ents)
	}

	// PKCS#8 and the key first are read too; a key of another cert is not.
	k8, _ := x509.MarshalPKCS8PrivateKey(cred.Key)
	pk8 := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k8}), pemCert(cred.Chain[0].Raw)...)
	if c, err := ParseCredential(pk8); err != nil || len(c.Chain) != 1 {
		t.Errorf("PKCS#8 key first: %v", err)
	}
	wrong := append(pemCert(alice.cert.Raw), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k8})...)
	if _, err := ParseCredential(wrong); err == nil || !strings.Contains(err.Error(), "does not belong") {
		t.Errorf("mismatched key: %v", err)
	}
	enc := append(pemCert(alice.cert.Raw), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-256-CBC,00"}, Bytes: []byte{1}})...)
	if _, err := ParseCredential(enc); !errors.Is(err, ErrEncryptedKey) {
		t.Errorf("encrypted key: %v", err)
	}
	for _, junk := range [][]byte{nil, []byte("not pem"), pemCert(alice.cert.Raw), pemCert([]byte{1, 2, 3})} {
		if _, err := ParseCredential(junk); err == nil {
			t.Errorf("ParseCredential(%q) accepted", junk)
		}
	}
}

func TestDefaults(t *testing.T) {
	t.Setenv("X509_USER_PROXY", "")
	t.Setenv("X509_CERT_DIR", "")
	if got, want := DefaultProxyPath(), "/tmp/x509up_u"; !strings.HasPrefix(got, want) {
		t.Errorf("DefaultProxyPath = %q", got)
	}
	if got := DefaultCADir(); got != "/etc/grid-security/certificates" {
		t.Errorf("DefaultCADir = %q", got)
	}
	t.Setenv("X509_USER_PROXY", "/p")
	t.Setenv("X509_CERT_DIR", "/d")
	if DefaultProxyPath() != "/p" || DefaultCADir() != "/d" {
		t.Error("environment ignored")
	}
}

func TestLoadCADir(t *testing.T) {
	root := newCA(t, "Test Root CA", nil)
	dir := t.TempDir()
	der, _ := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: asn1BigOne(), ThisUpdate: t0, NextUpdate: t0.Add(time.Hour)}, root.cert, root.key)
	files := map[string][]byte{
		"1234abcd.0":              pemCert(root.cert.Raw),
		"1234abcd.r0":             pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}),
		"1234abcd.signing_policy": []byte("access_id_CA X509 '/CN=x'"),
		"1234abcd.namespaces":     []byte("TO Issuer"),
		"deadbeef.1":              []byte("garbage"),
		"README":                  []byte("hello"),
	}
	for n, b := range files {
		os.WriteFile(filepath.Join(dir, n), b, 0o644)
	}
	tr, err := LoadCADir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Roots()) != 1 || len(tr.cur.crls) != 1 || len(tr.Problems) != 1 || !strings.Contains(tr.Problems[0].Error(), "deadbeef.1") {
		t.Errorf("roots %d crls %d problems %v", len(tr.Roots()), len(tr.cur.crls), tr.Problems)
	}
	if _, err := LoadCADir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no CA certificate") {
		t.Errorf("empty dir: %v", err)
	}
	if _, err := LoadCADir(filepath.Join(dir, "nope")); err == nil {
		t.Error("missing dir accepted")
	}
}

// TestWithCRLDir: CRLs kept in a directory of their own revoke too.
func TestWithCRLDir(t *testing.T) {
	root := newCA(t, "Test Root CA", nil)
	alice := newEEC(t, root, "Alice", nil)
	caDir, crlDir := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(caDir, "1234abcd.0"), pemCert(root.cert.Raw), 0o644)
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: asn1BigOne(),
		ThisUpdate: t0.Add(-time.Hour), NextUpdate: t0.Add(time.Hour),
		RevokedCertificateEntries: []x509.RevocationListEntry{{SerialNumber: alice.cert.SerialNumber, RevocationTime: t0.Add(-time.Hour)}}},
		root.cert, root.key)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(crlDir, "1234abcd.r0"), pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}), 0o644)
	base, err := LoadCADir(caDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := base.Verify(certs(alice), t0); err != nil {
		t.Fatalf("without the CRL: %v", err)
	}
	withCRL, err := base.WithCRLDir(crlDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := withCRL.Verify(certs(alice), t0); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("with the CRL directory: %v", err)
	}
	if _, err := base.WithCRLDir(filepath.Join(crlDir, "nope")); err == nil {
		t.Error("a missing CRL directory was taken")
	}
}

// TestTrustFollowsDirs: a Trust of directories sees what changes in them
// once it looks again (a minute on): a CRL that fetch-crl renews, one that
// revokes a user, a CA added; a CA directory emptied by mistake leaves
// the last good reading in force.
func TestTrustFollowsDirs(t *testing.T) {
	root, other := newCA(t, "Test Root CA", nil), newCA(t, "Other CA", nil)
	alice, bob := newEEC(t, root, "Alice", nil), newEEC(t, other, "Bob", nil)
	caDir, crlDir := t.TempDir(), t.TempDir()
	crl := func(from time.Time, revoked ...*x509.Certificate) []byte {
		var entries []x509.RevocationListEntry
		for _, c := range revoked {
			entries = append(entries, x509.RevocationListEntry{SerialNumber: c.SerialNumber, RevocationTime: from})
		}
		der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(from.Unix()),
			ThisUpdate: from, NextUpdate: from.Add(time.Hour), RevokedCertificateEntries: entries}, root.cert, root.key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})
	}
	write := func(dir, name string, b []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(caDir, "1234abcd.0", pemCert(root.cert.Raw))
	write(crlDir, "1234abcd.r0", crl(t0.Add(-time.Minute)))
	base, err := LoadCADir(caDir)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := base.WithCRLDir(crlDir)
	if err != nil {
		t.Fatal(err)
	}
	verify := func(c testCert, at time.Time, want string) {
		t.Helper()
		_, err := tr.Verify(certs(c), at)
		if (want == "") != (err == nil) || want != "" && !strings.Contains(err.Error(), want) {
			t.Errorf("at %v: %v; want %q", at.Sub(t0), err, want)
		}
	}
	verify(alice, t0, "")
	verify(bob, t0, "unknown CA")
	// The CRL runs out; until it is renewed everyone is refused.
	verify(alice, t0.Add(2*time.Hour), "the CRL of CA")
	write(crlDir, "1234abcd.r0", crl(t0.Add(2*time.Hour)))
	verify(alice, t0.Add(2*time.Hour+30*time.Second), "the CRL of CA") // looked less than a minute ago
	verify(alice, t0.Add(2*time.Hour+2*time.Minute), "")
	// A new CRL revokes alice; a new CA brings bob in.
	write(crlDir, "1234abcd.r0", crl(t0.Add(2*time.Hour), alice.cert))
	write(caDir, "5678ef01.0", pemCert(other.cert.Raw))
	verify(alice, t0.Add(2*time.Hour+4*time.Minute), "revoked")
	verify(bob, t0.Add(2*time.Hour+4*time.Minute), "")
	// The CA directory emptied: the last good reading stays.
	os.Remove(filepath.Join(caDir, "1234abcd.0"))
	os.Remove(filepath.Join(caDir, "5678ef01.0"))
	verify(bob, t0.Add(2*time.Hour+6*time.Minute), "")
	if len(tr.Roots()) != 2 {
		t.Errorf("%d roots after the directory was emptied, want the 2 of before", len(tr.Roots()))
	}
}

func asn1BigOne() *big.Int { return big.NewInt(1) }

func TestOneLine(t *testing.T) {
	atv := func(oid asn1.ObjectIdentifier, tag int, v string) attribute {
		return attribute{Type: oid, Value: asn1.RawValue{Class: asn1.ClassUniversal, Tag: tag, Bytes: []byte(v)}}
	}
	name := func(rdns ...[]attribute) []byte {
		var body []byte
		for _, rdn := range rdns {
			b, err := asn1.MarshalWithParams(rdn, "set")
			if err != nil {
				t.Fatal(err)
			}
			body = append(body, b...)
		}
		b, _ := asn1.Marshal(asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSequence, IsCompound: true, Bytes: body})
		return b
	}
	var (
		c   = asn1.ObjectIdentifier{2, 5, 4, 6}
		o   = asn1.ObjectIdentifier{2, 5, 4, 10}
		ou  = asn1.ObjectIdentifier{2, 5, 4, 11}
		cn  = oidCommonName
		dc  = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
		uid = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
		em  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	)
	tests := []struct {
		name string
		der  []byte
		want string
	}{
		{"simple", name([]attribute{atv(c, asn1.TagPrintableString, "US")}, []attribute{atv(o, asn1.TagUTF8String, "Grid")}, []attribute{atv(cn, asn1.TagUTF8String, "Alice")}), "/C=US/O=Grid/CN=Alice"},
		{"DC UID email", name([]attribute{atv(dc, asn1.TagIA5String, "org")}, []attribute{atv(uid, asn1.TagUTF8String, "joe")}, []attribute{atv(em, asn1.TagIA5String, "a@b.c")}), "/DC=org/UID=joe/emailAddress=a@b.c"},
		{"slash plus backslash", name([]attribute{atv(cn, asn1.TagUTF8String, `host/a+b\c`)}), `/CN=host\/a\+b\c`},
		{"UTF-8", name([]attribute{atv(cn, asn1.TagUTF8String, "Zoé")}), `/CN=Zo\xC3\xA9`},
		{"BMPString", name([]attribute{atv(cn, asn1.TagBMPString, "\x00A")}), `/CN=\x00A`},
		{"GeneralString of 4-byte chars", name([]attribute{atv(cn, asn1.TagGeneralString, "\x00\x00\x00A\x00\x00\x00B")}), `/CN=AB`},
		{"multi-valued RDN", name([]attribute{atv(ou, asn1.TagUTF8String, "x"), atv(o, asn1.TagUTF8String, "y")}), "/O=y+OU=x"}, // DER sorts the SET
		{"unknown OID", name([]attribute{atv(asn1.ObjectIdentifier{1, 2, 3, 4}, asn1.TagUTF8String, "z")}), "/1.2.3.4=z"},
		{"empty", name(), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := OneLine(tc.der)
			if err != nil || got != tc.want {
				t.Errorf("OneLine = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	for _, bad := range [][]byte{nil, {0x30}, {0x31, 0}, {0x30, 0x02, 0x31, 0x00}, {0x30, 0x00, 0x00}} {
		if _, err := OneLine(bad); err == nil {
			t.Errorf("OneLine(%x) accepted", bad)
		}
	}
	// x509's own encoding of a pkix.Name reads the same.
	der := mustName(t, pkix.Name{Country: []string{"US"}, Organization: []string{"Grid"}, OrganizationalUnit: []string{"People"}, CommonName: "Alice"})
	if got, _ := OneLine(der); got != "/C=US/O=Grid/OU=People/CN=Alice" {
		t.Errorf("pkix name: %q", got)
	}
}
