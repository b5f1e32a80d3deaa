// Package agent is ferry connect: a GridFTP endpoint server for a machine
// that accepts no connections. It pairs once with its endpoint (Pair: a
// one-time setup key buys a certificate from the service's CA, for a key
// that never leaves the machine) and then keeps one outbound, mutually
// authenticated TLS tunnel to one of the service's relays (Agent.Run).
// The service drives the agent's GridFTP server through the tunnel; every
// data connection the server takes part in is one it opens: to the other
// server's passive address when it sends, and to the relay, which
// listens in its place, when it receives. The relay joins it only to the
// senders the server expects: the agent names them with each listener it
// asks for (tunnel.Listen).
//
// Relays are named by relay URLs (tunnel.Dialer). The relay tells the
// agent the URLs of all the service's relays; when the agent loses its
// tunnel it connects to the next, so that any process of the service can
// carry it.
//
// Besides its credentials (Files, in its directory) the agent keeps no
// state: stopped and started again, it picks up where the service's task
// records say.
package agent

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"ferry/stack"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"ferry/connect/tunnel"
	"ferry/gridftp/server"
	"ferry/storage"
)

// Files of an agent's directory.
const (
	CertFile = "cert.pem" // the agent's certificate
	KeyFile  = "key.pem"  // its private key (mode 0600)
	CAFile   = "ca.pem"   // the service's CA
)

const dialTimeout = 30 * time.Second

// Pair trades a setup key — its secret and the pin of the service's CA —
// for a certificate from the relay at relayURL, and keeps it in dir with
// a new key; it returns the endpoint the certificate is for. The relay is
// trusted only if its chain holds the pinned CA.
func Pair(ctx context.Context, relayURL, secret, pin, dir string) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", err
	}
	var pinned *x509.Certificate
	conf := &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{tunnel.ProtoPair},
		// The agent has no CA yet: the pin in the setup key stands for it.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			pinned = nil
			var chain []*x509.Certificate
			for _, der := range raw {
				c, err := x509.ParseCertificate(der)
				if err != nil {
					return err
				}
				if tunnel.Pin(c) == pin {
					pinned = c
				}
				chain = append(chain, c)
			}
			if pinned == nil || len(chain) == 0 {
				return errors.New("the relay's certificate is not from the CA the setup key names")
			}
			return verifyRelay(chain[0], pool(pinned))
		},
	}
	conn, err := dialTLS(ctx, relayURL, conf)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(dialTimeout))
	if err := tunnel.WriteLine(conn, tunnel.PairRequest{Secret: secret, PublicKey: pub}); err != nil {
		return "", fmt.Errorf("pair: %w", err)
	}
	var reply tunnel.PairReply
	if err := json.NewDecoder(io.LimitReader(conn, 64<<10)).Decode(&reply); err != nil {
		return "", fmt.Errorf("pair: %w", err)
	}
	if reply.Error != "" {
		return "", fmt.Errorf("the service refused to pair: %s", reply.Error)
	}
	cert, err := x509.ParseCertificate(reply.Certificate)
	if err != nil {
		return "", fmt.Errorf("pair: %w", err)
	}
	if err := checkOwn(cert, &key.PublicKey, pinned); err != nil {
		return "", fmt.Errorf("pair: %w", err)
	}
	keyPEM, err := tunnel.KeyPEM(key)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{KeyFile, keyPEM, 0o600},
		{CAFile, tunnel.CertPEM(pinned.Raw), 0o644},
		{CertFile, tunnel.CertPEM(cert.Raw), 0o644},
	} {
		if err := writeFile(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return "", err
		}
	}
	return reply.Endpoint, nil
}

func pool(c *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c)
	return p
}

// verifyRelay checks that leaf is the relay's certificate, issued by the
// CA of roots.
func verifyRelay(leaf *x509.Certificate, roots *x509.CertPool) error {
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: tunnel.RelayName})
	return err
}

