package gsi

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"
	"time"
)

// FuzzParseCredential feeds hostile PEM to ParseCredential and, when it
// parses, its chain to Verify: neither may panic.
func FuzzParseCredential(f *testing.F) {
	root := newCA(f, "Fuzz CA", nil)
	alice := newEEC(f, root, "Alice", nil)
	p1 := makeProxy(f, alice, proxySpec{})
	cred := p1.cred(alice)
	f.Add(cred.Encode())
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n"))
	trust := NewTrust([]*x509.Certificate{root.cert}, nil)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCredential(b)
		if err != nil {
			return
		}
		c.Identity()
		c.Encode()
		trust.Verify(c.Chain, t0)
	})
}

// FuzzVerify builds chains of arbitrary DER certificates (split on a
// marker) and verifies them: Verify, OneLine and classify must not panic.
func FuzzVerify(f *testing.F) {
	root := newCA(f, "Fuzz CA", nil)
	alice := newEEC(f, root, "Alice", nil)
	p1 := makeProxy(f, alice, proxySpec{pci: pciBytes(f, 2, OIDLimitedProxy)})
	legacy := makeProxy(f, alice, proxySpec{noPCI: true, cn: "proxy"})
	trust := NewTrust([]*x509.Certificate{root.cert}, nil)
	for _, chain := range [][]testCert{{p1, alice}, {legacy, alice}, {alice}} {
		var b []byte
		for _, c := range chain {
			b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.cert.Raw})...)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var chain []*x509.Certificate
		for rest := b; ; {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				break
			}
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				continue
			}
			OneLine(c.RawSubject)
			classify(c)
			chain = append(chain, c)
		}
		trust.Verify(chain, t0)
		trust.Verify(chain, t0.Add(time.Hour))
	})
}

// FuzzOneLine checks OneLine and the grid-mapfile parser on raw input.
func FuzzOneLine(f *testing.F) {
	f.Add(mustName(f, pkixAlice()))
	f.Fuzz(func(t *testing.T, b []byte) {
		OneLine(b)
		parseGridmapLine(string(b))
		parsePCI(b, false)
		parsePCI(b, true)
	})
}

func pkixAlice() pkix.Name {
	return pkix.Name{Country: []string{"US"}, Organization: []string{"Grid"}, CommonName: "Alice"}
}
