// Package relay is the service's end of ferry connect. It serves agents'
// connections on a listener of its own (Serve) or one at a time, as the
// service's HTTP listener hands them over (ServeConn). TLS connections
// either pair an agent (a one-time setup key buys a certificate from the
// service's CA), carry its tunnel (tunnel.Session), authenticated by that
// certificate, or come from another process of the service, authenticated
// by its process certificate, to reach an agent connected here; plain
// connections that start with tunnel.JoinMagic are data connections
// agents open to join a sender's.
//
// Through a tunnel the service reaches the agent's GridFTP server (Dial),
// and the agent's server listens for data on the relay: for each passive
// listener the agent asks for, the relay listens on its own host and, for
// each connection a sender makes there, asks the agent to connect out and
// splices the two. So an agent never accepts a connection. The agent names
// the senders a listener admits (tunnel.Listen): any, when its server
// authenticates each data connection itself, or else only those at the
// addresses its server's own passive ports would admit; the relay closes
// every other connection before the agent hears of it.
//
// The store records which process each agent is connected to, so that the
// other processes reach it through this one; the agent learns the URLs of
// every process's relay (in its Hello, and again when they change, within
// RelaysEvery) and connects to another when it loses this one.
//
// Each agent is confined to its endpoint: its certificate names the
// endpoint and nothing else, the relay checks it against the store when
// the agent connects and every CheckEvery after (an endpoint deleted or
// given a new setup key revokes it), and its data connections are bounded.
package relay

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"ferry/connect/ca"
	"ferry/connect/tunnel"
	"ferry/service/domain"
)

// Limits.
const (
	handshakeTimeout = 10 * time.Second
	joinTimeout      = 30 * time.Second // for the agent to join a sender's connection
	// maxConns bounds an agent's passive listeners and data connections
	// (waiting and spliced) together.
	maxConns = 512
)

// Relay serves agents. Store, CA and Process are required.
type Relay struct {
	Store domain.Store
	CA    *ca.CA
	// Process is this service process's ID (domain.Process): the store
	// records that the agents connected here are reached through it.
	Process string
	// Public is the relay's IPv4 address as GridFTP servers reach it,
	// which passive listeners announce. Without it agents get no passive
	// listeners: they still send, and receive from ferry senders that
	// listen for them (PASVSEND).
	Public netip.Addr
	// Bind is the local address passive listeners bind to; when not
	// valid, that of the first listener Serve was given, or else every
	// address.
	Bind   netip.Addr
	Logger *slog.Logger
	Now    func() time.Time // the clock; time.Now when nil
	// Resumed is called when an agent's return made tasks runnable
	// again, so that workers look for work at once; nil: none.
	Resumed func()
	// CheckEvery is how often a connected agent's certificate is looked
	// up again (revocation, renewal); 0: 30 s.
	CheckEvery time.Duration
	// RelaysEvery is how often the relay looks for a change in the
	// service's relays (processes starting and going), which it then
	// tells its agents; 0: 5 s.
	RelaysEvery time.Duration

	once     sync.Once
	announce sync.Once
	done     chan struct{} // closed by Close
	mu       sync.Mutex
	agents   map[string]*peer
	joins    map[string]*join
	lns      map[net.Listener]bool
	bind     netip.Addr // Bind, or the first listener's IP
	closed   bool
	// tunnels are the agents' tunnels being served, and their watchers:
	// Close waits for them, so that none writes to the store after it.
	tunnels sync.WaitGroup
	// routeMu orders the store's records of where agents are connected
	// as the agents come and go.
	routeMu sync.Mutex

	certMu  sync.Mutex
	cert    *tls.Certificate
	spliced atomic.Int64
}

var _ domain.Agents = (*Relay)(nil)

// peer is one connected agent.
type peer struct {
	id     string
	sess   *tunnel.Session
	gone   chan struct{}
	routed atomic.Bool // the store records that it is reached here

	mu    sync.Mutex
	conns map[io.Closer]bool // passive listeners and data connections
}

// track adds c to what the agent holds; false when it holds too much or is
// gone.
func (a *peer) track(c io.Closer) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conns == nil || len(a.conns) >= maxConns {
		return false
	}
	a.conns[c] = true
	return true
}

func (a *peer) untrack(c io.Closer) {
	a.mu.Lock()
	delete(a.conns, c)
	a.mu.Unlock()
}

