// Package mesh lets any process of the service drive any connected agent.
// Each ferry server process runs a relay, and an agent is connected to one
// of them; the store records which processes are running (each renews
// its record, Serve) and which process each agent is connected to (the
// relay records it). Mesh is this process's domain.Agents: it reaches an
// agent connected here through the local relay, and any other through the
// relay of the process that holds it, which it reaches with mutual TLS
// under the service's CA, showing a process certificate of its own
// (tunnel.ProtoPeer).
package mesh

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"ferry/connect/ca"
	"ferry/connect/tunnel"
	"ferry/service/domain"
)

// Defaults.
const (
	defaultLease = time.Minute
	defaultPoll  = time.Second
	peerTimeout  = 10 * time.Second // to reach another process's relay
)

// Local is this process's relay.
type Local interface {
	domain.Agents
	// Drop ends the tunnel of the agent of endpointID, if it is here.
	Drop(endpointID string)
}

// Mesh reaches agents wherever they are connected. Store, CA, Local and
// Self (ID and RelayURL) are required.
type Mesh struct {
	Store domain.Store
	CA    *ca.CA
	Local Local
	// Self is this process; Serve sets its record's Expires.
	Self domain.Process
	// Lease is how long this process's record holds unless renewed; Serve
	// renews it every third of that. 0: 1 minute.
	Lease time.Duration
	// Poll is how often where a watched agent is connected is looked up
	// again (see Online); 0: 1 s.
	Poll time.Duration
	// Dialer reaches the other processes' relays.
	Dialer tunnel.Dialer
	Logger *slog.Logger
	Now    func() time.Time // the clock; time.Now when nil

	certMu sync.Mutex
	cert   *tls.Certificate // this process's, for the other relays
}

var _ domain.Agents = (*Mesh)(nil)

func (m *Mesh) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Mesh) log() *slog.Logger {
	if m.Logger != nil {
		return m.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (m *Mesh) lease() time.Duration {
	if m.Lease > 0 {
		return m.Lease
	}
	return defaultLease
}

func (m *Mesh) poll() time.Duration {
	if m.Poll > 0 {
		return m.Poll
	}
	return defaultPoll
}

// Join records this process in the store, so that the others find it.
func (m *Mesh) Join(ctx context.Context) error {
	p := m.Self
	p.Expires = m.now().Add(m.lease())
	if err := m.Store.PutProcess(ctx, p); err != nil {
		return fmt.Errorf("mesh: record process %s: %w", p.ID, err)
	}
	return nil
}

// Serve renews this process's record until ctx ends, and then removes
// it: the agents connected here are no longer reached through it.
func (m *Mesh) Serve(ctx context.Context) error {
	t := time.NewTicker(m.lease() / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			leave, cancel := context.WithTimeout(context.Background(), peerTimeout)
			defer cancel()
			if err := m.Store.DeleteProcess(leave, m.Self.ID); err != nil && !domain.IsNotFound(err) {
				return fmt.Errorf("mesh: forget process %s: %w", m.Self.ID, err)
			}
			return nil
		case <-t.C:
			if err := m.Join(ctx); err != nil && ctx.Err() == nil {
				m.log().Warn("mesh: renew", "err", err)
			}
		}
	}
}

// holder is the other process that holds the agent of endpointID; false
// when none does (or only this process's stale record says it does).
func (m *Mesh) holder(ctx context.Context, endpointID string) (domain.Process, bool, error) {
	routes, err := m.Store.AgentRoutes(ctx, []string{endpointID}, m.now())
	if err != nil {
		return domain.Process{}, false, err
	}
	p, ok := routes[endpointID]
	return p, ok && p.ID != m.Self.ID, nil
}

// Online reports whether the agent of endpointID is connected, here or to
// another process. For an agent elsewhere, the channel is closed once the
// store no longer says that process holds it (the agent left it, or the
// process's record lapsed); it is looked up every Poll until ctx ends.
func (m *Mesh) Online(ctx context.Context, endpointID string) (<-chan struct{}, bool) {
	if gone, ok := m.Local.Online(ctx, endpointID); ok {
		return gone, true
	}
	p, ok, err := m.holder(ctx, endpointID)
	if err != nil {
		m.log().Warn("mesh: where is the agent", "endpoint", endpointID, "err", err)
	}
	if !ok {
		return nil, false
	}
	gone := make(chan struct{})
	go m.watch(ctx, endpointID, p.ID, gone)
	return gone, true
}

// watch closes gone once the agent of endpointID is no longer held by
// process holder, looking every Poll until ctx ends.
func (m *Mesh) watch(ctx context.Context, endpointID, holder string, gone chan struct{}) {
	t := time.NewTicker(m.poll())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p, ok, err := m.holder(ctx, endpointID)
		if err != nil {
			continue // the store cannot tell now: look again
		}
		if !ok || p.ID != holder {
			close(gone)
			return
		}
	}
}