// checkOwn checks that cert certifies pub, as an agent, under the CA.
func checkOwn(cert *x509.Certificate, pub *ecdsa.PublicKey, caCert *x509.Certificate) error {
	if k, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !k.Equal(pub) {
		return errors.New("the certificate is not for this agent's key")
	}
	if _, _, err := tunnel.ParseAgent(cert); err != nil {
		return err
	}
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool(caCert), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err
}

// writeFile replaces a file at once (write, then rename).
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// dialRelay opens a connection to the relay at relayURL, within
// dialTimeout.
func dialRelay(ctx context.Context, relayURL string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := tunnel.Dialer{}.Dial(ctx, relayURL)
	if err != nil {
		return nil, fmt.Errorf("connect to the relay %s: %w", relayURL, err)
	}
	return c, nil
}

func dialTLS(ctx context.Context, relayURL string, conf *tls.Config) (*tls.Conn, error) {
	c, err := dialRelay(ctx, relayURL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	tc := tls.Client(c, conf)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("connect to the relay %s: %w", relayURL, err)
	}
	return tc, nil
}

// Agent serves FS through the service's relays with the credentials in
// Dir.
type Agent struct {
	// Layers are the disk stack layers its server offers (nil: the file
	// layer and ordering).
	Layers stack.Registry
	// Relays are the URLs of the relays to connect to, in turn, until a
	// relay tells the agent the service's own list.
	Relays []string
	Dir    string // the credentials Pair saved
	FS     storage.Driver
	Logger *slog.Logger
	// Connected, when set, is called each time the tunnel is up, with
	// the endpoint's owner#name (its ID from a relay that sends none).
	Connected func(endpoint, relayURL string)

	mu      sync.Mutex
	sess    *tunnel.Session // the current tunnel; nil between two
	relay   string          // the current tunnel's relay
	learned []string        // the relays the service named last
	cert    tls.Certificate
	ca      *x509.Certificate
}

// errOldRelay says that the relay speaks only the tunnel protocol before
// yamux.
var errOldRelay = errors.New("the relay is older than this agent: it speaks only " + tunnel.ProtoTunnelOld + "; upgrade the service")

// RevokedError is the relay's refusal of the agent's certificate, which
// no retry mends: the agent must pair again.
type RevokedError struct{ Reason string }

func (e *RevokedError) Error() string { return "the relay refused this agent: " + e.Reason }

func (a *Agent) log() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// load reads the credentials from Dir.
func (a *Agent) load() error {
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(a.Dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("this machine is not paired yet (no %s): run ferry connect with --setup-key", filepath.Join(a.Dir, name))
		}
		return b, err
	}
	certPEM, err := read(CertFile)
	if err != nil {
		return err
	}
	keyPEM, err := read(KeyFile)
	if err != nil {
		return err
	}
	caPEM, err := read(CAFile)
	if err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("%s: %w", a.Dir, err)
	}
	caCert, err := tunnel.ParseCertPEM(caPEM)
	if err != nil {
		return fmt.Errorf("%s: %w", CAFile, err)
	}
	a.mu.Lock()
	a.cert, a.ca = cert, caCert
	a.mu.Unlock()
	return nil
}

