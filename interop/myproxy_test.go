//go:build interop

package interop

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ferry/gsi"
	"ferry/gsi/gss"
	"ferry/gsi/myproxy"
)

// ferryLogon runs myproxy.Logon against a server of startMyProxy, taking
// its turn as the bed's client helpers do (the -d server serves one
// connection, then the bed starts it again).
func ferryLogon(t testing.TB, addr string, o myproxy.Options) (*gsi.Credential, error) {
	t.Helper()
	s, _ := myproxyAt(t, addr)
	s.turn.Lock()
	defer s.turn.Unlock()
	if err := s.ready(15 * time.Second); err != nil {
		t.Fatalf("myproxy-server on %s: %v\n%s", s.addr, err, s.log)
	}
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cred, err := myproxy.Logon(ctx, addr, o)
	p.wait(5 * time.Second)
	return cred, err
}

// escapedDN is a one-line DN of the bed (gridCA.dn) as OpenSSL 3 and
// gsi.OneLine write it: "CN=host\/127.0.0.1".
func escapedDN(dn string) string { return strings.ReplaceAll(dn, "CN=host/", `CN=host\/`) }

func loadTrust(t testing.TB, dir string) *gsi.Trust {
	t.Helper()
	tr, err := gsi.LoadCADir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestMyProxyLogon: myproxy.Logon against the real myproxy-server fetches
// alice's credential stored by myproxy-init: a proxy of alice's DN that
// gsi.Trust.Verify accepts and that globus-url-copy uses to put a file
// into GCT's GSI server; anonymously and with a client credential. A
// wrong pass phrase, an unknown user, a host certificate of an untrusted
// CA, one that names another host (unless ServerDN says whom to expect)
// and a closed port give clear errors.
func TestMyProxyLogon(t *testing.T) {
	needGSITools(t, "myproxy-server", "myproxy-init")
	u := newGSIUser(t, "ca1", "alice")
	addr := startMyProxy(t, u.CA.Dir, u.HostCert, u.HostKey)
	const pass = "ferry-pass-1"
	myproxyInit(t, addr, u.CA.Dir, u.Cert, u.Key, "alice", pass)
	trust := loadTrust(t, u.CA.Dir)

	cred, err := ferryLogon(t, addr, myproxy.Options{Username: "alice", Passphrase: pass, Trust: trust, Lifetime: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if id := cred.Identity(); id != u.DN {
		t.Fatalf("Identity() = %q, want %q", id, u.DN)
	}
	id, err := trust.Verify(cred.Chain, time.Now())
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if id.DN != u.DN || id.Limited {
		t.Fatalf("Verify: DN %q limited %v", id.DN, id.Limited)
	}
	if left := time.Until(cred.NotAfter()); left > 2*time.Hour+time.Minute || left < 2*time.Hour-5*time.Minute {
		t.Errorf("the proxy has %v left, asked for 2h", left)
	}
	t.Logf("chain from myproxy-server: %d certificates, leaf %s", len(cred.Chain), cred.Chain[0].Subject)

	proxyFile := filepath.Join(t.TempDir(), "logon-proxy.pem")
	if err := cred.WriteProxyFile(proxyFile); err != nil {
		t.Fatal(err)
	}
	if got := proxyIdentity(t, proxyFile); got != u.DN {
		t.Fatalf("grid-proxy-info -identity = %q, want %q", got, u.DN)
	}
	srv := startGCTGSI(t, u.CA.Dir, u.HostCert, u.HostKey, map[string]string{u.DN: ""})
	src := filepath.Join(t.TempDir(), "src.bin")
	writeRandomFile(t, src, 1<<20+17)
	gucGSI(t, proxyFile, u.CA.Dir, fileURL(src), srv.URL("f.bin"))
	if err := compareFiles(src, srv.Path("f.bin")); err != nil {
		t.Fatal(err)
	}

	// With a client credential (bob's proxy): the server's policy accepts
	// any client; the pass phrase still decides.
	bobCert, bobKey := u.CA.issue(t, "bob", false)
	bob, err := gsi.ReadCredential(gridProxyInit(t, bobCert, bobKey))
	if err != nil {
		t.Fatal(err)
	}
	cred2, err := ferryLogon(t, addr, myproxy.Options{Username: "alice", Passphrase: pass, Trust: trust, Client: bob})
	if err != nil {
		t.Fatalf("with a client credential: %v", err)
	}
	if cred2.Identity() != u.DN {
		t.Fatalf("with a client credential: Identity() = %q", cred2.Identity())
	}
	if left := time.Until(cred2.NotAfter()); left < 11*time.Hour {
		t.Errorf("default lifetime: %v left, want about 12h", left)
	}

	_, err = ferryLogon(t, addr, myproxy.Options{Username: "alice", Passphrase: "wrong-pass-2", Trust: trust})
	wantGSIError(t, "wrong pass phrase", err, "MyProxy: bad pass phrase for alice")
	if !errors.Is(err, myproxy.ErrBadPassphrase) {
		t.Errorf("wrong pass phrase: not ErrBadPassphrase")
	}
	_, err = ferryLogon(t, addr, myproxy.Options{Username: "nobody-here", Passphrase: pass, Trust: trust})
	wantGSIError(t, "unknown user", err, "MyProxy: no credentials for user nobody-here")
	if !errors.Is(err, myproxy.ErrNoCredentials) {
		t.Errorf("unknown user: not ErrNoCredentials")
	}
	// The server still works after the failures, for myproxy-logon too.
	myproxyLogon(t, addr, u.CA.Dir, "alice", pass)

	// A server whose host certificate is of a CA the client does not trust.
	other := newGridCA(t, "other")
	oc, ok := other.issue(t, "127.0.0.1", true)
	oaddr := startMyProxy(t, other.Dir, oc, ok)
	_, err = ferryLogon(t, oaddr, myproxy.Options{Username: "alice", Passphrase: pass, Trust: trust})
	wantGSIError(t, "untrusted CA", err, "MyProxy "+oaddr+": server certificate: certificate chain refused")

	// A trusted host certificate of another host: refused, unless
	// ServerDN names it.
	wc, wk := u.CA.issue(t, "elsewhere.example.org", true)
	waddr := startMyProxy(t, u.CA.Dir, wc, wk)
	_, err = ferryLogon(t, waddr, myproxy.Options{Username: "alice", Passphrase: pass, Trust: trust})
	wantGSIError(t, "another host", err, "MyProxy "+waddr+": server identity "+escapedDN(u.CA.dn("elsewhere.example.org", true))+" is not the host 127.0.0.1")
	_, err = ferryLogon(t, waddr, myproxy.Options{Username: "alice", Passphrase: pass, Trust: trust, ServerDN: "/O=Grid/CN=someone else"})
	wantGSIError(t, "wrong ServerDN", err, "is not /O=Grid/CN=someone else (ServerDN)")
	// ServerDN as OpenSSL 3 and the MyProxy tools write it ("host\/...")
	// and unescaped.
	for _, dn := range []string{escapedDN(u.CA.dn("elsewhere.example.org", true)), u.CA.dn("elsewhere.example.org", true)} {
		_, err = ferryLogon(t, waddr, myproxy.Options{Username: "alice", Passphrase: pass, Trust: trust, ServerDN: dn})
		wantGSIError(t, "ServerDN "+dn+", nothing stored there", err, "MyProxy: no credentials for user alice")
	}

	// Nobody listening: port 1 (a port just freed may be in the ephemeral
	// range, where a loopback connection can meet itself).
	dead := "127.0.0.1:1"
	_, err = myproxy.Logon(context.Background(), dead, myproxy.Options{Username: "alice", Passphrase: pass, Trust: trust})
	wantGSIError(t, "closed port", err, "MyProxy: connecting to "+dead, "connection refused")
}

// TestMyProxyWire records what the real myproxy-logon and myproxy-server
// say to each other inside GSI, through a relay that is the server to the
// one and the client to the other, and checks it against what
// myproxy.Logon sends and expects (the facts of package myproxy's doc).
func TestMyProxyWire(t *testing.T) {
	needGSITools(t, "myproxy-server", "myproxy-init", "myproxy-logon")
	u := newGSIUser(t, "ca1", "alice")
	addr := startMyProxy(t, u.CA.Dir, u.HostCert, u.HostKey)
	const pass = "ferry-pass-1"
	myproxyInit(t, addr, u.CA.Dir, u.Cert, u.Key, "alice", pass)
	host, err := gsi.ReadCertKey(u.HostCert, u.HostKey)
	if err != nil {
		t.Fatal(err)
	}
	trust := loadTrust(t, u.CA.Dir)
	s, _ := myproxyAt(t, addr)

	for _, c := range []struct {
		name, pass string
		response   string
		certs      bool
	}{
		{"good", pass, "VERSION=MYPROXYv2\nRESPONSE=0\n\x00", true},
		{"bad", "wrong-pass-2", "VERSION=MYPROXYv2\nRESPONSE=1\nERROR=Bad password\nERROR=invalid credential passphrase\n\x00", false},
	} {
		r := startRelay(t, host, addr, trust)
		_, port, _ := net.SplitHostPort(r.addr)
		out, err := s.client(gsiEnv("X509_CERT_DIR="+u.CA.Dir), c.pass+"\n",
			"myproxy-logon", "-s", "127.0.0.1", "-p", port, "-l", "alice", "-S", "-o", filepath.Join(t.TempDir(), "p.pem"))
		rec := r.wait(t)
		t.Logf("%s: myproxy-logon: %v\n%s", c.name, err, out)
		t.Logf("%s: TLS version %x, client certificates %d", c.name, rec.version, rec.clientCerts)
		t.Logf("%s: request %q", c.name, rec.request)
		t.Logf("%s: response %q", c.name, rec.response)
		t.Logf("%s: relay: %v; certificate request %d bytes % x...; certificates %d bytes in reads of %v", c.name, rec.err, len(rec.csr), rec.csr[:min(8, len(rec.csr))], len(rec.certs), rec.certPieces)
		if c.certs != (err == nil) {
			t.Fatalf("%s: myproxy-logon: %v", c.name, err)
		}
		if rec.err != nil {
			t.Fatalf("%s: relay: %v", c.name, rec.err)
		}
		if rec.clear != 0 {
			t.Errorf("%s: %d bytes in the clear before the TLS handshake", c.name, rec.clear)
		}
		if rec.clientCerts != 0 {
			t.Errorf("%s: myproxy-logon without a credential sent %d certificates", c.name, rec.clientCerts)
		}
		if rec.flag != '0' {
			t.Errorf("%s: delegation flag %q, want '0'", c.name, rec.flag)
		}
		want := fmt.Sprintf("VERSION=MYPROXYv2\nCOMMAND=0\nUSERNAME=alice\nPASSPHRASE=%s\nLIFETIME=43200\n\x00", c.pass)
		if string(rec.request) != want {
			t.Errorf("%s: request %q, want %q", c.name, rec.request, want)
		}
		if string(rec.response) != c.response {
			t.Errorf("%s: response %q, want %q", c.name, rec.response, c.response)
		}
		if !c.certs {
			continue
		}
		csr, err := x509.ParseCertificateRequest(rec.csr)
		if err != nil {
			t.Fatalf("the client's request after RESPONSE=0 is no DER PKCS#10: %v", err)
		}
		t.Logf("certificate request: %d bytes, subject %s", len(rec.csr), csr.Subject)
		if len(rec.certs) == 0 {
			t.Fatal("no certificates")
		}
		n := int(rec.certs[0])
		rest := rec.certs[1:]
		var subjects []string
		for i := 0; i < n; i++ {
			var c *x509.Certificate
			c, rest, err = parseOneDER(rest)
			if err != nil {
				t.Fatalf("certificate %d of %d: %v", i, n, err)
			}
			if i == 0 && !c.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(csr.PublicKey) {
				t.Error("the first certificate is not for the request's key")
			}
			dn, _ := gsi.OneLine(c.RawSubject)
			subjects = append(subjects, dn)
		}
		if len(rest) != 0 {
			t.Errorf("%d bytes after %d certificates", len(rest), n)
		}
		t.Logf("certificates: count byte %d, then %d bytes of DER: %s", n, len(rec.certs)-1, strings.Join(subjects, " <- "))
		t.Logf("then the final response %q", rec.final)
		if subjects[n-1] != u.DN {
			t.Errorf("the last certificate is %s, want the user's", subjects[n-1])
		}
		if string(rec.final) != "VERSION=MYPROXYv2\nRESPONSE=0\n\x00" {
			t.Errorf("final response %q", rec.final)
		}
		if !rec.serverClosed {
			t.Error("the server did not close the connection after the certificates")
		}
	}
}

func parseOneDER(b []byte) (*x509.Certificate, []byte, error) {
	if len(b) < 4 || b[0] != 0x30 || b[1] != 0x82 {
		return nil, nil, fmt.Errorf("not a long DER SEQUENCE: % x", b[:min(len(b), 4)])
	}
	l := 4 + (int(b[2])<<8 | int(b[3]))
	if len(b) < l {
		return nil, nil, fmt.Errorf("cut: %d of %d bytes", len(b), l)
	}
	c, err := x509.ParseCertificate(b[:l])
	return c, b[l:], err
}

// relay is a MyProxy man in the middle: GSI server to a client, GSI
// client (anonymous) to the real server, logging the plaintext.
type relay struct {
	addr string
	ln   net.Listener
	done chan relayRecord
}

type relayRecord struct {
	clear        int    // bytes before the ClientHello's record (0: none)
	version      uint16 // TLS version with the client
	clientCerts  int
	flag         byte
	request      []byte
	response     []byte
	csr          []byte
	certs        []byte
	certPieces   []int  // the sizes of the reads (TLS records) of certs
	final        []byte // the response after the certificates
	serverClosed bool
	err          error
}

func startRelay(t *testing.T, host *gsi.Credential, server string, trust *gsi.Trust) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{addr: ln.Addr().String(), ln: ln, done: make(chan relayRecord, 1)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var rec relayRecord
		rec.err = r.serve(host, server, trust, &rec)
		r.done <- rec
	}()
	return r
}

func (r *relay) wait(t *testing.T) relayRecord {
	t.Helper()
	select {
	case rec := <-r.done:
		return rec
	case <-time.After(30 * time.Second):
		t.Fatal("relay: no end")
	}
	return relayRecord{}
}

func (r *relay) serve(host *gsi.Credential, server string, trust *gsi.Trust, rec *relayRecord) error {
	raw, err := r.ln.Accept()
	r.ln.Close()
	if err != nil {
		return err
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(20 * time.Second))
	// The first byte: a TLS handshake record (22), or something sent in
	// the clear before it.
	br := &peekConn{Conn: raw}
	first := make([]byte, 1)
	if _, err := io.ReadFull(raw, first); err != nil {
		return err
	}
	if first[0] != 22 {
		rec.clear = 1
	}
	br.pre = first
	cc := tls.Server(br, &tls.Config{
		Certificates: []tls.Certificate{host.TLSCertificate()},
		ClientAuth:   tls.RequestClientCert,
		// GSI reads one record per message (a token): no
		// NewSessionTicket records, and no message split into small
		// records at first (else myproxy-logon reads a part of the
		// certificates: "Can't read DER encoded X.509 cert from BIO").
		SessionTicketsDisabled:      true,
		DynamicRecordSizingDisabled: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			rec.clientCerts = len(raw)
			return nil
		},
	})
	if err := cc.Handshake(); err != nil {
		return fmt.Errorf("handshake with the client: %w", err)
	}
	rec.version = cc.ConnectionState().Version
	if rec.version >= tls.VersionTLS13 {
		if _, err := cc.Write([]byte{0}); err != nil {
			return err
		}
	}
	var f [1]byte
	if _, err := io.ReadFull(cc, f[:]); err != nil {
		return fmt.Errorf("reading the flag: %w", err)
	}
	rec.flag = f[0]

	sraw, err := net.Dial("tcp", server)
	if err != nil {
		return err
	}
	defer sraw.Close()
	sraw.SetDeadline(time.Now().Add(20 * time.Second))
	sc, err := gss.Over(context.Background(), sraw, gss.Config{VerifyPeer: func(chain []*x509.Certificate) error {
		_, err := trust.Verify(chain, time.Now())
		return err
	}}, true, false)
	if err != nil {
		return fmt.Errorf("GSI with the server: %w", err)
	}
	if rec.request, err = relayUntil(cc, sc, func(b []byte) bool { return bytes.IndexByte(b, 0) >= 0 }); err != nil {
		return fmt.Errorf("request: %w", err)
	}
	if rec.response, err = relayUntil(sc, cc, func(b []byte) bool { return bytes.IndexByte(b, 0) >= 0 }); err != nil {
		return fmt.Errorf("response: %w", err)
	}
	if !bytes.Contains(rec.response, []byte("RESPONSE=0\n")) {
		return nil
	}
	if rec.csr, err = relayUntil(cc, sc, derComplete); err != nil {
		return fmt.Errorf("certificate request: %w", err)
	}
	rec.certs, err = relayUntil(sc, cc, func(b []byte) bool {
		rec.certPieces = append(rec.certPieces, len(b)-sum(rec.certPieces))
		return certsComplete(b)
	})
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	// myproxy-logon may have closed the connection by now: it reads no
	// further than the certificates.
	if rec.final, err = relayUntil(sc, io.Discard, func(b []byte) bool { return bytes.IndexByte(b, 0) >= 0 }); err != nil {
		return fmt.Errorf("final response: %w", err)
	}
	cc.Write(rec.final)
	var b [1]byte
	if _, err := sc.Read(b[:]); errors.Is(err, io.EOF) {
		rec.serverClosed = true
	}
	return nil
}

// certsComplete reports whether b holds a count byte and that many whole
// DER elements.
func certsComplete(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	rest := b[1:]
	for i := 0; i < int(b[0]); i++ {
		if !derComplete(rest) {
			return false
		}
		l := 4 + (int(rest[2])<<8 | int(rest[3]))
		rest = rest[l:]
	}
	return true
}

func sum(a []int) (n int) {
	for _, x := range a {
		n += x
	}
	return n
}

// derComplete reports whether b holds a whole DER element (long form
// lengths up to 2 bytes).
func derComplete(b []byte) bool {
	switch {
	case len(b) < 2:
		return false
	case b[1] < 0x80:
		return len(b) >= 2+int(b[1])
	case b[1] == 0x81:
		return len(b) >= 3 && len(b) >= 3+int(b[2])
	case b[1] == 0x82:
		return len(b) >= 4 && len(b) >= 4+(int(b[2])<<8|int(b[3]))
	}
	return false
}

// relayUntil copies from one side to the other until done says the
// bytes copied are a whole message, and returns them.
func relayUntil(from io.Reader, to io.Writer, done func([]byte) bool) ([]byte, error) {
	var msg []byte
	buf := make([]byte, 16<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			msg = append(msg, buf[:n]...)
			if _, werr := to.Write(buf[:n]); werr != nil {
				return msg, werr
			}
			if done(msg) {
				return msg, nil
			}
		}
		if err != nil {
			return msg, err
		}
	}
}

// peekConn is a connection with bytes already read put back before it.
type peekConn struct {
	net.Conn
	mu  sync.Mutex
	pre []byte
}

func (p *peekConn) Read(b []byte) (int, error) {
	p.mu.Lock()
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		p.mu.Unlock()
		return n, nil
	}
	p.mu.Unlock()
	return p.Conn.Read(b)
}