// end closes what the agent holds.
func (a *peer) end() {
	a.mu.Lock()
	conns := a.conns
	a.conns = nil
	a.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// join is a sender's connection that waits for its agent's.
type join struct {
	agent *peer
	conn  net.Conn
	timer *time.Timer
}

func (r *Relay) init() {
	r.once.Do(func() {
		r.agents, r.joins, r.lns = map[string]*peer{}, map[string]*join{}, map[net.Listener]bool{}
		r.bind, r.done = r.Bind, make(chan struct{})
	})
}

// ready checks the configuration.
func (r *Relay) ready() error {
	if r.Store == nil || r.CA == nil || r.Process == "" {
		return errors.New("relay: Store, CA and Process are required")
	}
	if r.Public.IsValid() && !r.Public.Unmap().Is4() {
		return errors.New("relay: Public must be an IPv4 address")
	}
	r.init()
	r.announce.Do(func() { go r.announcer() })
	return nil
}

func (r *Relay) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Relay) log() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("relay closed")

// Serve accepts agents' connections on ln until Close.
func (r *Relay) Serve(ln net.Listener) error {
	if err := r.ready(); err != nil {
		return err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	r.lns[ln] = true
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil && !r.bind.IsValid() {
		r.bind = ap.Addr().Unmap()
	}
	r.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			r.mu.Lock()
			closed := r.closed
			r.mu.Unlock()
			if closed {
				return ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		go r.ServeConn(c)
	}
}

// Close stops the listeners, ends every tunnel and waits until they are
// over.
func (r *Relay) Close() error {
	r.init()
	r.mu.Lock()
	if !r.closed {
		close(r.done)
	}
	r.closed = true
	for ln := range r.lns {
		ln.Close()
	}
	var sessions []*tunnel.Session
	for _, a := range r.agents {
		sessions = append(sessions, a.sess)
	}
	r.mu.Unlock()
	for _, s := range sessions {
		s.Close()
	}
	r.tunnels.Wait() // their agents' routes are forgotten in the store
	return nil
}

// ServeUpgraded answers a connection that asked an HTTP server for an
// upgrade to the relay's protocol (tunnel.Upgrade) and serves it, head
// (what the client sent after its request) first.
func (r *Relay) ServeUpgraded(c net.Conn, head []byte) {
	if _, err := io.WriteString(c, tunnel.UpgradeReply); err != nil {
		c.Close()
		return
	}
	if len(head) > 0 {
		c = tunnel.Prefixed(c, head)
	}
	r.ServeConn(c)
}

// ServeConn serves one connection to the relay, until it ends: it tells
// a TLS connection (pairing, tunnel or another process) from a data join
// by its first byte.
func (r *Relay) ServeConn(c net.Conn) {
	if err := r.ready(); err != nil {
		r.log().Error("relay", "err", err)
		c.Close()
		return
	}
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		c.Close()
		return
	}
	if first[0] == tunnel.JoinMagic[0] {
		r.join(c)
		return
	}
	tc := tls.Server(tunnel.Prefixed(c, first[:]), r.tlsConfig())
	if err := tc.Handshake(); err != nil {
		r.log().Debug("relay: TLS handshake", "remote", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	switch tc.ConnectionState().NegotiatedProtocol {
	case tunnel.ProtoPair:
		r.pair(tc)
	case tunnel.ProtoTunnel:
		r.tunnel(tc)
	case tunnel.ProtoTunnelOld:
		r.refuseOld(tc)
	case tunnel.ProtoPeer:
		r.peer(tc)
	default:
		tc.Close()
	}
}

func (r *Relay) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: r.serverCert,
		ClientAuth:     tls.VerifyClientCertIfGiven,
		ClientCAs:      r.CA.Pool(),
		NextProtos:     []string{tunnel.ProtoTunnel, tunnel.ProtoPair, tunnel.ProtoPeer, tunnel.ProtoTunnelOld},
		Time:           r.now,
	}
}

// serverCert is the relay's certificate, made anew past half its life.
func (r *Relay) serverCert(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.certMu.Lock()
	defer r.certMu.Unlock()
	if r.cert == nil || ca.Renew(r.cert.Leaf, r.now()) {
		c, err := r.CA.Relay()
		if err != nil {
			return nil, err
		}
		r.cert = &c
	}
	return r.cert, nil
}

