// Package gss is GSI's GSSAPI mechanism as GCT speaks it: TLS whose
// records travel in tokens (a control channel's ADAT, ENC and 632 lines)
// or straight on a socket (a data channel), followed by GSI's own
// exchange inside the TLS session: the acceptor's keep-going byte, the
// initiator's delegation flag ('D' or '0') and, when it delegates, the
// acceptor's certificate request and the initiator's proxy certificate
// for it. Wrap and Unwrap then protect messages as TLS application data
// records.
//
// Who the peer is and what a valid chain is are the caller's: Config's
// VerifyPeer sees the peer's chain (a proxy chain crypto/x509 would
// refuse), SignRequest and NewRequest make the delegated proxy. The
// package imports nothing of ferry's.
package gss

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
	"sync"
	"time"
)

// Config is one side's part of a security context.
type Config struct {
	// Certificate is this side's credential: the chain (leaf first, its
	// issuers after it) and the leaf's key.
	Certificate tls.Certificate
	// VerifyPeer checks the peer's chain, leaf first; an error refuses
	// the peer.
	VerifyPeer func(chain []*x509.Certificate) error
	// Delegate (initiator) asks to delegate a credential; SignRequest
	// makes the proxy certificate (DER) for the acceptor's request.
	Delegate    bool
	SignRequest func(csrDER []byte) (certDER []byte, err error)
	// NewRequest (acceptor) makes the key and the request (DER) of a
	// delegated credential, for a peer whose leaf is peer; nil refuses
	// delegation.
	NewRequest func(peer *x509.Certificate) (csrDER []byte, key crypto.Signer, err error)
	// MinVersion is the oldest TLS version allowed; 0 means TLS 1.2.
	// MaxVersion is the newest; 0 means TLS 1.3.
	MinVersion, MaxVersion uint16
}

// Delegated is a credential the initiator delegated: its proxy
// certificate first, then the initiator's chain, and the key the acceptor
// made.
type Delegated struct {
	Chain []*x509.Certificate
	Key   crypto.Signer
}

// ErrProtocol is a token or an exchange that breaks GSI's protocol.
var ErrProtocol = errors.New("gss: protocol violation")

// maxToken bounds one token: a TLS flight with a long certificate chain.
const maxToken = 1 << 20

// Context is one security context driven by tokens. Step runs the
// exchange; once it is done, Wrap and Unwrap protect messages.
type Context struct {
	cfg       Config
	initiator bool
	tc        *tokenConn
	conn      *tls.Conn

	started bool
	result  chan error // the exchange's end
	done    bool
	err     error

	delegated *Delegated
	peer      []*x509.Certificate

	wmu, rmu sync.Mutex
}

// NewInitiator is the context of the side that starts (a client).
func NewInitiator(cfg Config) *Context { return newContext(cfg, true) }

// NewAcceptor is the context of the side that answers (a server).
func NewAcceptor(cfg Config) *Context { return newContext(cfg, false) }

func newContext(cfg Config, initiator bool) *Context {
	tc := newTokenConn()
	c := &Context{cfg: cfg, initiator: initiator, tc: tc, result: make(chan error, 1)}
	tcfg := c.tlsConfig()
	if initiator {
		c.conn = tls.Client(tc, tcfg)
	} else {
		c.conn = tls.Server(tc, tcfg)
	}
	return c
}

// tlsConfig is the TLS side of the context: each side presents its
// chain and demands the other's, which VerifyPeer judges.
func (c *Context) tlsConfig() *tls.Config {
	return &tls.Config{
		Certificates:           []tls.Certificate{c.cfg.Certificate},
		ClientAuth:             tls.RequireAnyClientCert,
		InsecureSkipVerify:     true, // VerifyPeer checks the chain instead
		MinVersion:             max(c.cfg.MinVersion, tls.VersionTLS12),
		MaxVersion:             c.cfg.MaxVersion,
		SessionTicketsDisabled: true, // nothing after the handshake but GSI's own exchange
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			chain, err := parseChain(raw)
			if err != nil {
				return err
			}
			if c.cfg.VerifyPeer != nil {
				if err := c.cfg.VerifyPeer(chain); err != nil {
					return err
				}
			}
			c.peer = chain
			return nil
		},
	}
}

func parseChain(raw [][]byte) ([]*x509.Certificate, error) {
	if len(raw) == 0 {
		return nil, errors.New("gss: the peer sent no certificate")
	}
	chain := make([]*x509.Certificate, len(raw))
	for i, der := range raw {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("gss: the peer's certificate %d: %w", i, err)
		}
		chain[i] = c
	}
	return chain, nil
}

