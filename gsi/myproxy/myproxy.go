package myproxy

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"ferry/gsi"
	"ferry/gsi/gss"
)

// DefaultPort is the MyProxy server's port when the address has none.
const DefaultPort = "7512"

// DefaultLifetime is the lifetime Logon asks for when Options.Lifetime is
// zero: myproxy-logon's default.
const DefaultLifetime = 12 * time.Hour

// Options say whose credential Logon fetches and whom it trusts.
type Options struct {
	// Username and Passphrase are the MyProxy account and its pass phrase
	// (myproxy-logon -l, and what it prompts for). Logon keeps neither.
	Username, Passphrase string
	// Lifetime is the lifetime asked for (whole seconds); the server
	// gives at most what the stored credential allows. 0: DefaultLifetime.
	Lifetime time.Duration
	// Trust is the CAs the server's host certificate must chain to.
	Trust *gsi.Trust
	// ServerDN, if set, is the server's identity (the one-line DN of its
	// end-entity certificate, "/O=Grid/CN=host\/myproxy.example.org" as
	// OpenSSL 3 writes it, or with "/" and "+" in values unescaped)
	// instead of a name of the host (myproxy-logon's MYPROXY_SERVER_DN).
	ServerDN string
	// Client is the credential Logon authenticates with; nil:
	// anonymous, as myproxy-logon without a credential.
	Client *gsi.Credential
	// Dial connects to the server; nil: a plain net.Dialer. A service
	// passes the dial of its network policy, which checks the address
	// the name resolves to as it connects.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Errors a ServerError matches with errors.Is.
var (
	// ErrBadPassphrase is a pass phrase the server refused.
	ErrBadPassphrase = errors.New("bad pass phrase")
	// ErrNoCredentials is a username with no credential stored.
	ErrNoCredentials = errors.New("no credentials")
)

// ServerError is the server's refusal: its ERROR lines.
type ServerError struct {
	Username string
	Lines    []string // the server's message, line by line
	kind     error    // ErrBadPassphrase, ErrNoCredentials or nil
}

func (e *ServerError) Error() string {
	msg := strings.Join(e.Lines, "; ")
	if msg == "" {
		msg = "no reason given"
	}
	switch e.kind {
	case ErrBadPassphrase:
		return fmt.Sprintf("MyProxy: bad pass phrase for %s (server: %s)", e.Username, msg)
	case ErrNoCredentials:
		return fmt.Sprintf("MyProxy: no credentials for user %s (server: %s)", e.Username, msg)
	}
	return fmt.Sprintf("MyProxy: the server refused to give a credential of %s: %s", e.Username, msg)
}

func (e *ServerError) Is(target error) bool { return target != nil && target == e.kind }

// newServerError classifies the server's message by the words MyProxy 6
// uses (myproxy_server.c): "No credentials exist for username ..." and
// "Bad password" / "invalid credential passphrase".
func newServerError(username string, lines []string) *ServerError {
	e := &ServerError{Username: username, Lines: lines}
	all := strings.ToLower(strings.Join(lines, "\n"))
	switch {
	case strings.Contains(all, "no credentials exist"):
		e.kind = ErrNoCredentials
	case strings.Contains(all, "bad password"), strings.Contains(all, "invalid credential passphrase"),
		strings.Contains(all, "invalid pass phrase"), strings.Contains(all, "invalid passphrase"):
		e.kind = ErrBadPassphrase
	}
	return e
}

// Limits on what Logon reads from a server.
const (
	maxResponse = 64 << 10
	maxCerts    = 1 << 20
)

// Logon fetches a short-lived proxy from a MyProxy server (myproxy-logon's
// GET): username and pass phrase, never stored; the server's host
// certificate is checked against trust and must name host
// (CN=host/<host>, myproxy/<host> or <host>) unless serverDN is given.
// addr is host[:port], the port 7512 by default. The credential returned
// is the new proxy (its key made here, never sent) and the stored chain
// after it; its certificates are checked to chain by signature, not
// against Options.Trust (the user's CA need not be the server's).
func Logon(ctx context.Context, addr string, o Options) (*gsi.Credential, error) {
	if o.Trust == nil {
		return nil, errors.New("MyProxy: no trusted CAs to check the server with")
	}
	lifetime := o.Lifetime
	if lifetime == 0 {
		lifetime = DefaultLifetime
	}
	req, err := (request{Command: cmdGet, Username: o.Username, Passphrase: o.Passphrase, Lifetime: lifetime}).encode()
	if err != nil {
		return nil, fmt.Errorf("MyProxy: %w", err)
	}
	host, port, err := splitAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("MyProxy: %w", err)
	}
	addr = net.JoinHostPort(host, port)

	dial := o.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	raw, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("MyProxy: connecting to %s: %w", addr, err)
	}
	defer raw.Close()
	if dl, ok := ctx.Deadline(); ok {
		raw.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	fail := func(what string, err error) error {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return fmt.Errorf("MyProxy %s: %s: %w", addr, what, err)
	}

	cfg := gss.Config{VerifyPeer: func(chain []*x509.Certificate) error {
		return checkServer(o.Trust, chain, host, o.ServerDN, time.Now())
	}}
	if o.Client != nil {
		cfg.Certificate = o.Client.TLSCertificate()
	}
	conn, err := gss.Over(ctx, raw, cfg, true, false)
	if err != nil {
		var ie *identityError
		if errors.As(err, &ie) {
			return nil, fmt.Errorf("MyProxy %s: %w", addr, ie)
		}
		return nil, fail("GSI authentication", err)
	}

	if _, err := conn.Write(req); err != nil {
		return nil, fail("sending the request", err)
	}
	text, err := readText(conn, nil)
	if err == io.EOF {
		err = errors.New("the server closed the connection without answering")
	}
	if err != nil {
		return nil, fail("reading the response", err)
	}
	resp, err := parseResponse(text)
	if err != nil {
		return nil, fail("the response", err)
	}
	switch resp.Code {
	case respOK:
	case respError:
		return nil, newServerError(o.Username, resp.Errors)
	case respAuthorize:
		return nil, fmt.Errorf("MyProxy %s: the server wants further authorization (%s), which ferry does not offer: only a pass phrase",
			addr, strings.Join(resp.AuthMethods, ", "))
	}

	csr, key, err := gsi.NewRequest(0)
	if err != nil {
		return nil, fmt.Errorf("MyProxy: making a key: %w", err)
	}
	if _, err := conn.Write(csr); err != nil {
		return nil, fail("sending the certificate request", err)
	}
	ders, rest, err := readCerts(conn, o.Username)
	var se *ServerError
	if errors.As(err, &se) {
		return nil, se
	}
	if err != nil {
		return nil, fail("reading the certificates", err)
	}
	cred, err := credential(ders, key)
	if err != nil {
		return nil, fmt.Errorf("MyProxy %s: the credential sent: %w", addr, err)
	}
	// The server ends with a response of its own (myproxy-server 6 sends
	// RESPONSE=0; myproxy-logon closes without reading it). An error
	// there counts; no response at all (the connection closed, or
	// nothing within finalWait) does not.
	if _, ok := ctx.Deadline(); !ok || time.Until(deadline(ctx)) > finalWait {
		raw.SetReadDeadline(time.Now().Add(finalWait))
	}
	text, err = readText(conn, rest)
	if err != nil {
		return cred, nil
	}
	if resp, err := parseResponse(text); err == nil && resp.Code == respError {
		return nil, newServerError(o.Username, resp.Errors)
	}
	return cred, nil
}