// pair trades a setup key for a certificate.
func (r *Relay) pair(tc *tls.Conn) {
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(handshakeTimeout))
	var req tunnel.PairRequest
	if err := json.NewDecoder(io.LimitReader(tc, 64<<10)).Decode(&req); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	reply, err := r.certify(ctx, req)
	if err != nil {
		r.log().Warn("relay: pairing refused", "remote", tc.RemoteAddr().String(), "err", err)
		reply = tunnel.PairReply{Error: domain.ErrorMessage(err)}
	}
	tunnel.WriteLine(tc, reply)
}

func (r *Relay) certify(ctx context.Context, req tunnel.PairRequest) (tunnel.PairReply, error) {
	pub, err := x509.ParsePKIXPublicKey(req.PublicKey)
	if err != nil {
		return tunnel.PairReply{}, domain.Errorf(domain.EInvalid, "bad public key: %v", err)
	}
	id, gen, err := r.Store.UseSetupKey(ctx, domain.SetupKeyHash(req.Secret), r.now())
	if domain.IsNotFound(err) {
		return tunnel.PairReply{}, domain.Errorf(domain.EUnauthorized,
			"the setup key is not valid: it was used, replaced, or has expired (ferry endpoint setup-key gives a new one)")
	}
	if err != nil {
		return tunnel.PairReply{}, err
	}
	cert, err := r.CA.IssueAgent(pub, id, gen)
	if err != nil {
		return tunnel.PairReply{}, domain.Errorf(domain.EInvalid, "%v", err)
	}
	r.log().Info("relay: agent paired", "endpoint", id, "generation", gen)
	return tunnel.PairReply{Endpoint: id, Certificate: cert.Raw, CA: r.CA.Certificate().Raw}, nil
}

// revokedError says that an agent's certificate is no longer valid.
type revokedError struct{ why string }

func (e *revokedError) Error() string { return e.why }

// check looks an agent's certificate up in the store: its endpoint must
// still be a connect endpoint and its generation the current one. It
// returns the endpoint's display name.
func (r *Relay) check(ctx context.Context, id string, gen int64) (string, error) {
	ep, err := r.Store.Endpoint(ctx, id)
	if domain.IsNotFound(err) || err == nil && ep.Auth != domain.AuthConnect {
		return "", &revokedError{fmt.Sprintf("endpoint %s no longer exists: this agent's certificate is revoked", id)}
	}
	if err != nil {
		return "", err
	}
	cur, err := r.Store.CertGeneration(ctx, id)
	if domain.IsNotFound(err) || err == nil && cur != gen {
		return "", &revokedError{fmt.Sprintf("a new setup key was issued for endpoint %s: this agent's certificate is revoked; pair again with --setup-key", ep.DisplayName())}
	}
	return ep.DisplayName(), err
}

// tunnel serves an agent's tunnel until it ends; once the relay is
// closed it serves none.
func (r *Relay) tunnel(tc *tls.Conn) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		tc.Close()
		return
	}
	r.tunnels.Add(1)
	r.mu.Unlock()
	defer r.tunnels.Done()
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		tunnel.WriteLine(tc, tunnel.Hello{Error: "no client certificate: pair first with --setup-key", Revoked: true})
		tc.Close()
		return
	}
	leaf := certs[0]
	id, gen, err := tunnel.ParseAgent(leaf)
	var name string
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		name, err = r.check(ctx, id, gen)
		cancel()
	}
	if err != nil {
		var rev *revokedError
		r.log().Warn("relay: agent refused", "remote", tc.RemoteAddr().String(), "err", err)
		tunnel.WriteLine(tc, tunnel.Hello{Error: err.Error(), Revoked: errors.As(err, &rev)})
		tc.Close()
		return
	}
	tc.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := tunnel.WriteLine(tc, tunnel.Hello{Endpoint: id, Name: name, Relays: r.relays()}); err != nil {
		tc.Close()
		return
	}
	tc.SetDeadline(time.Time{})
	a := &peer{id: id, sess: tunnel.Server(tc), gone: make(chan struct{}), conns: map[io.Closer]bool{}}
	if !r.register(a) {
		a.sess.Close()
		return
	}
	r.log().Info("relay: agent connected", "endpoint", id, "remote", tc.RemoteAddr().String())
	r.resume(id)
	r.tunnels.Go(func() { r.watch(a, leaf, gen) })
	for {
		st, err := a.sess.Accept()
		if err != nil {
			break
		}
		switch st.Kind() {
		case tunnel.KindListen:
			go r.passive(a, st)
		default:
			st.Close()
		}
	}
	r.unregister(a)
	r.log().Info("relay: agent disconnected", "endpoint", id, "err", a.sess.Err())
}