// Run keeps a tunnel up, to the relays in turn, and serves the GridFTP
// sessions the service opens through it, until ctx ends. When a tunnel
// ends it connects to the next relay at once, and waits, with backoff,
// only after every relay failed. It returns a *RevokedError when a relay
// refuses the certificate.
func (a *Agent) Run(ctx context.Context) error {
	if len(a.Relays) == 0 {
		return errors.New("agent: no relay to connect to")
	}
	if err := a.load(); err != nil {
		return err
	}
	// Only the service reaches this server, through the relay: its
	// sessions are anonymous, write, and all come from the relay's address.
	srv := &server.Server{FS: a.FS, Anonymous: true, AnonymousWrite: true, MaxSessionsPerAddress: -1,
		Listen: a.listen, Logger: a.Logger, Layers: a.Layers}
	ln := newStreamListener()
	go srv.Serve(ln)
	defer srv.Close()
	delay, failed, next := time.Second, 0, 0
	for {
		relays := a.relays()
		relay := relays[next%len(relays)]
		start := time.Now()
		up, err := a.serve(ctx, ln, relay)
		if ctx.Err() != nil {
			return nil
		}
		if _, ok := errors.AsType[*RevokedError](err); ok {
			return err
		}
		relays = a.relays() // as the relay may have told
		next = (slices.Index(relays, relay) + 1) % len(relays)
		if up && time.Since(start) > time.Minute {
			delay, failed = time.Second, 0 // it was up a while: this is a new outage
		} else {
			failed++
		}
		if failed < len(relays) {
			a.log().Warn("tunnel down; trying the next relay", "relay", relay, "err", err, "next", relays[next])
			continue
		}
		a.log().Warn("tunnel down; reconnecting", "relay", relay, "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		failed, delay = 0, min(2*delay, 30*time.Second)
	}
}

// relays is the list the agent tries: those the service named last, then
// those it was given that the service did not name.
func (a *Agent) relays() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := slices.Clone(a.learned)
	for _, r := range a.Relays {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// learn keeps the URLs of the service's relays.
func (a *Agent) learn(urls []string) {
	if len(urls) == 0 {
		return
	}
	a.mu.Lock()
	a.learned = slices.Clone(urls)
	a.mu.Unlock()
	a.log().Debug("the service's relays", "urls", urls)
}

// serve runs one tunnel to relay until it ends; up says whether it came
// up.
func (a *Agent) serve(ctx context.Context, ln *streamListener, relay string) (up bool, err error) {
	a.mu.Lock()
	conf := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{tunnel.ProtoTunnel, tunnel.ProtoTunnelOld}, // the old one to tell an older relay
		Certificates: []tls.Certificate{a.cert},
		RootCAs:      pool(a.ca),
		ServerName:   tunnel.RelayName,
	}
	a.mu.Unlock()
	conn, err := dialTLS(ctx, relay, conf)
	if err != nil {
		return false, err
	}
	if conn.ConnectionState().NegotiatedProtocol == tunnel.ProtoTunnelOld {
		conn.Close()
		return false, errOldRelay
	}
	conn.SetDeadline(time.Now().Add(dialTimeout))
	var hello tunnel.Hello
	if err := tunnel.ReadLine(conn, &hello); err != nil {
		conn.Close()
		return false, fmt.Errorf("relay hello: %w", err)
	}
	if hello.Error != "" {
		conn.Close()
		if hello.Revoked {
			return false, &RevokedError{hello.Error}
		}
		return false, errors.New(hello.Error)
	}
	conn.SetDeadline(time.Time{})
	a.learn(hello.Relays)
	sess := tunnel.Client(conn)
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()
	a.mu.Lock()
	a.sess, a.relay = sess, relay
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.sess = nil
		a.mu.Unlock()
		sess.Close()
	}()
	name := cmp.Or(hello.Name, hello.Endpoint) // a relay before names: the ID
	a.log().Info("tunnel up", "relay", relay, "endpoint", name)
	if a.Connected != nil {
		a.Connected(name, relay)
	}
	for {
		st, err := sess.Accept()
		if err != nil {
			return true, err
		}
		switch st.Kind() {
		case tunnel.KindGridFTP:
			if !ln.push(st) {
				st.Close()
			}
		case tunnel.KindCert:
			go a.renew(st)
		case tunnel.KindRelays:
			go a.relaysFrom(st)
		default:
			st.Close()
		}
	}
}

