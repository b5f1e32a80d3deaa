package gsi

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"strings"
	"testing"
	"time"
)

func TestVerify(t *testing.T) {
	root := newCA(t, "Test Root CA", nil)
	inter := newCA(t, "Test Intermediate CA", &root)
	other := newCA(t, "Other CA", nil)
	alice := newEEC(t, root, "Alice", nil)
	bob := newEEC(t, inter, "Bob", nil)
	mallory := newEEC(t, other, "Mallory", nil)
	revoked := newEEC(t, root, "Revoked", nil)
	revokedCA := newCA(t, "Revoked Intermediate CA", &root)
	underRevoked := newEEC(t, revokedCA, "Carol", nil)
	expired := newEEC(t, root, "Old", func(c *x509.Certificate) { c.NotAfter = t0.Add(-time.Hour) })
	early := newEEC(t, root, "Early", func(c *x509.Certificate) { c.NotBefore = t0.Add(time.Hour) })

	crl := func(issuer testCert, next time.Time, serials ...*big.Int) *x509.RevocationList {
		var entries []x509.RevocationListEntry
		for _, s := range serials {
			entries = append(entries, x509.RevocationListEntry{SerialNumber: s, RevocationTime: t0.Add(-2 * time.Hour)})
		}
		der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
			Number: big.NewInt(1), ThisUpdate: t0.Add(-24 * time.Hour), NextUpdate: next,
			RevokedCertificateEntries: entries,
		}, issuer.cert, issuer.key)
		if err != nil {
			t.Fatal(err)
		}
		l, err := x509.ParseRevocationList(der)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	trust := NewTrust([]*x509.Certificate{root.cert}, []*x509.RevocationList{
		crl(root, t0.Add(24*time.Hour), revoked.cert.SerialNumber, revokedCA.cert.SerialNumber),
	})

	p1 := makeProxy(t, alice, proxySpec{})
	p2 := makeProxy(t, p1, proxySpec{})
	lim := makeProxy(t, alice, proxySpec{pci: pciBytes(t, -1, OIDLimitedProxy)})
	limLim := makeProxy(t, lim, proxySpec{pci: pciBytes(t, -1, OIDLimitedProxy)})
	fullUnderLim := makeProxy(t, lim, proxySpec{})
	legacy := makeProxy(t, alice, proxySpec{noPCI: true, cn: "proxy"})
	legacyLim := makeProxy(t, legacy, proxySpec{noPCI: true, cn: "limited proxy"})
	legacyFullUnderLim := makeProxy(t, legacyLim, proxySpec{noPCI: true, cn: "proxy"})
	legacyBadCN := makeProxy(t, legacy, proxySpec{noPCI: true, cn: "proxy", subject: mustName(t, pkix.Name{CommonName: "proxy"})})
	gsi3pci, _ := asn1.Marshal(struct {
		Policy struct{ Language asn1.ObjectIdentifier }
	}{struct{ Language asn1.ObjectIdentifier }{OIDInheritAll}})
	gsi3 := makeProxy(t, alice, proxySpec{pciOID: OIDProxyCertInfoGSI3, pci: gsi3pci})
	rfcUnderLegacy := makeProxy(t, legacy, proxySpec{})
	pl0 := makeProxy(t, alice, proxySpec{pci: pciBytes(t, 0, OIDInheritAll)})
	underPl0 := makeProxy(t, pl0, proxySpec{})
	pl1 := makeProxy(t, alice, proxySpec{pci: pciBytes(t, 1, OIDInheritAll)})
	pl1a := makeProxy(t, pl1, proxySpec{})
	pl1b := makeProxy(t, pl1a, proxySpec{})
	pl1aWide := makeProxy(t, pl1, proxySpec{pci: pciBytes(t, 5, OIDInheritAll)}) // cannot widen
	pl1bWide := makeProxy(t, pl1aWide, proxySpec{})
	wrongKey := makeProxy(t, alice, proxySpec{signer: newKey(t)})
	byMallory := makeProxy(t, mallory, proxySpec{subject: mustName(t, pkix.Name{Country: []string{"US"}, Organization: []string{"Grid"}, CommonName: "Mallory"})})
	otherSubject := makeProxy(t, alice, proxySpec{subject: mustName(t, pkix.Name{Country: []string{"US"}, Organization: []string{"Grid"}, CommonName: "Root", SerialNumber: "1"})})
	twoCN := func() testCert {
		sub, _ := appendCN(alice.cert.RawSubject, "1")
		sub, _ = appendCN(sub, "2")
		return makeProxy(t, alice, proxySpec{subject: sub})
	}()
	notCN := func() testCert {
		var seq asn1.RawValue
		asn1.Unmarshal(alice.cert.RawSubject, &seq)
		rdn, _ := asn1.MarshalWithParams([]attribute{{Type: asn1.ObjectIdentifier{2, 5, 4, 11}, Value: printable("42")}}, "set")
		seq.FullBytes, seq.Bytes = nil, append(append([]byte(nil), seq.Bytes...), rdn...)
		sub, _ := asn1.Marshal(seq)
		return makeProxy(t, alice, proxySpec{subject: sub})
	}()
	pExpired := makeProxy(t, alice, proxySpec{notAfter: t0.Add(-time.Minute)})
	pEarly := makeProxy(t, alice, proxySpec{notBefore: t0.Add(time.Minute)})
	certSign := makeProxy(t, alice, proxySpec{keyUsage: x509.KeyUsageCertSign})
	indep := makeProxy(t, alice, proxySpec{pci: pciBytes(t, -1, OIDIndependent)})
	restricted := makeProxy(t, alice, proxySpec{pci: pciBytes(t, -1, asn1.ObjectIdentifier{1, 2, 3, 4})})
	nonCrit := makeProxy(t, alice, proxySpec{nonCrit: true})
	garbledPCI := makeProxy(t, alice, proxySpec{pci: []byte{0x30, 0x03, 0x02, 0x01}})
	unknownCrit := makeProxy(t, alice, proxySpec{extraExtns: []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 2, 3, 99}, Critical: true, Value: []byte{5, 0}}}})
	long := []testCert{alice}
	for len(long) < 11 {
		long = append([]testCert{makeProxy(t, long[0], proxySpec{})}, long...)
	}
	// An EEC may be used at depth maxChain-1: a chain of exactly 10 passes.
	ok10 := long[1:]

	tests := []struct {
		name    string
		trust   *Trust
		chain   []testCert
		now     time.Time
		dn      string
		limited bool
		err     string
	}{
		{name: "end-entity certificate", chain: []testCert{alice}, dn: "/C=US/O=Grid/CN=Alice"},
		{name: "RFC proxy", chain: []testCert{p1, alice}, dn: "/C=US/O=Grid/CN=Alice"},
		{name: "proxy of a proxy", chain: []testCert{p2, p1, alice}, dn: "/C=US/O=Grid/CN=Alice"},
		{name: "with intermediate CA", chain: []testCert{makeProxy(t, bob, proxySpec{}), bob, inter}, dn: "/C=US/O=Grid/CN=Bob"},
		{name: "intermediate CA missing", chain: []testCert{bob}, err: `unknown CA "/C=US/O=Grid/CN=Test Intermediate CA"`},
		{name: "limited proxy", chain: []testCert{lim, alice}, dn: "/C=US/O=Grid/CN=Alice", limited: true},
		{name: "limited under limited", chain: []testCert{limLim, lim, alice}, dn: "/C=US/O=Grid/CN=Alice", limited: true},
		{name: "full proxy under a limited one", chain: []testCert{fullUnderLim, lim, alice}, err: "a full proxy signed by a limited proxy"},
		{name: "legacy proxy", chain: []testCert{legacy, alice}, dn: "/C=US/O=Grid/CN=Alice"},
		{name: "legacy limited proxy", chain: []testCert{legacyLim, legacy, alice}, dn: "/C=US/O=Grid/CN=Alice", limited: true},
		{name: "legacy full under legacy limited", chain: []testCert{legacyFullUnderLim, legacyLim, legacy, alice}, err: "a full proxy signed by a limited proxy"},
		{name: "legacy proxy named wrong", chain: []testCert{legacyBadCN, legacy, alice}, err: "subject is not its issuer's subject plus one CN"},
		{name: "draft GSI3 proxy", chain: []testCert{gsi3, alice}, dn: "/C=US/O=Grid/CN=Alice"},
		{name: "RFC proxy under legacy proxy", chain: []testCert{rfcUnderLegacy, legacy, alice}, err: "GSI does not mix proxy kinds"},
		{name: "path length 0 then a proxy", chain: []testCert{underPl0, pl0, alice}, err: "path length exceeded"},
		{name: "path length 0 alone", chain: []testCert{pl0, alice}, dn: "/C=US/O=Grid/CN=Alice"},
		{name: "path length 1 then one", chain: []testCert{pl1a, pl1, alice}, dn: "/C=US/O=Grid/CN=Alice"},
		{name: "path length 1 then two", chain: []testCert{pl1b, pl1a, pl1, alice}, err: "path length exceeded"},
		{name: "a proxy below cannot widen the path length", chain: []testCert{pl1bWide, pl1aWide, pl1, alice}, err: "path length exceeded"},
		{name: "expired EEC", chain: []testCert{makeProxy(t, expired, proxySpec{}), expired}, err: "expired at " + stamp(t0.Add(-time.Hour))},
		{name: "EEC not yet valid", chain: []testCert{early}, err: "not yet valid until " + stamp(t0.Add(time.Hour))},
		{name: "expired proxy", chain: []testCert{pExpired, alice}, err: "certificate 0 \"/C=US/O=Grid/CN=Alice/CN=" + proxyCN(pExpired.key.Public()) + "\": expired at"},
		{name: "proxy not yet valid", chain: []testCert{pEarly, alice}, err: "not yet valid until " + stamp(t0.Add(time.Minute))},
		{name: "now after the chain", chain: []testCert{p1, alice}, now: t0.Add(13 * time.Hour), err: "expired at"},
		{name: "wrong CA", chain: []testCert{makeProxy(t, mallory, proxySpec{}), mallory}, err: `unknown CA "/C=US/O=Grid/CN=Other CA"`},
		{name: "other trust", trust: NewTrust([]*x509.Certificate{other.cert}, nil), chain: []testCert{p1, alice}, err: `unknown CA "/C=US/O=Grid/CN=Test Root CA"`},
		{name: "proxy signed by the wrong key", chain: []testCert{wrongKey, alice}, err: "proxy 1 not signed by its issuer \"/C=US/O=Grid/CN=Alice\""},
		{name: "Mallory's proxy under Alice", chain: []testCert{byMallory, alice}, err: "not signed by its issuer"},
		{name: "subject not extending the issuer's", chain: []testCert{otherSubject, alice}, err: "subject is not its issuer's subject plus one CN"},
		{name: "two CNs added", chain: []testCert{twoCN, alice}, err: "subject is not its issuer's subject plus one CN"},
		{name: "OU added", chain: []testCert{notCN, alice}, err: "the last RDN is not a single CN"},
		{name: "over-long chain", chain: long, err: "11 certificates, more than the 10 accepted"},
		{name: "chain of 10", chain: ok10, dn: "/C=US/O=Grid/CN=Alice"},
		{name: "revoked EEC", chain: []testCert{makeProxy(t, revoked, proxySpec{}), revoked}, err: "it (serial " + revoked.cert.SerialNumber.String() + ") was revoked at"},
		{name: "revoked intermediate CA", chain: []testCert{underRevoked, revokedCA}, err: `its CA "/C=US/O=Grid/CN=Revoked Intermediate CA"`},
		{name: "expired CRL", trust: NewTrust([]*x509.Certificate{root.cert}, []*x509.RevocationList{crl(root, t0.Add(-time.Hour))}), chain: []testCert{alice}, err: "CRL of CA \"/C=US/O=Grid/CN=Test Root CA\" expired at"},
		{name: "CRL of another CA ignored", trust: NewTrust([]*x509.Certificate{root.cert}, []*x509.RevocationList{crl(other, t0.Add(-time.Hour), alice.cert.SerialNumber)}), chain: []testCert{alice}, dn: "/C=US/O=Grid/CN=Alice"},
		{name: "proxy with keyCertSign", chain: []testCert{certSign, alice}, err: "keyCertSign"},
		{name: "independent proxy", chain: []testCert{indep, alice}, err: "independent proxy"},
		{name: "restricted proxy", chain: []testCert{restricted, alice}, err: "restricted proxy (policy language 1.2.3.4)"},
		{name: "non-critical ProxyCertInfo", chain: []testCert{nonCrit, alice}, err: "not critical"},
		{name: "garbled ProxyCertInfo", chain: []testCert{garbledPCI, alice}, err: "malformed ProxyCertInfo"},
		{name: "unknown critical extension", chain: []testCert{unknownCrit, alice}, err: "unknown critical extension 1.2.3.99"},
		{name: "only proxies", chain: []testCert{p2, p1}, err: "no end-entity certificate"},
		{name: "empty", chain: nil, err: "no certificate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := trust
			if tc.trust != nil {
				tr = tc.trust
			}
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			id, err := tr.Verify(certs(tc.chain...), now)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Verify: err %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if id.DN != tc.dn || id.Limited != tc.limited {
				t.Errorf("Verify = %q limited=%v, want %q limited=%v", id.DN, id.Limited, tc.dn, tc.limited)
			}
			if want := earliestNotAfter(certs(tc.chain...)); !id.NotAfter.Equal(want) {
				t.Errorf("NotAfter = %v, want %v", id.NotAfter, want)
			}
		})
	}
}
