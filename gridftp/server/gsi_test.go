package server_test

import (
	"bufio"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/gridftp/server"
	"ferry/gsi/gss"
)

// testCA issues the certificates of a GSI test: a CA, then leaves.
type testCA struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func newTestKey(t testing.TB) crypto.Signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newTestCA(t testing.TB) *testCA {
	k := newTestKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ferry test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCA{cert: c, key: k}
}

// sign makes a certificate for pub named cn, signed by the CA (or, for a
// delegated proxy, by parent).
func (ca *testCA) sign(t testing.TB, cn string, pub crypto.PublicKey, parent *x509.Certificate, parentKey crypto.Signer) *x509.Certificate {
	if parent == nil {
		parent, parentKey = ca.cert, ca.key
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c
}

func (ca *testCA) credential(t testing.TB, cn string) (tls.Certificate, *x509.Certificate, crypto.Signer) {
	k := newTestKey(t)
	c := ca.sign(t, cn, k.Public(), nil, nil)
	return tls.Certificate{Certificate: [][]byte{c.Raw}, PrivateKey: k, Leaf: c}, c, k
}

// verify accepts a chain whose last certificate the CA signed and names
// its first certificate's issuer chain by the end entity's CN.
func (ca *testCA) verify(chain []*x509.Certificate) (string, error) {
	last := chain[len(chain)-1]
	if err := last.CheckSignatureFrom(ca.cert); err != nil {
		return "", errors.New("unknown CA")
	}
	return "/CN=" + last.Subject.CommonName, nil
}

// startGSI starts a server that takes GSI logins of the CA's users that
// the gridmap names.
func startGSI(t *testing.T, ca *testCA, gridmap map[string]string) *testEnv {
	hostCert, _, _ := ca.credential(t, "host/127.0.0.1")
	return startServer(t, func(s *server.Server) {
		s.Anonymous = false
		s.GSI = &server.GSI{
			Credential: hostCert,
			Verify:     ca.verify,
			Map: func(dn, want string) (string, bool) {
				u, ok := gridmap[dn]
				return u, ok && (want == "" || want == ":globus-mapping:" || want == u)
			},
			NewRequest: func(*x509.Certificate) ([]byte, crypto.Signer, error) {
				k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
				if err != nil {
					return nil, nil, err
				}
				csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, k)
				return csr, k, err
			},
		}
	})
}

// gsiConfig is a user's side of the exchange, delegating.
func gsiConfig(t testing.TB, ca *testCA, cn string) gss.Config {
	cert, leaf, key := ca.credential(t, cn)
	return gss.Config{Certificate: cert, Delegate: true,
		VerifyPeer: func(chain []*x509.Certificate) error { _, err := ca.verify(chain); return err },
		SignRequest: func(csr []byte) ([]byte, error) {
			r, err := x509.ParseCertificateRequest(csr)
			if err != nil {
				return nil, err
			}
			return ca.sign(t, cn+"/proxy", r.PublicKey, leaf, key).Raw, nil
		}}
}