// Step takes the peer's last token (nil for an initiator's first step)
// and returns the token to send, if any, and whether the exchange is
// complete. A complete exchange may still have a last token to send.
func (c *Context) Step(in []byte) (out []byte, done bool, err error) {
	switch {
	case c.err != nil:
		return nil, false, c.err
	case c.done:
		return nil, true, fmt.Errorf("%w: a token after the exchange ended", ErrProtocol)
	case len(in) > maxToken:
		return nil, false, c.fail(fmt.Errorf("%w: a token of %d bytes", ErrProtocol, len(in)))
	}
	if !c.started {
		if c.initiator != (in == nil) {
			return nil, false, c.fail(fmt.Errorf("%w: the initiator speaks first", ErrProtocol))
		}
		c.started = true
		c.tc.give(in)
		go func() { c.result <- c.exchange() }()
	} else {
		if len(in) == 0 {
			return nil, false, c.fail(fmt.Errorf("%w: an empty token", ErrProtocol))
		}
		c.tc.give(in)
	}
	select {
	case <-c.tc.wants:
		if out = c.tc.take(); out == nil {
			// Tokens are whole flights: a side that waits for more
			// with nothing to say was sent a cut or empty one.
			return nil, false, c.fail(fmt.Errorf("%w: a token that ends inside a TLS record", ErrProtocol))
		}
		return out, false, nil
	case err := <-c.result:
		out = c.tc.take()
		if err != nil {
			return out, false, c.fail(err)
		}
		c.done = true
		c.tc.nonBlocking()
		return out, true, nil
	}
}

// fail ends the context with err.
func (c *Context) fail(err error) error {
	c.err = err
	c.tc.close()
	return err
}

// exchange is the whole exchange as the side sees it, run while Step
// feeds it tokens: the TLS handshake, then GSI's bytes inside the
// session.
func (c *Context) exchange() error {
	if err := c.conn.Handshake(); err != nil {
		return fmt.Errorf("gss: TLS handshake: %w", err)
	}
	if c.initiator {
		return c.initiate()
	}
	return c.accept()
}

// initiate: after the handshake the acceptor still has a token to send
// under TLS 1.3 (its keep-going byte; under TLS 1.2 its Finished ended
// the handshake); then the flag, and the proxy for the acceptor's
// request.
func (c *Context) initiate() error {
	if c.conn.ConnectionState().Version >= tls.VersionTLS13 {
		var b [1]byte
		if _, err := c.conn.Read(b[:]); err != nil {
			return fmt.Errorf("gss: reading the acceptor's token: %w", err)
		}
	}
	if !c.cfg.Delegate {
		_, err := c.conn.Write([]byte{'0'})
		return err
	}
	if _, err := c.conn.Write([]byte{'D'}); err != nil {
		return err
	}
	req, err := c.readMessage()
	if err != nil {
		return fmt.Errorf("gss: reading the delegation request: %w", err)
	}
	if c.cfg.SignRequest == nil {
		return errors.New("gss: no way to sign a delegation request")
	}
	cert, err := c.cfg.SignRequest(req)
	if err != nil {
		return fmt.Errorf("gss: signing the delegation request: %w", err)
	}
	_, err = c.conn.Write(cert)
	return err
}

