package gss

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"
)

// issue makes a certificate for key's public half, signed by parent (self
// when nil).
func issue(t testing.TB, cn string, key crypto.Signer, parent *x509.Certificate, parentKey crypto.Signer) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		BasicConstraintsValid: true,
		IsCA:                  parent == nil,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newKey(t testing.TB) crypto.Signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// party is a credential under the test CA.
type party struct {
	cert tls.Certificate
	leaf *x509.Certificate
	key  crypto.Signer
}

type pki struct {
	ca    *x509.Certificate
	caKey crypto.Signer
}

func newPKI(t testing.TB) *pki {
	k := newKey(t)
	return &pki{ca: issue(t, "Test CA", k, nil, nil), caKey: k}
}

func (p *pki) party(t testing.TB, cn string) party {
	k := newKey(t)
	leaf := issue(t, cn, k, p.ca, p.caKey)
	return party{cert: tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: k, Leaf: leaf}, leaf: leaf, key: k}
}

// verify accepts chains that end at the test CA.
func (p *pki) verify(chain []*x509.Certificate) error {
	last := chain[len(chain)-1]
	if err := last.CheckSignatureFrom(p.ca); err != nil {
		return errors.New("unknown CA")
	}
	return nil
}

// run drives an initiator and an acceptor to the end of their exchange
// and returns the tokens that went each way.
func run(t *testing.T, ini, acc *Context) (tokens int, err error) {
	t.Helper()
	var in []byte
	iniDone, accDone := false, false
	for !iniDone || !accDone {
		if !iniDone {
			out, done, err := ini.Step(in)
			if err != nil {
				return tokens, err
			}
			iniDone = done
			in = out
			if len(out) == 0 {
				if !accDone && done {
					return tokens, errors.New("initiator ended without a token for the acceptor")
				}
				continue
			}
			tokens++
		}
		if !accDone {
			out, done, err := acc.Step(in)
			if err != nil {
				return tokens, err
			}
			accDone = done
			in = out
			if len(out) > 0 {
				tokens++
			} else if !done {
				return tokens, errors.New("acceptor wants more without a token")
			}
		}
	}
	return tokens, nil
}

func TestExchange(t *testing.T) {
	p := newPKI(t)
	alice, host := p.party(t, "alice"), p.party(t, "host/localhost")
	for _, tt := range []struct {
		name     string
		version  uint16
		delegate bool
	}{
		{"tls13", tls.VersionTLS13, false},
		{"tls13 delegation", tls.VersionTLS13, true},
		{"tls12", tls.VersionTLS12, false},
		{"tls12 delegation", tls.VersionTLS12, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var reqKey crypto.Signer
			ini := NewInitiator(Config{Certificate: alice.cert, VerifyPeer: p.verify, Delegate: tt.delegate,
				MinVersion: tt.version,
				SignRequest: func(csr []byte) ([]byte, error) {
					r, err := x509.ParseCertificateRequest(csr)
					if err != nil {
						return nil, err
					}
					c := issue(t, "alice/proxy", &pubOnly{r.PublicKey.(crypto.PublicKey), alice.key}, alice.leaf, alice.key)
					return c.Raw, nil
				}})
			ini.conn = tlsMax(ini, tt.version)
			acc := NewAcceptor(Config{Certificate: host.cert, VerifyPeer: p.verify,
				NewRequest: func(peer *x509.Certificate) ([]byte, crypto.Signer, error) {
					reqKey = newKey(t)
					csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "req"}}, reqKey)
					return csr, reqKey, err
				}})
			if _, err := run(t, ini, acc); err != nil {
				t.Fatal(err)
			}
			if got := acc.Peer()[0].Subject.CommonName; got != "alice" {
				t.Errorf("acceptor's peer %q", got)
			}
			if got := ini.Peer()[0].Subject.CommonName; got != "host/localhost" {
				t.Errorf("initiator's peer %q", got)
			}
			d := acc.Delegated()
			if tt.delegate != (d != nil) {
				t.Fatalf("delegated %v, want %v", d != nil, tt.delegate)
			}
			if d != nil && (!publicKeyMatches(d.Chain[0].PublicKey, reqKey.Public()) || d.Chain[1].Subject.CommonName != "alice") {
				t.Errorf("delegated chain %v", d.Chain)
			}
			// Messages both ways, in several tokens.
			for i, msg := range []string{"USER :globus-mapping:\r\n", "PASS \r\n", strings.Repeat("x", 40000)} {
				tok, err := ini.Wrap([]byte(msg))
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(tok, []byte("globus-mapping")) {
					t.Errorf("token %d carries its message in the clear", i)
				}
				got, err := acc.Unwrap(tok)
				if err != nil || string(got) != msg {
					t.Fatalf("unwrap %d: %d bytes, %v", i, len(got), err)
				}
				back, err := acc.Wrap([]byte("230 ok " + msg))
				if err != nil {
					t.Fatal(err)
				}
				got, err = ini.Unwrap(back)
				if err != nil || string(got) != "230 ok "+msg {
					t.Fatalf("reply %d: %d bytes, %v", i, len(got), err)
				}
			}
		})
	}
}