func TestGSILogin(t *testing.T) {
	ca := newTestCA(t)
	env := startGSI(t, ca, map[string]string{"/CN=alice": "alice"})
	ctx := context.Background()

	c, err := client.Dial(ctx, env.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.AuthGSI(ctx, gsiConfig(t, ca, "alice")); err != nil {
		t.Fatal(err)
	}
	if err := c.Login(ctx, ":globus-mapping:", ""); err != nil {
		t.Fatal(err)
	}
	rep, err := c.Do(ctx, "SITE WHOAMI")
	if err != nil || rep.Text() != "alice" {
		t.Fatalf("SITE WHOAMI: %q, %v", rep.Text(), err)
	}
	if _, err := c.Do(ctx, "MKD /made"); err != nil {
		t.Fatal(err)
	}
	// Data channels: DCAU A with the delegated proxy by default; DCAU S
	// names the other end's identity instead.
	for _, tt := range []struct {
		cmd  string
		code int
	}{
		{"DCAU S /CN=bob", 200}, {"DCAU S", 501}, {"PROT P", 200}, {"DCAU A", 200}, {"DCSC D", 250}, {"PROT S", 200},
	} {
		rep, _ := c.Do(ctx, "%s", tt.cmd)
		if rep.Code != tt.code {
			t.Errorf("%s: %q, want %d", tt.cmd, rep.String(), tt.code)
		}
	}
	// A multi-line reply comes back whole through the protection.
	if rep, err := c.Do(ctx, "FEAT"); err != nil || len(rep.Lines) < 5 {
		t.Fatalf("FEAT: %v, %v", rep.Lines, err)
	}

	// The wire carries no command in the clear.
	raw := env.dial()
	raw.expect("AUTH GSSAPI", gridftp.CodeAuthNeedData)
	raw.expect("ADAT "+base64.StdEncoding.EncodeToString([]byte("not TLS")), gridftp.CodeAuthRejected)
	raw.expect("ADAT AAAA", gridftp.CodeBadSequence) // the failed exchange is over
}

func TestGSIRefused(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	env := startGSI(t, ca, map[string]string{"/CN=alice": "alice"})
	ctx := context.Background()
	for _, tt := range []struct {
		name, want string
		cfg        gss.Config
		user       string
	}{
		{"not in the gridmap", "530 No local mapping", gsiConfig(t, ca, "bob"), ":globus-mapping:"},
		{"another user than mapped", "530 No local mapping", gsiConfig(t, ca, "alice"), "root"},
		{"another CA", "unknown CA", gsiConfig(t, other, "alice"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := client.Dial(ctx, env.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = c.AuthGSI(ctx, tt.cfg)
			if err == nil {
				err = c.Login(ctx, tt.user, "")
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// TestGSIUnprotected: after AUTH every command must come wrapped, and
// every reply is.
func TestGSIUnprotected(t *testing.T) {
	ca := newTestCA(t)
	env := startGSI(t, ca, map[string]string{"/CN=alice": "alice"})
	c := env.dial()
	c.expect("AUTH GSSAPI", gridftp.CodeAuthNeedData)
	g := gss.NewInitiator(gsiConfig(t, ca, "alice"))
	var in []byte
	for {
		out, done, err := g.Step(in)
		if err != nil {
			t.Fatal(err)
		}
		c.send("ADAT " + base64.StdEncoding.EncodeToString(out))
		r := c.read()
		if done {
			if r.Code != gridftp.CodeAuthDone {
				t.Fatalf("last ADAT: %q", r.String())
			}
			break
		}
		tok, ok := strings.CutPrefix(r.Text(), "ADAT=")
		if r.Code != gridftp.CodeAuthMoreData || !ok {
			t.Fatalf("ADAT: %q", r.String())
		}
		if in, err = base64.StdEncoding.DecodeString(tok); err != nil {
			t.Fatal(err)
		}
	}
	open := func() gridftp.Reply {
		t.Helper()
		r := c.read()
		if r.Code != gridftp.CodePrivateReply {
			t.Fatalf("a reply in the clear after AUTH: %q", r.String())
		}
		tok, _ := base64.StdEncoding.DecodeString(r.Text())
		msg, err := g.Unwrap(tok)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := gridftp.ReadReply(bufio.NewReader(strings.NewReader(string(msg))))
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	c.send("PWD")
	if r := open(); r.Code != gridftp.CodeProtDenied {
		t.Fatalf("a clear command after AUTH: %q", r.String())
	}
	line, err := gridftp.SealCommand("USER :globus-mapping:", g.Wrap)
	if err != nil {
		t.Fatal(err)
	}
	c.send(line)
	if r := open(); r.Code != gridftp.CodeNeedPassword {
		t.Fatalf("USER: %q", r.String())
	}
	c.send("ENC bm90IGEgdG9rZW4=")
	if r := open(); r.Code != gridftp.CodeSyntaxError {
		t.Fatalf("a bad token: %q", r.String())
	}
}