// accept: the keep-going byte when the handshake left nothing to send,
// the flag, and for 'D' the request and the delegated proxy.
func (c *Context) accept() error {
	if c.tc.pending() == 0 {
		if _, err := c.conn.Write([]byte{0}); err != nil {
			return err
		}
	}
	var flag [1]byte
	if _, err := c.conn.Read(flag[:]); err != nil {
		return fmt.Errorf("gss: reading the delegation flag: %w", err)
	}
	switch flag[0] {
	case '0':
		return nil
	case 'D':
	default:
		return fmt.Errorf("%w: delegation flag %q", ErrProtocol, flag[0])
	}
	if c.cfg.NewRequest == nil {
		return errors.New("gss: delegation offered, and this side takes none")
	}
	req, key, err := c.cfg.NewRequest(c.peer[0])
	if err != nil {
		return fmt.Errorf("gss: making the delegation request: %w", err)
	}
	if _, err := c.conn.Write(req); err != nil {
		return err
	}
	der, err := c.readMessage()
	if err != nil {
		return fmt.Errorf("gss: reading the delegated certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("gss: the delegated certificate: %w", err)
	}
	if !publicKeyMatches(cert.PublicKey, key.Public()) {
		return fmt.Errorf("%w: the delegated certificate is not for the requested key", ErrProtocol)
	}
	c.delegated = &Delegated{Chain: append([]*x509.Certificate{cert}, c.peer...), Key: key}
	return nil
}

func publicKeyMatches(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

// readMessage reads one DER message of the exchange: it may span TLS
// records, and is whole when its DER length says so.
func (c *Context) readMessage() ([]byte, error) {
	var msg []byte
	buf := make([]byte, 16<<10)
	for {
		n, err := c.conn.Read(buf)
		msg = append(msg, buf[:n]...)
		if want, ok := derLength(msg); ok && len(msg) >= want {
			if len(msg) > want {
				return nil, fmt.Errorf("%w: %d bytes after a DER message", ErrProtocol, len(msg)-want)
			}
			return msg, nil
		}
		if err != nil {
			return nil, err
		}
		if len(msg) > maxToken {
			return nil, fmt.Errorf("%w: a message of over %d bytes", ErrProtocol, maxToken)
		}
	}
}

// derLength is the length of the DER element b starts with, when its
// header is there.
func derLength(b []byte) (int, bool) {
	if len(b) < 2 {
		return 0, false
	}
	l := int(b[1])
	if l < 0x80 {
		return 2 + l, true
	}
	n := l & 0x7f
	if n == 0 || n > 4 || len(b) < 2+n {
		return 0, n == 0 || n > 4 // indefinite or huge: whole at once (and refused by the parser)
	}
	l = 0
	for _, x := range b[2 : 2+n] {
		l = l<<8 | int(x)
	}
	return 2 + n + l, true
}

// Peer is the peer's chain, leaf first, once the handshake checked it.
func (c *Context) Peer() []*x509.Certificate { return c.peer }

// Delegated is the credential the initiator delegated; nil if it did
// not.
func (c *Context) Delegated() *Delegated { return c.delegated }

// Encrypts reports whether Wrap's tokens are encrypted (ENC, 632) and not
// only integrity-protected (MIC, 631): always, with the ciphers crypto/tls
// offers.
func (c *Context) Encrypts() bool { return true }

// Wrap protects msg: the TLS records that carry it.
func (c *Context) Wrap(msg []byte) ([]byte, error) {
	if !c.done {
		return nil, fmt.Errorf("%w: wrap before the exchange ended", ErrProtocol)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.conn.Write(msg); err != nil {
		return nil, err
	}
	return c.tc.take(), nil
}

// Unwrap opens a token Wrap made on the other side: whole TLS records.
func (c *Context) Unwrap(token []byte) ([]byte, error) {
	if !c.done {
		return nil, fmt.Errorf("%w: unwrap before the exchange ended", ErrProtocol)
	}
	if err := wholeRecords(token); err != nil {
		return nil, err
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.tc.give(token)
	var out []byte
	buf := make([]byte, 16<<10)
	for {
		// TLS takes in what the token holds and hands it out a record
		// at a time; the token is used up when TLS asks for more.
		n, err := c.conn.Read(buf)
		out = append(out, buf[:n]...)
		switch {
		case errors.Is(err, errNoToken):
			return out, nil
		case err != nil:
			return nil, fmt.Errorf("gss: unwrap: %w", err)
		}
	}
}

// wholeRecords checks that b is a run of complete TLS records.
func wholeRecords(b []byte) error {
	if len(b) == 0 || len(b) > maxToken {
		return fmt.Errorf("%w: a token of %d bytes", ErrProtocol, len(b))
	}
	for len(b) > 0 {
		if len(b) < 5 || b[0] < 20 || b[0] > 24 || b[1] != 3 {
			return fmt.Errorf("%w: not a TLS record", ErrProtocol)
		}
		n := 5 + (int(b[3])<<8 | int(b[4]))
		if n > len(b) {
			return fmt.Errorf("%w: a cut TLS record", ErrProtocol)
		}
		b = b[n:]
	}
	return nil
}

// errNoToken is a read of the context's connection with no token left;
// temporary, so that TLS does not hold it against the next token.
var errNoToken error = noToken{}

type noToken struct{}

func (noToken) Error() string   { return "gss: no token" }
func (noToken) Timeout() bool   { return true }
func (noToken) Temporary() bool { return true }

// tokenConn is the connection TLS runs on: reads come from the peer's
// tokens, writes gather into the next token. During the exchange a read
// with nothing left tells Step (wants) and waits for the next token;
// afterwards it fails at once with errNoToken.
type tokenConn struct {
	mu       sync.Mutex
	cond     *sync.Cond // a token came, or the context closed
	in       []byte
	out      bytes.Buffer
	wants    chan struct{} // one signal each time a read waits for a token
	closed   bool
	blocking bool
}

func newTokenConn() *tokenConn {
	t := &tokenConn{wants: make(chan struct{}, 1), blocking: true}
	t.cond = sync.NewCond(&t.mu)
	return t
}

func (t *tokenConn) Read(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.in) == 0 {
		switch {
		case t.closed:
			return 0, net.ErrClosed
		case !t.blocking:
			return 0, errNoToken
		}
		t.wants <- struct{}{} // Step, which fed the last token, takes it
		t.cond.Wait()
	}
	n := copy(p, t.in)
	t.in = t.in[n:]
	return n, nil
}

func (t *tokenConn) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, net.ErrClosed
	}
	return t.out.Write(p)
}

// give hands the reader the next token; a reader waiting for it goes on.
func (t *tokenConn) give(b []byte) {
	t.mu.Lock()
	t.in = append(t.in, b...)
	t.mu.Unlock()
	t.cond.Broadcast()
}

// take returns what was written since the last take.
func (t *tokenConn) take() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.out.Len() == 0 {
		return nil
	}
	b := bytes.Clone(t.out.Bytes())
	t.out.Reset()
	return b
}