// register makes a the agent of its endpoint, replacing an earlier one,
// and records in the store that it is reached through this process.
func (r *Relay) register(a *peer) bool {
	r.routeMu.Lock()
	defer r.routeMu.Unlock()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	old := r.agents[a.id]
	r.agents[a.id] = a
	r.mu.Unlock()
	if old != nil {
		old.sess.Close()
	}
	r.route(a)
	return true
}

// route records that a is reached through this process; a.routed says
// whether the store took it.
func (r *Relay) route(a *peer) {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	err := r.Store.PutAgentRoute(ctx, a.id, r.Process)
	if err != nil {
		r.log().Warn("relay: record where the agent is", "endpoint", a.id, "err", err)
	}
	a.routed.Store(err == nil)
}

// reroute tries again to record that a is reached through this process,
// if the store did not take it before and a is still the agent of its
// endpoint here.
func (r *Relay) reroute(a *peer) {
	if a.routed.Load() {
		return
	}
	r.routeMu.Lock()
	defer r.routeMu.Unlock()
	r.mu.Lock()
	current := r.agents[a.id] == a
	r.mu.Unlock()
	if current {
		r.route(a)
	}
}

// unregister forgets a, and the store's record of it unless another
// agent of its endpoint replaced it here.
func (r *Relay) unregister(a *peer) {
	r.routeMu.Lock()
	r.mu.Lock()
	current := r.agents[a.id] == a
	if current {
		delete(r.agents, a.id)
	}
	r.mu.Unlock()
	if current {
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		if err := r.Store.DeleteAgentRoute(ctx, a.id, r.Process); err != nil {
			r.log().Warn("relay: forget where the agent was", "endpoint", a.id, "err", err)
		}
		cancel()
	}
	r.routeMu.Unlock()
	close(a.gone)
	a.sess.Close()
	a.end()
}

// relays lists the URLs of the service's relays, for agents; nil when
// the store cannot tell.
func (r *Relay) relays() []string {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	ps, err := r.Store.Processes(ctx, r.now())
	if err != nil {
		r.log().Warn("relay: list the service's relays", "err", err)
		return nil
	}
	urls := make([]string, len(ps))
	for i, p := range ps {
		urls[i] = p.RelayURL
	}
	return urls
}

// resume makes the tasks that waited for the agent runnable again.
func (r *Relay) resume(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	n, err := r.Store.ResumeEndpoint(ctx, id, domain.NiceEndpointOffline, r.now())
	if err != nil {
		r.log().Warn("relay: resume tasks", "endpoint", id, "err", err)
	}
	if n > 0 {
		r.log().Info("relay: tasks resumed", "endpoint", id, "tasks", n)
		if r.Resumed != nil {
			r.Resumed()
		}
	}
}