// finalWait bounds the wait for the server's last response.
const finalWait = 5 * time.Second

func deadline(ctx context.Context) time.Time { d, _ := ctx.Deadline(); return d }

// splitAddr splits host[:port], the port 7512 if none.
func splitAddr(addr string) (host, port string, err error) {
	if h, p, err := net.SplitHostPort(addr); err == nil {
		host, port = h, p
	} else if strings.Count(addr, ":") > 1 || !strings.Contains(addr, ":") {
		host, port = strings.Trim(addr, "[]"), DefaultPort
	} else {
		return "", "", fmt.Errorf("bad address %q: %w", addr, err)
	}
	if host == "" {
		return "", "", fmt.Errorf("bad address %q: no host", addr)
	}
	return host, port, nil
}

// identityError is a server refused for who it is.
type identityError struct{ err error }

func (e *identityError) Error() string { return e.err.Error() }
func (e *identityError) Unwrap() error { return e.err }

// checkServer checks the server's chain against trust and its identity
// against the host dialled or the DN expected.
func checkServer(trust *gsi.Trust, chain []*x509.Certificate, host, serverDN string, now time.Time) error {
	id, err := trust.Verify(chain, now)
	if err != nil {
		return &identityError{fmt.Errorf("server certificate: %w", err)}
	}
	if serverDN != "" {
		if id.DN != serverDN && unescapeDN(id.DN) != unescapeDN(serverDN) {
			return &identityError{fmt.Errorf("server identity %s is not %s (ServerDN)", id.DN, serverDN)}
		}
		return nil
	}
	eec := chain[0]
	for _, c := range chain {
		if dn, err := gsi.OneLine(c.RawSubject); err == nil && dn == id.DN {
			eec = c
			break
		}
	}
	if !namesHost(eec, host) {
		return &identityError{fmt.Errorf("server identity %s is not the host %s (want CN=host/%s, CN=myproxy/%s or CN=%s, or give its DN as ServerDN)",
			id.DN, host, host, host, host)}
	}
	return nil
}