// pubOnly signs nothing: it stands for a requested key when only its
// public half is known (the certificate is signed by the parent).
type pubOnly struct {
	pub crypto.PublicKey
	crypto.Signer
}

func (p *pubOnly) Public() crypto.PublicKey { return p.pub }

// tlsMax caps the initiator's TLS version, to test TLS 1.2 exchanges.
func tlsMax(c *Context, v uint16) *tls.Conn {
	cfg := c.tlsConfig()
	cfg.MaxVersion = v
	return tls.Client(c.tc, cfg)
}

func TestRefusedPeer(t *testing.T) {
	p, other := newPKI(t), newPKI(t)
	stranger, host := other.party(t, "mallory"), p.party(t, "host/localhost")
	ini := NewInitiator(Config{Certificate: stranger.cert, VerifyPeer: p.verify})
	acc := NewAcceptor(Config{Certificate: host.cert, VerifyPeer: p.verify})
	_, err := run(t, ini, acc)
	if err == nil || !strings.Contains(err.Error(), "unknown CA") {
		t.Fatalf("a stranger's exchange: %v", err)
	}
	if _, err := acc.Wrap([]byte("x")); err == nil {
		t.Fatal("wrap after a failed exchange")
	}
}

func TestDelegationRefused(t *testing.T) {
	p := newPKI(t)
	alice, host := p.party(t, "alice"), p.party(t, "host/localhost")
	ini := NewInitiator(Config{Certificate: alice.cert, VerifyPeer: p.verify, Delegate: true,
		SignRequest: func([]byte) ([]byte, error) { return nil, errors.New("no") }})
	acc := NewAcceptor(Config{Certificate: host.cert, VerifyPeer: p.verify})
	if _, err := run(t, ini, acc); err == nil {
		t.Fatal("an acceptor that takes no delegation took it")
	}
}

// TestHostileTokens: garbage as the first token, in the middle of the
// exchange and to Unwrap fails cleanly.
func TestHostileTokens(t *testing.T) {
	p := newPKI(t)
	alice, host := p.party(t, "alice"), p.party(t, "host/localhost")
	for _, tok := range [][]byte{[]byte("hello"), {22, 3, 1, 0, 200, 1}, bytes.Repeat([]byte{22, 3, 3, 0, 1, 0}, 10), {}} {
		acc := NewAcceptor(Config{Certificate: host.cert, VerifyPeer: p.verify})
		done := make(chan error, 1)
		go func() {
			_, _, err := acc.Step(tok)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("token %q: accepted", tok)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("token %q: Step hangs", tok)
		}
	}
	ini := NewInitiator(Config{Certificate: alice.cert, VerifyPeer: p.verify})
	acc := NewAcceptor(Config{Certificate: host.cert, VerifyPeer: p.verify})
	if _, err := run(t, ini, acc); err != nil {
		t.Fatal(err)
	}
	for _, tok := range [][]byte{nil, []byte("garbage"), {23, 3, 3, 0, 5, 1, 2, 3, 4, 5}, {23, 3, 3, 1, 0}} {
		if _, err := acc.Unwrap(tok); err == nil {
			t.Errorf("unwrap %q: no error", tok)
		}
	}
}

func FuzzUnwrap(f *testing.F) {
	p := newPKI(f)
	alice, host := p.party(f, "alice"), p.party(f, "host/localhost")
	f.Add([]byte{23, 3, 3, 0, 5, 1, 2, 3, 4, 5})
	f.Fuzz(func(t *testing.T, tok []byte) {
		ini := NewInitiator(Config{Certificate: alice.cert, VerifyPeer: p.verify})
		acc := NewAcceptor(Config{Certificate: host.cert, VerifyPeer: p.verify})
		if _, err := run(t, ini, acc); err != nil {
			t.Fatal(err)
		}
		acc.Unwrap(tok) // an error is fine; a panic or a hang is not
		if _, _, err := NewAcceptor(Config{Certificate: host.cert}).Step(tok); err == nil && len(tok) == 0 {
			t.Error("an empty first token taken")
		}
	})
}