// watch checks the agent's certificate against the store now and then:
// a revoked one ends the tunnel, an old one is renewed. It records that
// the agent is here if that failed before, and resumes the tasks that
// were paused for want of it meanwhile (a process that lost sight of it).
func (r *Relay) watch(a *peer, leaf *x509.Certificate, gen int64) {
	every := r.CheckEvery
	if every <= 0 {
		every = 30 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if ca.Renew(leaf, r.now()) {
			if c, err := r.renew(a, leaf, gen); err != nil {
				r.log().Warn("relay: renew certificate", "endpoint", a.id, "err", err)
			} else {
				leaf = c
			}
		}
		select {
		case <-a.sess.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		_, err := r.check(ctx, a.id, gen)
		cancel()
		var rev *revokedError
		if errors.As(err, &rev) {
			r.log().Warn("relay: agent revoked", "endpoint", a.id, "err", err)
			a.sess.Close()
			return
		}
		r.reroute(a)
		r.resume(a.id)
	}
}

// announcer tells the agents connected here of each change in the
// service's relays, until Close.
func (r *Relay) announcer() {
	every := r.RelaysEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var last []string
	for {
		select {
		case <-r.done:
			return
		case <-t.C:
		}
		urls := r.relays()
		if urls == nil || slices.Equal(urls, last) {
			continue
		}
		last = urls
		r.mu.Lock()
		agents := slices.Collect(maps.Values(r.agents))
		r.mu.Unlock()
		for _, a := range agents {
			if err := r.tell(a, urls); err != nil {
				r.log().Warn("relay: tell the agent of the relays", "endpoint", a.id, "err", err)
			}
		}
	}
}

// tell sends the agent the URLs of the service's relays.
func (r *Relay) tell(a *peer, urls []string) error {
	st, err := a.sess.Open(tunnel.KindRelays)
	if err != nil {
		return err
	}
	defer st.Close()
	return tunnel.WriteLine(st, tunnel.Relays{URLs: urls})
}

// renew sends the agent a new certificate for its key.
func (r *Relay) renew(a *peer, leaf *x509.Certificate, gen int64) (*x509.Certificate, error) {
	c, err := r.CA.IssueAgent(leaf.PublicKey, a.id, gen)
	if err != nil {
		return nil, err
	}
	st, err := a.sess.Open(tunnel.KindCert)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if _, err := st.Write(c.Raw); err != nil {
		return nil, err
	}
	r.log().Info("relay: certificate renewed", "endpoint", a.id, "until", c.NotAfter)
	return c, nil
}

// Spliced is how many data connections the relay spliced so far.
func (r *Relay) Spliced() int64 { return r.spliced.Load() }

// Dial opens a GridFTP control connection to the agent of endpointID,
// if it is connected here.
func (r *Relay) Dial(_ context.Context, endpointID string) (net.Conn, error) {
	r.init()
	r.mu.Lock()
	a := r.agents[endpointID]
	r.mu.Unlock()
	if a == nil {
		return nil, domain.Errorf(domain.EUnavailable, "the agent of endpoint %s is not connected", endpointID)
	}
	return a.sess.Open(tunnel.KindGridFTP)
}

// Drop ends the tunnel of the agent of endpointID, whose certificate was
// revoked: it is refused when it connects again.
func (r *Relay) Drop(endpointID string) {
	r.init()
	r.mu.Lock()
	a := r.agents[endpointID]
	r.mu.Unlock()
	if a != nil {
		a.sess.Close()
	}
}

// Online reports whether the agent of endpointID is connected here.
func (r *Relay) Online(_ context.Context, endpointID string) (<-chan struct{}, bool) {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.agents[endpointID]; a != nil {
		return a.gone, true
	}
	return nil, false
}

// errOldAgent refuses an agent of the tunnel protocol before yamux.
var errOldAgent = errors.New("this ferry connect is older than the service: its tunnel protocol (" + tunnel.ProtoTunnelOld + ") is no longer served; upgrade it")

// refuseOld answers an agent of ProtoTunnelOld with a Hello it reads:
// too old, and trying again will not help.
func (r *Relay) refuseOld(tc *tls.Conn) {
	defer tc.Close()
	r.log().Warn("relay: agent refused", "remote", tc.RemoteAddr().String(), "err", errOldAgent)
	tc.SetDeadline(time.Now().Add(handshakeTimeout))
	tunnel.WriteLine(tc, tunnel.Hello{Error: errOldAgent.Error(), Revoked: true})
}

// passive serves one passive listener of the agent: it reads whom the
// listener admits, listens on the relay's host, and hands the agent a join
// token for each admitted sender that connects, until the agent closes the
// stream. Any other connection is closed at once.
func (r *Relay) passive(a *peer, st *tunnel.Stream) {
	defer st.Close()
	st.SetReadDeadline(time.Now().Add(handshakeTimeout))
	var req tunnel.Listen
	if err := tunnel.ReadLine(st, &req); err != nil {
		return
	}
	st.SetReadDeadline(time.Time{})
	if !r.Public.IsValid() {
		tunnel.WriteLine(st, tunnel.Passive{Error: "the relay has no public address for passive listeners (ferry server --relay-address)"})
		return
	}
	r.mu.Lock()
	bind := r.bind
	r.mu.Unlock()
	ln, err := net.Listen("tcp", bindAddr(bind))
	if err == nil && !a.track(ln) {
		ln.Close()
		err = errors.New("too many data connections")
	}
	if err != nil {
		tunnel.WriteLine(st, tunnel.Passive{Error: err.Error()})
		return
	}
	defer a.untrack(ln)
	defer ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	if err := tunnel.WriteLine(st, tunnel.Passive{Addr: netip.AddrPortFrom(r.Public.Unmap(), port).String()}); err != nil {
		return
	}
	go func() {
		io.Copy(io.Discard, st) // until the agent's server drops the listener
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if ip := addrOf(c.RemoteAddr()); !req.Admits(ip) {
			r.log().Warn("relay: data connection refused: not a sender the agent expects", "endpoint", a.id, "remote", c.RemoteAddr().String())
			c.Close()
			continue
		}
		if !a.track(c) {
			c.Close()
			continue
		}
		token := tunnel.NewToken()
		r.expect(token, a, c)
		if err := tunnel.WriteLine(st, tunnel.Passive{Join: token}); err != nil {
			return
		}
	}
}

// addrOf is the IP of a TCP connection's address.
func addrOf(a net.Addr) netip.Addr {
	ap, _ := netip.ParseAddrPort(a.String())
	return ap.Addr().Unmap()
}

// bindAddr is where a passive listener binds: a new port of ip, or of
// every address when ip is not valid.
func bindAddr(ip netip.Addr) string {
	if !ip.IsValid() {
		return ":0"
	}
	return netip.AddrPortFrom(ip, 0).String()
}

// peer serves another process of the service that reaches an agent
// connected here: it must show a process certificate of the service's CA.
func (r *Relay) peer(tc *tls.Conn) {
	certs := tc.ConnectionState().PeerCertificates
	var err error
	if len(certs) == 0 {
		err = errors.New("no client certificate")
	} else {
		_, err = ca.Process(certs[0])
	}
	if err != nil {
		r.log().Warn("relay: peer refused", "remote", tc.RemoteAddr().String(), "err", err)
		tc.Close()
		return
	}
	tc.SetDeadline(time.Now().Add(handshakeTimeout))
	var req tunnel.PeerRequest
	if err := tunnel.ReadLine(tc, &req); err != nil {
		tc.Close()
		return
	}
	var st net.Conn
	switch req.Op {
	case tunnel.PeerDial:
		st, err = r.Dial(context.Background(), req.Endpoint)
	case tunnel.PeerDrop:
		r.Drop(req.Endpoint)
	default:
		err = fmt.Errorf("unknown operation %q", req.Op)
	}
	var reply tunnel.PeerReply
	if err != nil {
		reply.Error = domain.ErrorMessage(err)
	}
	if werr := tunnel.WriteLine(tc, reply); werr != nil || st == nil {
		tc.Close()
		if st != nil {
			st.Close()
		}
		return
	}
	tc.SetDeadline(time.Time{})
	splice(tc, st)
}

// expect holds a sender's connection until the agent joins it.
func (r *Relay) expect(token string, a *peer, c net.Conn) {
	j := &join{agent: a, conn: c}
	r.mu.Lock()
	r.joins[token] = j
	j.timer = time.AfterFunc(joinTimeout, func() {
		if r.take(token) != nil {
			a.untrack(c)
			c.Close()
		}
	})
	r.mu.Unlock()
}

// take removes and returns the join of token.
func (r *Relay) take(token string) *join {
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.joins[token]
	delete(r.joins, token)
	if j != nil {
		j.timer.Stop()
	}
	return j
}

// join splices an agent's data connection, which names a token, to the
// sender's connection that waits for it.
func (r *Relay) join(c net.Conn) {
	buf := make([]byte, len(tunnel.JoinMagic)-1+tunnel.TokenLen)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf[:len(tunnel.JoinMagic)-1]) != tunnel.JoinMagic[1:] {
		c.Close()
		return
	}
	j := r.take(string(buf[len(tunnel.JoinMagic)-1:]))
	if j == nil || !j.agent.track(c) {
		c.Close()
		if j != nil {
			j.agent.untrack(j.conn)
			j.conn.Close()
		}
		return
	}
	c.SetDeadline(time.Time{})
	r.spliced.Add(1)
	splice(c, j.conn)
	j.agent.untrack(c)
	j.agent.untrack(j.conn)
}

// buffers serve splices that the kernel cannot do itself.
var buffers = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// splice copies both ways between a and b until both ends are done (or
// either fails), then closes them. Between two TCP connections io.Copy
// uses splice(2): the data never enters user space.
func splice(a, b net.Conn) {
	errs := make(chan error, 2)
	half := func(dst, src net.Conn) {
		buf := buffers.Get().(*[]byte)
		_, err := io.CopyBuffer(dst, src, *buf)
		buffers.Put(buf)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
			err = cw.CloseWrite()
		}
		errs <- err
	}
	go half(a, b)
	go half(b, a)
	if err := <-errs; err != nil {
		a.Close()
		b.Close()
	}
	<-errs
	a.Close()
	b.Close()
}