func (t *tokenConn) pending() int { t.mu.Lock(); defer t.mu.Unlock(); return t.out.Len() }
func (t *tokenConn) unread() int  { t.mu.Lock(); defer t.mu.Unlock(); return len(t.in) }

func (t *tokenConn) nonBlocking() { t.mu.Lock(); t.blocking = false; t.mu.Unlock() }

func (t *tokenConn) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.cond.Broadcast()
}

func (t *tokenConn) Close() error                     { t.close(); return nil }
func (t *tokenConn) LocalAddr() net.Addr              { return tokenAddr{} }
func (t *tokenConn) RemoteAddr() net.Addr             { return tokenAddr{} }
func (t *tokenConn) SetDeadline(time.Time) error      { return nil }
func (t *tokenConn) SetReadDeadline(time.Time) error  { return nil }
func (t *tokenConn) SetWriteDeadline(time.Time) error { return nil }

type tokenAddr struct{}

func (tokenAddr) Network() string { return "gss" }
func (tokenAddr) String() string  { return "gss tokens" }

// Over runs a security context straight on c, as GCT's data channels do:
// the TLS handshake on the socket (the initiator is the side that
// connected), then, unless sslOnly, GSI's bytes inside the session (the
// acceptor's keep-going byte under TLS 1.3, the initiator's flag '0': no
// delegation on a data channel). GCT's data channels run plain TLS, with
// no such bytes, when the payload goes over it (PROT S, P: its
// "SSL-compatible" mode, globus_ftp_control_data.c), and the full
// exchange when only the handshake is (PROT C). It reads c one TLS record
// at a time, never past the exchange, so that the payload which may
// follow at once in the clear (PROT C) stays for the caller.
func Over(ctx context.Context, c net.Conn, cfg Config, initiator, sslOnly bool) (*tls.Conn, error) {
	x := &Context{cfg: cfg, initiator: initiator}
	tcfg := x.tlsConfig()
	rc := &RecordConn{Conn: c}
	if initiator {
		x.conn = tls.Client(rc, tcfg)
	} else {
		x.conn = tls.Server(rc, tcfg)
	}
	if err := x.conn.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("gss: TLS handshake: %w", err)
	}
	if sslOnly {
		return x.conn, nil
	}
	tls13 := x.conn.ConnectionState().Version >= tls.VersionTLS13
	var b [1]byte
	if initiator {
		if tls13 {
			if _, err := io.ReadFull(x.conn, b[:]); err != nil {
				return nil, fmt.Errorf("gss: reading the acceptor's token: %w", err)
			}
		}
		if _, err := x.conn.Write([]byte{'0'}); err != nil {
			return nil, err
		}
		return x.conn, nil
	}
	if tls13 { // the initiator's Finished came last: this side has a token to send
		if _, err := x.conn.Write([]byte{0}); err != nil {
			return nil, err
		}
	}
	if _, err := io.ReadFull(x.conn, b[:]); err != nil {
		return nil, fmt.Errorf("gss: reading the delegation flag: %w", err)
	}
	if b[0] != '0' {
		return nil, fmt.Errorf("%w: delegation flag %q on a data channel", ErrProtocol, b[0])
	}
	return x.conn, nil
}

// tlsHeaderLen is the length of a TLS record's header: type, version,
// length.
const tlsHeaderLen = 5

// RecordConn reads a connection no further than the end of the TLS
// record under way: a record's header, then exactly its body.
type RecordConn struct {
	net.Conn
	hdr  [tlsHeaderLen]byte
	hdrN int // header bytes read of the current record
	left int // body bytes of the current record not yet read
}

func (r *RecordConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.left == 0 && r.hdrN < tlsHeaderLen {
		n, err := r.Conn.Read(p[:min(len(p), tlsHeaderLen-r.hdrN)])
		copy(r.hdr[r.hdrN:], p[:n])
		r.hdrN += n
		if r.hdrN == tlsHeaderLen {
			r.left = int(r.hdr[3])<<8 | int(r.hdr[4])
			if r.left == 0 {
				r.hdrN = 0
			}
		}
		return n, err
	}
	n, err := r.Conn.Read(p[:min(len(p), r.left)])
	r.left -= n
	if r.left == 0 {
		r.hdrN = 0
	}
	return n, err
}

// NetConn is the connection the record reader reads.
func (r *RecordConn) NetConn() net.Conn { return r.Conn }