// Dial opens a GridFTP control connection to the agent of endpointID,
// through the process that holds it; EUnavailable when none does.
func (m *Mesh) Dial(ctx context.Context, endpointID string) (net.Conn, error) {
	c, err := m.Local.Dial(ctx, endpointID)
	if domain.ErrorCode(err) != domain.EUnavailable {
		return c, err
	}
	p, ok, err := m.holder(ctx, endpointID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, domain.Errorf(domain.EUnavailable, "the agent of endpoint %s is not connected", endpointID)
	}
	return m.peer(ctx, p, tunnel.PeerRequest{Op: tunnel.PeerDial, Endpoint: endpointID})
}

// Drop ends the tunnel of the agent of endpointID, whose certificate was
// revoked, wherever it is connected.
func (m *Mesh) Drop(endpointID string) {
	m.Local.Drop(endpointID)
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	p, ok, err := m.holder(ctx, endpointID)
	if err == nil && ok {
		var c net.Conn
		if c, err = m.peer(ctx, p, tunnel.PeerRequest{Op: tunnel.PeerDrop, Endpoint: endpointID}); err == nil {
			c.Close()
		}
	}
	if err != nil {
		m.log().Warn("mesh: drop the agent (its relay drops it when it next checks)", "endpoint", endpointID, "err", err)
	}
}

// peer sends req to the relay of process p and returns the connection
// once the relay accepted it.
func (m *Mesh) peer(ctx context.Context, p domain.Process, req tunnel.PeerRequest) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	unavailable := func(err error) error {
		return domain.Errorf(domain.EUnavailable, "the agent of endpoint %s is connected to process %s, which cannot be reached: %v",
			req.Endpoint, p.ID, err)
	}
	raw, err := m.Dialer.Dial(ctx, p.RelayURL)
	if err != nil {
		return nil, unavailable(err)
	}
	tc := tls.Client(raw, &tls.Config{
		MinVersion:           tls.VersionTLS13,
		NextProtos:           []string{tunnel.ProtoPeer},
		RootCAs:              m.CA.Pool(),
		ServerName:           tunnel.RelayName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return m.clientCert() },
		Time:                 m.now,
	})
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, unavailable(err)
	}
	if tc.ConnectionState().NegotiatedProtocol != tunnel.ProtoPeer {
		tc.Close()
		return nil, unavailable(errors.New("its relay does not serve other processes"))
	}
	dl, _ := ctx.Deadline()
	tc.SetDeadline(dl)
	var reply tunnel.PeerReply
	err = tunnel.WriteLine(tc, req)
	if err == nil {
		err = tunnel.ReadLine(tc, &reply)
	}
	if err != nil {
		tc.Close()
		return nil, unavailable(err)
	}
	if reply.Error != "" {
		tc.Close()
		return nil, domain.Errorf(domain.EUnavailable, "%s (process %s)", reply.Error, p.ID)
	}
	tc.SetDeadline(time.Time{})
	return tc, nil
}

// clientCert is this process's certificate, made anew past half its life.
func (m *Mesh) clientCert() (*tls.Certificate, error) {
	m.certMu.Lock()
	defer m.certMu.Unlock()
	if m.cert != nil && !ca.Renew(m.cert.Leaf, m.now()) {
		return m.cert, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf, err := m.CA.IssueProcess(&key.PublicKey, m.Self.ID)
	if err != nil {
		return nil, err
	}
	m.cert = &tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}
	return m.cert, nil
}
