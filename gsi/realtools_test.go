package gsi

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/internal/interoptest"
)

// needTools skips the test unless it runs with the peers (interoptest)
// and the programs are installed.
func needTools(t *testing.T, names ...string) {
	t.Helper()
	interoptest.Need(t)
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			interoptest.Missing(t, fmt.Sprintf("%s not found on PATH (Debian: openssl globus-proxy-utils)", name))
		}
	}
}

// realPKI is a CA, a user and a host certificate made by openssl, and a
// hashed CA directory with the CA's CRL, in a temporary directory.
type realPKI struct {
	dir, caDir string
}

func (p *realPKI) path(name string) string { return filepath.Join(p.dir, name) }

// run runs a program in the PKI's directory with X509_CERT_DIR set.
func (p *realPKI) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := p.try(name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func (p *realPKI) try(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "X509_CERT_DIR="+p.caDir, "X509_USER_PROXY="+filepath.Join(p.dir, "no-such-proxy"))
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

const caConf = `[ ca ]
default_ca = testca
[ testca ]
dir = .
database = index.txt
new_certs_dir = newcerts
certificate = ca.pem
private_key = ca.key
serial = serial
crlnumber = crlnumber
default_md = sha256
default_days = 30
default_crl_days = 30
policy = anything
copy_extensions = none
[ anything ]
countryName = optional
organizationName = optional
organizationalUnitName = optional
commonName = supplied
[ user ]
basicConstraints = CA:false
keyUsage = critical, digitalSignature, keyEncipherment, dataEncipherment
extendedKeyUsage = clientAuth
[ host ]
basicConstraints = CA:false
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = DNS:localhost
`

func newRealPKI(t *testing.T) *realPKI {
	t.Helper()
	needTools(t, "openssl")
	p := &realPKI{dir: t.TempDir()}
	p.caDir = p.path("certificates")
	for _, d := range []string{p.caDir, p.path("newcerts")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{"ca.cnf": caConf, "index.txt": "", "serial": "1000\n", "crlnumber": "01\n"} {
		if err := os.WriteFile(p.path(name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p.run(t, "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "30",
		"-subj", "/C=US/O=Grid/CN=Ferry Test CA", "-addext", "basicConstraints=critical,CA:true", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
	for _, c := range []struct{ name, subj, ext string }{
		{"user", "/C=US/O=Grid/OU=People/CN=Alice Smith", "user"},
		{"host", "/C=US/O=Grid/CN=host\\/localhost", "host"},
		{"gone", "/C=US/O=Grid/OU=People/CN=Revoked Rita", "user"},
	} {
		p.run(t, "openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", c.name+"key.pem", "-out", c.name+".csr", "-subj", c.subj)
		p.run(t, "openssl", "ca", "-batch", "-config", "ca.cnf", "-extensions", c.ext, "-in", c.name+".csr", "-out", c.name+"cert.pem", "-notext")
		if err := os.Chmod(p.path(c.name+"key.pem"), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	p.run(t, "openssl", "ca", "-config", "ca.cnf", "-revoke", "gonecert.pem")
	p.run(t, "openssl", "ca", "-config", "ca.cnf", "-gencrl", "-out", "ca.crl")
	hash := strings.TrimSpace(p.run(t, "openssl", "x509", "-hash", "-noout", "-in", "ca.pem"))
	for src, dst := range map[string]string{"ca.pem": hash + ".0", "ca.crl": hash + ".r0"} {
		b, err := os.ReadFile(p.path(src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p.caDir, dst), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// What a real /etc/grid-security/certificates also holds.
	os.WriteFile(filepath.Join(p.caDir, hash+".signing_policy"), []byte("access_id_CA X509 '/C=US/O=Grid/CN=Ferry Test CA'\n"), 0o644)
	os.WriteFile(filepath.Join(p.caDir, hash+".namespaces"), []byte("TO Issuer \"/C=US/O=Grid/CN=Ferry Test CA\" PERMIT Subject \".*\"\n"), 0o644)
	return p
}

// TestRealTools checks Verify, ReadCredential and the proxy writer against
// certificates made by openssl and proxies made by grid-proxy-init, and
// ferry's proxies against grid-proxy-info and openssl verify.
func TestRealTools(t *testing.T) {
	p := newRealPKI(t)
	trust, err := LoadCADir(p.caDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(trust.Problems) > 0 {
		t.Fatalf("LoadCADir problems: %v", trust.Problems)
	}
	const aliceDN = "/C=US/O=Grid/OU=People/CN=Alice Smith"
	now := time.Now()

	t.Run("openssl certificates", func(t *testing.T) {
		for _, c := range []struct{ name, dn, err string }{
			{"user", aliceDN, ""},
			{"host", `/C=US/O=Grid/CN=host\/localhost`, ""},
			{"gone", "", "was revoked at"},
		} {
			cred, err := ReadCertKey(p.path(c.name+"cert.pem"), p.path(c.name+"key.pem"))
			if err != nil {
				t.Fatal(err)
			}
			id, err := trust.Verify(cred.Chain, now)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("%s: Verify err %v, want %q", c.name, err, c.err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if id.DN != c.dn || cred.Identity() != c.dn {
				t.Errorf("%s: DN %q, Identity %q, want %q", c.name, id.DN, cred.Identity(), c.dn)
			}
		}
	})

	t.Run("encrypted key", func(t *testing.T) {
		p.run(t, "openssl", "pkey", "-in", "userkey.pem", "-aes256", "-passout", "pass:secret", "-out", "userkey-enc.pem")
		p.run(t, "openssl", "rsa", "-in", "userkey.pem", "-traditional", "-aes256", "-passout", "pass:secret", "-out", "userkey-enc1.pem")
		for _, k := range []string{"userkey-enc.pem", "userkey-enc1.pem"} {
			if _, err := ReadCertKey(p.path("usercert.pem"), p.path(k)); err != ErrEncryptedKey && !strings.Contains(fmt.Sprint(err), ErrEncryptedKey.Error()) {
				t.Errorf("%s: err %v, want ErrEncryptedKey", k, err)
			}
		}
	})

	needTools(t, "grid-proxy-init", "grid-proxy-info")
	gpi := func(t *testing.T, out string, args ...string) *Credential {
		t.Helper()
		args = append([]string{"-q", "-cert", "usercert.pem", "-key", "userkey.pem", "-out", out}, args...)
		p.run(t, "grid-proxy-init", args...)
		cred, err := ReadCredential(p.path(out))
		if err != nil {
			t.Fatal(err)
		}
		return cred
	}

	t.Run("grid-proxy-init", func(t *testing.T) {
		for _, c := range []struct {
			name    string
			args    []string
			limited bool
			life    time.Duration
			err     string
			kind    proxyKind
		}{
			{name: "default RFC proxy", kind: rfcProxy, life: 12 * time.Hour},
			{name: "limited", kind: rfcProxy, args: []string{"-limited"}, limited: true, life: 12 * time.Hour},
			{name: "hours", kind: rfcProxy, args: []string{"-hours", "2"}, life: 2 * time.Hour},
			{name: "valid", kind: rfcProxy, args: []string{"-valid", "0:30"}, life: 30 * time.Minute},
			{name: "bits 1024", kind: rfcProxy, args: []string{"-bits", "1024"}, life: 12 * time.Hour},
			{name: "legacy", kind: legacyProxy, args: []string{"-old"}, life: 12 * time.Hour},
			{name: "legacy limited", kind: legacyProxy, args: []string{"-old", "-limited"}, limited: true, life: 12 * time.Hour},
			{name: "draft GSI3", kind: gsi3Proxy, args: []string{"-draft"}, life: 12 * time.Hour},
			{name: "path length 0", kind: rfcProxy, args: []string{"-path-length", "0"}, life: 12 * time.Hour},
			{name: "independent", kind: rfcProxy, args: []string{"-independent"}, err: "independent proxy"},
		} {
			t.Run(c.name, func(t *testing.T) {
				out := strings.ReplaceAll(c.name, " ", "_") + ".proxy"
				cred := gpi(t, out, c.args...)
				if len(cred.Chain) != 2 {
					t.Fatalf("chain of %d, want proxy + EEC", len(cred.Chain))
				}
				if k := classify(cred.Chain[0]).kind; k != c.kind {
					t.Errorf("a %s, want a %s", k, c.kind)
				}
				id, err := trust.Verify(cred.Chain, time.Now())
				if c.err != "" {
					if err == nil || !strings.Contains(err.Error(), c.err) {
						t.Fatalf("Verify err %v, want %q", err, c.err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if id.DN != aliceDN || id.Limited != c.limited {
					t.Errorf("Verify = %q limited=%v, want %q limited=%v", id.DN, id.Limited, aliceDN, c.limited)
				}
				if got := time.Until(id.NotAfter); got < c.life-2*time.Minute || got > c.life+time.Minute {
					t.Errorf("lifetime %v, want %v", got, c.life)
				}
				// grid-proxy-info's subject is OpenSSL's X509_NAME_oneline.
				subj := strings.TrimSpace(p.run(t, "grid-proxy-info", "-file", out, "-subject"))
				if got, _ := OneLine(cred.Chain[0].RawSubject); got != subj {
					t.Errorf("OneLine = %q, grid-proxy-info -subject %q", got, subj)
				}
				if got := strings.TrimSpace(p.run(t, "grid-proxy-info", "-file", out, "-identity")); got != cred.Identity() {
					t.Errorf("Identity = %q, grid-proxy-info -identity %q", cred.Identity(), got)
				}
				// The file read back writes the same bytes but for the key's form.
				again, err := ParseCredential(cred.Encode())
				if err != nil || len(again.Chain) != 2 || !again.Chain[0].Equal(cred.Chain[0]) {
					t.Errorf("Encode/ParseCredential round trip: %v", err)
				}
			})
		}
	})

	t.Run("grid-proxy-init path length", func(t *testing.T) {
		// GCT writes the constraint only when it is > 0
		// (globus_gsi_proxy.c:521, :1415): -path-length 0 is no constraint.
		cred := gpi(t, "pl0.proxy", "-path-length", "0")
		if pi := classify(cred.Chain[0]); pi.pathLen != -1 {
			t.Errorf("-path-length 0 gave a constraint of %d; GCT drops 0", pi.pathLen)
		}
		p.run(t, "grid-proxy-init", "-q", "-cert", "pl0.proxy", "-key", "pl0.proxy", "-out", "pl0b.proxy")
		gpi(t, "pl1.proxy", "-path-length", "1")
		p.run(t, "grid-proxy-init", "-q", "-cert", "pl1.proxy", "-key", "pl1.proxy", "-out", "pl1b.proxy")
		p.run(t, "grid-proxy-init", "-q", "-cert", "pl1b.proxy", "-key", "pl1b.proxy", "-out", "pl1c.proxy")
		for _, c := range []struct{ file, err string }{
			{"pl0b.proxy", ""},
			{"pl1b.proxy", ""},
			{"pl1c.proxy", "path length exceeded"},
		} {
			cred, err := ReadCredential(p.path(c.file))
			if err != nil {
				t.Fatal(err)
			}
			_, err = trust.Verify(cred.Chain, time.Now())
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Errorf("%s: Verify err %v, want %q", c.file, err, c.err)
			}
		}
		// openssl agrees on each.
		for _, c := range []struct {
			file string
			ok   bool
		}{{"pl1b.proxy", true}, {"pl1c.proxy", false}} {
			cred, _ := ReadCredential(p.path(c.file))
			var rest []byte
			for _, x := range cred.Chain[1:] {
				rest = append(rest, pemCert(x.Raw)...)
			}
			os.WriteFile(p.path(c.file+".leaf"), pemCert(cred.Chain[0].Raw), 0o644)
			os.WriteFile(p.path(c.file+".chain"), rest, 0o644)
			out, err := p.try("openssl", "verify", "-allow_proxy_certs", "-CApath", p.caDir, "-untrusted", c.file+".chain", c.file+".leaf")
			if (err == nil) != c.ok {
				t.Errorf("openssl verify %s: %v, want ok=%v\n%s", c.file, err, c.ok, out)
			}
		}
	})

	user, err := ReadCertKey(p.path("usercert.pem"), p.path("userkey.pem"))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("ferry proxy to GCT and openssl", func(t *testing.T) {
		for _, c := range []struct {
			name string
			o    ProxyOptions
			typ  string
		}{
			{"full", ProxyOptions{Lifetime: time.Hour, PathLen: NoPathLen}, "RFC 3820 compliant impersonation proxy"},
			{"limited", ProxyOptions{Lifetime: time.Hour, Limited: true, PathLen: NoPathLen}, "RFC 3820 compliant limited proxy"},
			{"path length 1", ProxyOptions{Lifetime: time.Hour, PathLen: 1}, "RFC 3820 compliant impersonation proxy"},
		} {
			t.Run(c.name, func(t *testing.T) {
				cred, err := NewProxyCredential(user, c.o)
				if err != nil {
					t.Fatal(err)
				}
				out := "ferry-" + strings.ReplaceAll(c.name, " ", "_") + ".proxy"
				if err := cred.WriteProxyFile(p.path(out)); err != nil {
					t.Fatal(err)
				}
				if st, err := os.Stat(p.path(out)); err != nil || st.Mode().Perm() != 0o600 {
					t.Fatalf("proxy file mode: %v %v", st.Mode(), err)
				}
				info := p.run(t, "grid-proxy-info", "-file", out, "-all")
				for _, want := range []string{"identity : " + aliceDN, "type     : " + c.typ, "strength : 2048 bits"} {
					if !strings.Contains(info, want) {
						t.Errorf("grid-proxy-info -all lacks %q:\n%s", want, info)
					}
				}
				p.run(t, "grid-proxy-info", "-file", out, "-exists", "-valid", "0:30")
				// openssl verify: the leaf, the EEC as untrusted intermediate.
				os.WriteFile(p.path(out+".leaf"), pemCert(cred.Chain[0].Raw), 0o644)
				os.WriteFile(p.path(out+".chain"), pemCert(cred.Chain[1].Raw), 0o644)
				if v := p.run(t, "openssl", "verify", "-allow_proxy_certs", "-CApath", p.caDir, "-untrusted", out+".chain", out+".leaf"); !strings.Contains(v, ": OK") {
					t.Errorf("openssl verify: %s", v)
				}
				// grid-proxy-init signs a proxy with ferry's proxy, and ferry
				// verifies the chain of three.
				p.run(t, "grid-proxy-init", "-q", "-cert", out, "-key", out, "-out", out+".2")
				two, err := ReadCredential(p.path(out + ".2"))
				if err != nil {
					t.Fatal(err)
				}
				id, err := trust.Verify(two.Chain, time.Now())
				if err != nil {
					t.Fatalf("grid-proxy-init's proxy of ferry's proxy: %v", err)
				}
				if id.DN != aliceDN || id.Limited != c.o.Limited || !two.NotAfter().Equal(cred.NotAfter()) {
					t.Errorf("Verify = %q limited=%v NotAfter %v, want limited=%v NotAfter %v", id.DN, id.Limited, two.NotAfter(), c.o.Limited, cred.NotAfter())
				}
			})
		}
	})

	t.Run("delegation to a grid-proxy-init proxy", func(t *testing.T) {
		issuer := gpi(t, "deleg.proxy")
		csr, key, err := NewRequest(2048)
		if err != nil {
			t.Fatal(err)
		}
		der, err := SignRequest(issuer, csr, ProxyOptions{Lifetime: time.Hour, PathLen: NoPathLen})
		if err != nil {
			t.Fatal(err)
		}
		cred, err := AcceptDelegation(der, key, issuer.Chain)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := trust.Verify(cred.Chain, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := cred.WriteProxyFile(p.path("delegated.proxy")); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(p.run(t, "grid-proxy-info", "-file", "delegated.proxy", "-identity")); got != aliceDN {
			t.Errorf("grid-proxy-info -identity %q", got)
		}
	})
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