// relaysFrom takes the URLs of the service's relays from the relay.
func (a *Agent) relaysFrom(st *tunnel.Stream) {
	defer st.Close()
	st.SetReadDeadline(time.Now().Add(dialTimeout))
	var r tunnel.Relays
	if err := tunnel.ReadLine(st, &r); err != nil {
		a.log().Warn("the service's relays", "err", err)
		return
	}
	a.learn(r.URLs)
}

// renew takes a renewed certificate from the relay and keeps it.
func (a *Agent) renew(st *tunnel.Stream) {
	defer st.Close()
	st.SetReadDeadline(time.Now().Add(dialTimeout))
	der, err := io.ReadAll(io.LimitReader(st, 16<<10))
	if err == nil {
		err = a.keep(der)
	}
	if err != nil {
		a.log().Warn("certificate renewal", "err", err)
	}
}

func (a *Agent) keep(der []byte) error {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	key := a.cert.PrivateKey.(*ecdsa.PrivateKey)
	if err := checkOwn(cert, &key.PublicKey, a.ca); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(a.Dir, CertFile), tunnel.CertPEM(der), 0o644); err != nil {
		return err
	}
	a.cert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}
	a.log().Info("certificate renewed", "until", cert.NotAfter)
	return nil
}

// listen is the GridFTP server's passive listener: one on the relay,
// which admits only senders at the addresses of from (any when nil).
func (a *Agent) listen(from []netip.Addr) (net.Listener, error) {
	a.mu.Lock()
	sess, relay := a.sess, a.relay
	a.mu.Unlock()
	if sess == nil {
		return nil, errors.New("no tunnel to the relay")
	}
	st, err := sess.Open(tunnel.KindListen)
	if err != nil {
		return nil, err
	}
	st.SetDeadline(time.Now().Add(dialTimeout))
	dec := json.NewDecoder(st)
	var p tunnel.Passive
	err = tunnel.WriteLine(st, tunnel.Listen{Any: from == nil, From: from})
	if err == nil {
		err = dec.Decode(&p)
	}
	if err != nil || p.Error != "" {
		st.Close()
		if err == nil {
			err = errors.New(p.Error)
		}
		return nil, fmt.Errorf("passive listener on the relay: %w", err)
	}
	ap, err := netip.ParseAddrPort(p.Addr)
	if err != nil {
		st.Close()
		return nil, err
	}
	st.SetDeadline(time.Time{})
	return &relayListener{st: st, dec: dec, addr: net.TCPAddrFromAddrPort(ap), relay: relay, log: a.log()}, nil
}

// relayListener accepts the data connections that senders make to the
// relay: for each, the relay sends a token and the agent connects out to
// join it.
type relayListener struct {
	st    *tunnel.Stream
	dec   *json.Decoder
	addr  *net.TCPAddr
	relay string // the URL of the relay that listens
	log   *slog.Logger
}

func (l *relayListener) Accept() (net.Conn, error) {
	for {
		var p tunnel.Passive
		if err := l.dec.Decode(&p); err != nil {
			return nil, net.ErrClosed
		}
		c, err := dialRelay(context.Background(), l.relay)
		if err == nil {
			c.SetWriteDeadline(time.Now().Add(dialTimeout))
			_, err = io.WriteString(c, tunnel.JoinMagic+p.Join)
			c.SetWriteDeadline(time.Time{})
		}
		if err == nil {
			return c, nil
		}
		if c != nil {
			c.Close()
		}
		l.log.Warn("join a data connection at the relay", "err", err) // the sender's waits, then the relay drops it
	}
}

func (l *relayListener) Close() error   { return l.st.Close() }
func (l *relayListener) Addr() net.Addr { return l.addr }

// streamListener hands the GridFTP server the control connections that
// arrive through the tunnels.
type streamListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newStreamListener() *streamListener {
	return &streamListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// push hands c to the server; false once the listener is closed.
func (l *streamListener) push(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *streamListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *streamListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is a placeholder: the listener has no address of its own.
func (l *streamListener) Addr() net.Addr { return &net.TCPAddr{} }