// unescapeDN undoes OpenSSL 3's escapes of "/" and "+" in a one-line DN
// (gsi.OneLine): MyProxy's tools print "/CN=host\/example.org", OpenSSL
// 1.x and many configurations say "/CN=host/example.org".
func unescapeDN(dn string) string {
	return strings.NewReplacer(`\/`, "/", `\+`, "+").Replace(dn)
}

// namesHost reports whether a host certificate names host: by its
// subject alternative names when it has any (RFC 2818), else by its last
// CN, "host/<host>", "myproxy/<host>" or "<host>" (myproxy-logon(1)).
// Names compare without regard to case.
func namesHost(c *x509.Certificate, host string) bool {
	if len(c.DNSNames) > 0 || len(c.IPAddresses) > 0 {
		if ip := net.ParseIP(host); ip != nil {
			for _, a := range c.IPAddresses {
				if a.Equal(ip) {
					return true
				}
			}
			return false
		}
		return c.VerifyHostname(host) == nil
	}
	cn := c.Subject.CommonName
	if cn == "" {
		return false
	}
	for _, want := range []string{"host/" + host, "myproxy/" + host, host} {
		if strings.EqualFold(cn, want) {
			return true
		}
	}
	return false
}

// readText reads a NUL-terminated message of the server's, text in one
// or more TLS records, after the bytes of it already read (pre). At EOF
// with nothing read it returns io.EOF.
func readText(r io.Reader, pre []byte) ([]byte, error) {
	msg := pre
	buf := make([]byte, 4096)
	for {
		if i := bytes.IndexByte(msg, 0); i >= 0 {
			if i != len(msg)-1 {
				return nil, fmt.Errorf("%d bytes after the response", len(msg)-1-i)
			}
			return msg[:i], nil
		}
		if len(msg) > maxResponse {
			return nil, fmt.Errorf("a response of over %d bytes", maxResponse)
		}
		n, err := r.Read(buf)
		msg = append(msg, buf[:n]...)
		if n > 0 {
			continue
		}
		switch {
		case err == io.EOF && len(msg) == 0:
			return nil, io.EOF
		case err == io.EOF:
			return nil, errors.New("the server closed the connection inside its response")
		case err != nil:
			return nil, err
		}
	}
}

// readCerts reads the server's certificates: a count byte and that many
// DER certificates. rest is what was read after them. A server that
// fails to sign sends an error response instead (myproxy_server.c:
// "Unable to delegate credentials."): that is a *ServerError.
func readCerts(r io.Reader, username string) (ders [][]byte, rest []byte, err error) {
	var msg []byte
	buf := make([]byte, 16<<10)
	for {
		n, err := r.Read(buf)
		msg = append(msg, buf[:n]...)
		const resp = "VERSION="
		if bytes.HasPrefix(msg, []byte(resp)) {
			return nil, nil, responseError(r, msg, username)
		}
		if len(msg) < len(resp) && bytes.HasPrefix([]byte(resp), msg) && err == nil {
			continue // a response or certificates: too soon to tell
		}
		if ders, rest, complete, perr := parseCerts(msg); perr != nil {
			return nil, nil, perr
		} else if complete {
			return ders, rest, nil
		}
		if len(msg) > maxCerts {
			return nil, nil, fmt.Errorf("certificates of over %d bytes", maxCerts)
		}
		switch {
		case n > 0:
		case err == io.EOF && len(msg) == 0:
			return nil, nil, errors.New("the server closed the connection without sending a certificate")
		case err == io.EOF:
			return nil, nil, errors.New("the server closed the connection inside its certificates")
		case err != nil:
			return nil, nil, err
		}
	}
}

// responseError reads and parses a response that came instead of data,
// and returns its error.
func responseError(r io.Reader, pre []byte, username string) error {
	text, err := readText(r, pre)
	if err != nil {
		return err
	}
	resp, err := parseResponse(text)
	if err != nil {
		return err
	}
	if resp.Code == respError {
		return newServerError(username, resp.Errors)
	}
	return fmt.Errorf("response code %d instead of certificates", resp.Code)
}

// credential makes the credential of the certificates the server sent for
// key: the proxy first, each certificate signed by the one after it.
func credential(ders [][]byte, key crypto.Signer) (*gsi.Credential, error) {
	chain := make([]*x509.Certificate, len(ders))
	for i, der := range ders {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", i, err)
		}
		chain[i] = c
	}
	for i := 0; i+1 < len(chain); i++ {
		c, issuer := chain[i], chain[i+1]
		if err := issuer.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature); err != nil {
			return nil, fmt.Errorf("certificate %d is not signed by certificate %d: %w", i, i+1, err)
		}
	}
	return gsi.AcceptDelegation(ders[0], key, chain[1:])
}
