package relay

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ferry/connect/agent"
	"ferry/connect/ca"
	"ferry/connect/tunnel"
	"ferry/engine"
	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/service/core"
	"ferry/service/domain"
	"ferry/service/httpapi"
	"ferry/service/sqlstore"
	"ferry/storage/posix"
)

// env is a relay on loopback over a fresh store, with one user.
type env struct {
	t       *testing.T
	ctx     context.Context
	store   *sqlstore.DB
	ca      *ca.CA
	relay   *Relay
	url     string // the relay's URL
	user    domain.User
	resumed atomic.Int32
	later   atomic.Int64 // the relay's clock runs this far ahead
	logs    lockedBuffer // what the agents log, debug lines too
}

// lockedBuffer is a buffer that goroutines write at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newEnv starts a relay that checks agents' certificates every check.
func newEnv(t *testing.T, check time.Duration) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "ferry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := ca.Generate()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, store: st, ca: c}
	e.relay, e.url = e.newRelay("p1", check)
	e.user = domain.User{Name: "alice", PasswordHash: "x"}
	if err := st.CreateUser(ctx, &e.user); err != nil {
		t.Fatal(err)
	}
	return e
}

// newRelay starts the relay of another process on e's store, on its own
// loopback port, and records the process; it returns the relay and its
// URL.
func (e *env) newRelay(process string, check time.Duration) (*Relay, string) {
	e.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	url := "tcp://" + ln.Addr().String()
	r := &Relay{Store: e.store, CA: e.ca, Process: process, Public: netip.MustParseAddr("127.0.0.1"), CheckEvery: check, RelaysEvery: 50 * time.Millisecond,
		Resumed: func() { e.resumed.Add(1) }, Now: func() time.Time { return time.Now().Add(time.Duration(e.later.Load())) }}
	go r.Serve(ln)
	e.t.Cleanup(func() { r.Close() })
	if err := e.store.PutProcess(e.ctx, domain.Process{ID: process, RelayURL: url, Expires: time.Now().Add(time.Hour)}); err != nil {
		e.t.Fatal(err)
	}
	return r, url
}

// endpoint creates a connect endpoint and a setup key for it; it returns
// the key's secret.
func (e *env) endpoint(name string, expires time.Time) (domain.Endpoint, string) {
	e.t.Helper()
	ep := domain.Endpoint{OwnerID: e.user.ID, Name: name, Auth: domain.AuthConnect}
	if err := e.store.CreateEndpoint(e.ctx, &ep); err != nil {
		e.t.Fatal(err)
	}
	ep.Owner = e.user.Name
	return ep, e.newKey(ep, expires)
}

func (e *env) newKey(ep domain.Endpoint, expires time.Time) string {
	e.t.Helper()
	b := make([]byte, 16)
	rand.Read(b)
	secret := hex.EncodeToString(b)
	if _, err := e.store.NewSetupKey(e.ctx, ep.ID, domain.SetupKeyHash(secret), expires); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// agent pairs an agent with the secret and runs it over a new root until
// the test ends; its Run error arrives on the channel.
func (e *env) agent(ep domain.Endpoint, secret string) (root string, done <-chan error) {
	e.t.Helper()
	dir := e.t.TempDir()
	id, err := agent.Pair(e.ctx, e.url, secret, e.ca.Pin(), dir)
	if err != nil {
		e.t.Fatal(err)
	}
	if id != ep.ID {
		e.t.Fatalf("paired with %s, want %s", id, ep.ID)
	}
	return e.run(dir)
}

// run runs the agent whose credentials are in dir, with e's relay, or
// else the relays given.
func (e *env) run(dir string, relays ...string) (root string, done <-chan error) {
	e.t.Helper()
	root = e.t.TempDir()
	fs, err := posix.New(root)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	errc, finished := make(chan error, 1), make(chan struct{})
	if len(relays) == 0 {
		relays = []string{e.url}
	}
	a := &agent.Agent{Relays: relays, Dir: dir, FS: fs,
		Logger: slog.New(slog.NewTextHandler(&e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	go func() {
		errc <- a.Run(ctx)
		close(finished)
	}()
	e.t.Cleanup(func() { cancel(); <-finished })
	return root, errc
}

func (e *env) waitOnline(id string, want bool) {
	e.t.Helper()
	waitOnline(e.t, e.relay, id, want)
}

// waitOnline waits until the agent of id is online at r, or not.
func waitOnline(t *testing.T, r *Relay, id string, want bool) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if _, ok := r.Online(t.Context(), id); ok == want {
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("agent of %s online: want %v", id, want)
		}
	}
}

// via reaches ep's agent through the relay; outbound tells the engine
// that the agent accepts no connections.
func (e *env) via(ep domain.Endpoint, outbound bool) engine.Endpoint {
	return engine.Endpoint{Addr: "agent of " + ep.Name, Outbound: outbound, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return e.relay.Dial(ctx, ep.ID)
	}}
}

func TestPairing(t *testing.T) {
	e := newEnv(t, time.Hour)
	ep, secret := e.endpoint("laptop", time.Now().Add(time.Hour))

	// The agent trusts only the CA the setup key pins.
	if _, err := agent.Pair(e.ctx, e.url, secret, strings.Repeat("A", 43), t.TempDir()); err == nil {
		t.Fatal("paired with a relay whose CA is not the pinned one")
	}
	dir := t.TempDir()
	if _, err := agent.Pair(e.ctx, e.url, secret, e.ca.Pin(), dir); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, agent.KeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", err, st.Mode())
	}
	// Once only.
	if _, err := agent.Pair(e.ctx, e.url, secret, e.ca.Pin(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "not valid") {
		t.Fatalf("second use of a setup key: %v", err)
	}
	// Expired.
	old := e.newKey(ep, time.Now().Add(-time.Second))
	if _, err := agent.Pair(e.ctx, e.url, old, e.ca.Pin(), t.TempDir()); err == nil {
		t.Fatal("an expired setup key paired")
	}
	// A certificate without a pairing of its generation is refused: the
	// expired key above started a new generation, which revoked dir's.
	_, done := e.run(dir)
	select {
	case err := <-done:
		if _, ok := errors.AsType[*agent.RevokedError](err); !ok {
			t.Fatalf("agent with a revoked certificate: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("agent with a revoked certificate still runs")
	}
}

func TestRevocation(t *testing.T) {
	for _, c := range []struct {
		name   string
		check  time.Duration
		revoke func(e *env, ep domain.Endpoint)
	}{
		{"new setup key", 50 * time.Millisecond, func(e *env, ep domain.Endpoint) { e.newKey(ep, time.Now().Add(time.Hour)) }},
		{"endpoint deleted", 50 * time.Millisecond, func(e *env, ep domain.Endpoint) { e.store.DeleteEndpoint(e.ctx, ep.ID) }},
		// The API tells the relay at once; it would check only hourly.
		{"dropped", time.Hour, func(e *env, ep domain.Endpoint) {
			e.newKey(ep, time.Now().Add(time.Hour))
			e.relay.Drop(ep.ID)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.check)
			ep, secret := e.endpoint("laptop", time.Now().Add(time.Hour))
			_, done := e.agent(ep, secret)
			e.waitOnline(ep.ID, true)
			c.revoke(e, ep)
			select {
			case err := <-done:
				if _, ok := errors.AsType[*agent.RevokedError](err); !ok {
					t.Fatalf("agent ended with %v, want a RevokedError", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the revoked agent is still connected")
			}
			e.waitOnline(ep.ID, false)
		})
	}
}

// An agent whose certificate is past half its life gets a new one, which
// it keeps.
func TestRenewal(t *testing.T) {
	e := newEnv(t, 50*time.Millisecond)
	ep, secret := e.endpoint("laptop", time.Now().Add(time.Hour))
	dir := t.TempDir()
	if _, err := agent.Pair(e.ctx, e.url, secret, e.ca.Pin(), dir); err != nil {
		t.Fatal(err)
	}
	certOf := func() *x509.Certificate {
		b, _ := os.ReadFile(filepath.Join(dir, agent.CertFile))
		c, err := tunnel.ParseCertPEM(b)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := certOf()
	e.later.Store(int64(ca.Lifetime/2 + time.Hour))
	e.run(dir)
	e.waitOnline(ep.ID, true)
	for start := time.Now(); !certOf().NotAfter.After(first.NotAfter); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the agent's certificate was not renewed")
		}
	}
	if id, _, err := tunnel.ParseAgent(certOf()); err != nil || id != ep.ID {
		t.Fatalf("renewed certificate names %q (%v)", id, err)
	}
}

// An agent that connects resumes the tasks that waited for it.
func TestResumeOnConnect(t *testing.T) {
	e := newEnv(t, time.Hour)
	ep, secret := e.endpoint("laptop", time.Now().Add(time.Hour))
	task := domain.Task{UserID: e.user.ID, Type: domain.TypeTransfer, SrcEndpoint: ep.ID, DstEndpoint: ep.ID}
	if err := e.store.CreateTask(e.ctx, &task); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := e.store.Claim(e.ctx, "w", now, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetStatus(e.ctx, task.ID, "w", domain.StatusInactive, domain.NiceEndpointOffline, nil, now, nil); err != nil {
		t.Fatal(err)
	}
	e.agent(ep, secret)
	e.waitOnline(ep.ID, true)
	// The relay resumes the tasks once the agent is registered online.
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		got, err := e.store.TaskByID(e.ctx, task.ID)
		if err == nil && got.Status == domain.StatusActive && e.resumed.Load() == 1 {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("task %s/%s (%v), %d wake-ups; want ACTIVE and one", got.Status, got.NiceStatus, err, e.resumed.Load())
		}
	}
}

// A task paused for an agent that is connected all along (another process
// lost sight of it for a while) is resumed by the relay that holds it.
func TestResumeWhileConnected(t *testing.T) {
	e := newEnv(t, 50*time.Millisecond)
	ep, secret := e.endpoint("laptop", time.Now().Add(time.Hour))
	e.agent(ep, secret)
	e.waitOnline(ep.ID, true)
	task := domain.Task{UserID: e.user.ID, Type: domain.TypeTransfer, SrcEndpoint: ep.ID, DstEndpoint: ep.ID}
	if err := e.store.CreateTask(e.ctx, &task); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := e.store.Claim(e.ctx, "w", now, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetStatus(e.ctx, task.ID, "w", domain.StatusInactive, domain.NiceEndpointOffline, nil, now, nil); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		got, err := e.store.TaskByID(e.ctx, task.ID)
		if err == nil && got.Status == domain.StatusActive {
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("task %s/%s (%v) while its agent is connected; want ACTIVE", got.Status, got.NiceStatus, err)
		}
	}
}

// Transfers between agents and an ordinary server, both ways, and between
// two agents. Data goes through the relay only where an agent must listen:
// to a destination agent from a source that cannot listen as a sender (here
// the engine is not told the agent accepts no connections), and between
// agents.
func TestTransfers(t *testing.T) {
	e := newEnv(t, time.Hour)
	a, secretA := e.endpoint("a", time.Now().Add(time.Hour))
	b, secretB := e.endpoint("b", time.Now().Add(time.Hour))
	rootA, _ := e.agent(a, secretA)
	rootB, _ := e.agent(b, secretB)
	e.waitOnline(a.ID, true)
	e.waitOnline(b.ID, true)

	plainRoot, fs := servertest.Root(t)
	plain := engine.Endpoint{Addr: servertest.Serve(t, &server.Server{FS: fs, Anonymous: true})}

	files := map[string][]byte{"big": make([]byte, 9<<20), "small": []byte("hello"), "dir/x": make([]byte, 100<<10)}
	for name, data := range files {
		rand.Read(data)
		p := filepath.Join(rootA, "src", name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, data, 0o644)
	}
	opts := engine.Options{Recursive: true, Parallelism: 4, Concurrency: 2, Verify: true}
	// Each stage copies what the one before brought.
	for _, c := range []struct {
		name     string
		src, dst engine.Endpoint
		from, to string
		dstRoot  string
		relayed  bool
	}{
		{"agent to ordinary", e.via(a, true), plain, "/src/", "/s1/", plainRoot, false},
		{"ordinary to agent", plain, e.via(b, true), "/s1/", "/s2/", rootB, false},
		{"ordinary to agent, relayed", plain, e.via(b, false), "/s1/", "/s2r/", rootB, true},
		{"agent to agent", e.via(b, true), e.via(a, true), "/s2/", "/s3/", rootA, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
			defer cancel()
			spliced := e.relay.Spliced()
			res, err := engine.Copy(ctx, c.src, c.dst, []engine.Item{{Src: c.from, Dst: c.to}}, opts, nil)
			if err != nil || res.Failed > 0 || res.Transferred != len(files) {
				t.Fatalf("copy: %v, %+v", err, res)
			}
			for name, want := range files {
				got, err := os.ReadFile(filepath.Join(c.dstRoot, c.to, name))
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s: %d bytes, %v; want the %d bytes sent", name, len(got), err, len(want))
				}
			}
			if n := e.relay.Spliced() - spliced; (n > 0) != c.relayed {
				t.Fatalf("%d data connections through the relay; want them: %v", n, c.relayed)
			}
		})
	}
}

// routeOf is the process the store says the agent of id is connected to;
// "" for none.
func (e *env) routeOf(id string) string {
	e.t.Helper()
	routes, err := e.store.AgentRoutes(e.ctx, []string{id}, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return routes[id].ID
}

// waitRoute waits until the store says the agent of id is connected to
// process ("": to none).
func (e *env) waitRoute(id, process string) {
	e.t.Helper()
	for start := time.Now(); e.routeOf(id) != process; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			e.t.Fatalf("agent of %s recorded at %q, want %q", id, e.routeOf(id), process)
		}
	}
}

// The store records where an agent is connected while it is.
func TestRoutes(t *testing.T) {
	e := newEnv(t, time.Hour)
	ep, secret := e.endpoint("laptop", time.Now().Add(time.Hour))
	if got := e.routeOf(ep.ID); got != "" {
		t.Fatalf("agent recorded at %q before it connected", got)
	}
	dir := t.TempDir()
	if _, err := agent.Pair(e.ctx, e.url, secret, e.ca.Pin(), dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	fs, _ := posix.New(t.TempDir())
	done := make(chan error, 1)
	go func() { done <- (&agent.Agent{Relays: []string{e.url}, Dir: dir, FS: fs}).Run(ctx) }()
	e.waitOnline(ep.ID, true)
	e.waitRoute(ep.ID, "p1")
	cancel()
	<-done
	e.waitOnline(ep.ID, false)
	e.waitRoute(ep.ID, "")
}

// An agent learns the service's relays, also those that start after it
// connected, and when its relay goes it connects to another at once.
func TestFailover(t *testing.T) {
	e := newEnv(t, time.Hour)
	ep, secret := e.endpoint("laptop", time.Now().Add(time.Hour))
	e.agent(ep, secret) // given only p1's URL
	e.waitOnline(ep.ID, true)
	e.waitRoute(ep.ID, "p1")
	second, url := e.newRelay("p2", time.Hour)
	// p1 tells the agent of p2, which logs the relays it learns.
	for start := time.Now(); !strings.Contains(e.logs.String(), url); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the agent never learned of p2:\n%s", e.logs.String())
		}
	}
	e.relay.Close()
	waitOnline(t, second, ep.ID, true)
	e.waitRoute(ep.ID, "p2")
}

// Other processes reach agents through the relay only with a process
// certificate of the service's CA.
func TestPeers(t *testing.T) {
	e := newEnv(t, time.Hour)
	ep, secret := e.endpoint("laptop", time.Now().Add(time.Hour))
	dir := t.TempDir()
	if _, err := agent.Pair(e.ctx, e.url, secret, e.ca.Pin(), dir); err != nil {
		t.Fatal(err)
	}
	agentCert, err := tls.LoadX509KeyPair(filepath.Join(dir, agent.CertFile), filepath.Join(dir, agent.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	e.run(dir)
	e.waitOnline(ep.ID, true)
	processCert := func(c *ca.CA) []tls.Certificate {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		leaf, err := c.IssueProcess(&key.PublicKey, "p2")
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{{Certificate: [][]byte{leaf.Raw}, PrivateKey: key}}
	}
	other, _ := ca.Generate()
	for _, c := range []struct {
		name     string
		certs    []tls.Certificate
		endpoint string
		want     string // the banner's start or the relay's error; "": refused
	}{
		{"process", processCert(e.ca), ep.ID, "220"},
		{"process, agent not here", processCert(e.ca), "nope", "not connected"},
		{"no certificate", nil, ep.ID, ""},
		{"an agent's certificate", []tls.Certificate{agentCert}, ep.ID, ""},
		{"another service's process", processCert(other), ep.ID, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, err := net.Dial("tcp", strings.TrimPrefix(e.url, "tcp://"))
			if err != nil {
				t.Fatal(err)
			}
			tc := tls.Client(raw, &tls.Config{NextProtos: []string{tunnel.ProtoPeer}, RootCAs: e.ca.Pool(),
				ServerName: tunnel.RelayName, Certificates: c.certs})
			defer tc.Close()
			tc.SetDeadline(time.Now().Add(5 * time.Second))
			var reply tunnel.PeerReply
			err = tc.Handshake()
			if err == nil {
				err = tunnel.WriteLine(tc, tunnel.PeerRequest{Op: tunnel.PeerDial, Endpoint: c.endpoint})
			}
			if err == nil {
				err = tunnel.ReadLine(tc, &reply)
			}
			if c.want == "" {
				if err == nil {
					t.Fatalf("the relay answered %+v", reply)
				}
				return
			}
			got := reply.Error
			if err == nil && got == "" {
				banner := make([]byte, 3)
				_, err = io.ReadFull(tc, banner)
				got = string(banner)
			}
			if err != nil || !strings.Contains(got, c.want) {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// The relay on the API's port: agents pair, connect and join data
// connections through HTTP upgrades of the API's /relay route.
func TestOverHTTP(t *testing.T) {
	e := newEnv(t, time.Hour)
	svc := &core.Service{Store: e.store}
	api := &httpapi.Server{Endpoints: svc, RelayProtocol: tunnel.Upgrade, RelayConn: e.relay.ServeUpgraded}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	url := srv.URL + "/api/v0.10/relay"
	api.RelayURL = url

	ep, secret := e.endpoint("laptop", time.Now().Add(time.Hour))
	dir := t.TempDir()
	if _, err := agent.Pair(e.ctx, url, secret, e.ca.Pin(), dir); err != nil {
		t.Fatal(err)
	}
	root, _ := e.run(dir, url)
	e.waitOnline(ep.ID, true)

	plainRoot, fs := servertest.Root(t)
	data := make([]byte, 1<<20)
	rand.Read(data)
	os.WriteFile(filepath.Join(plainRoot, "f"), data, 0o644)
	plain := engine.Endpoint{Addr: servertest.Serve(t, &server.Server{FS: fs, Anonymous: true})}
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	// The engine is not told that the agent cannot listen: the relay
	// listens for it, and the agent joins each data connection there.
	res, err := engine.Copy(ctx, plain, e.via(ep, false), []engine.Item{{Src: "/f", Dst: "/f"}}, engine.Options{Parallelism: 2, Verify: true}, nil)
	if err != nil || res.Failed > 0 || res.Transferred != 1 {
		t.Fatalf("copy: %v, %+v", err, res)
	}
	if got, err := os.ReadFile(filepath.Join(root, "f")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("received %d bytes, %v", len(got), err)
	}
	if e.relay.Spliced() == 0 {
		t.Fatal("no data connection went through the relay")
	}
}

// dialFrom connects to addr from a loopback address of the test's
// choosing: 127.0.0.1 is the agent's client (the relay, here), the others
// are third parties.
func dialFrom(t *testing.T, from string, addr netip.AddrPort) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// modeE is data as one MODE E block at offset 0, then the EOF of a
// single stream.
func modeE(data []byte) []byte {
	var b [2 * gridftp.HeaderLen]byte
	gridftp.Header{Count: uint64(len(data))}.Put(b[:])
	gridftp.Header{Desc: gridftp.DescEOF | gridftp.DescEOD, Offset: 1}.Put(b[gridftp.HeaderLen:])
	return slices.Concat(b[:gridftp.HeaderLen], data, b[gridftp.HeaderLen:])
}

// A passive listener on the relay admits only the senders the agent's
// server expects. With DCAU N those at the addresses it admits (its
// client's, and the third-party sender's it was told with OPTS PASV
// From): the relay closes a stranger's connection and never asks the
// agent to join it. With DCAU A any, and the agent's server closes a
// connection that does not prove the transfer's credential. Either way the
// stranger, first on the port, gets nothing in, and the file is the
// sender's.
func TestPassiveAdmits(t *testing.T) {
	e := newEnv(t, time.Hour)
	ep, secret := e.endpoint("laptop", time.Now().Add(time.Hour))
	root, _ := e.agent(ep, secret)
	e.waitOnline(ep.ID, true)
	cred, err := gridftp.NewDataCredential(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	blob, err := cred.DCSC()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		setup     []string
		secure    bool
		strangers int64 // of the stranger's connections, how many the relay spliced
	}{
		{"DCAU N", []string{"OPTS PASV From=127.0.0.3;"}, false, 0},
		{"DCAU A", []string{"DCSC P " + blob, "DCAU A"}, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
			defer cancel()
			conn, err := client.DialWith(ctx, func(ctx context.Context, _, _ string) (net.Conn, error) { return e.relay.Dial(ctx, ep.ID) }, "agent")
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := conn.Login(ctx, "anonymous", "x"); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range append([]string{"MODE E"}, c.setup...) {
				if _, err := conn.Do(ctx, "%s", cmd); err != nil {
					t.Fatalf("%s: %v", strings.Fields(cmd)[0], err)
				}
			}
			pasv, err := conn.Passive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			spliced := e.relay.Spliced()
			stranger := dialFrom(t, "127.0.0.2", pasv)
			stranger.Write(modeE([]byte("injected by a stranger")))
			stranger.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := io.Copy(io.Discard, stranger); n > 0 || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the stranger's connection: %d bytes, %v; want it closed", n, err)
			}
			if err := conn.Send("STOR f-%s", strings.ReplaceAll(c.name, " ", "")); err != nil {
				t.Fatal(err)
			}
			var sender net.Conn = dialFrom(t, "127.0.0.3", pasv)
			if c.secure {
				if sender, err = gridftp.SecureData(ctx, sender, cred, true, false, 5*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			sender.Write(modeE([]byte("the sender's data")))
			if _, err := conn.Final(ctx, nil); err != nil {
				t.Fatalf("STOR: %v", err)
			}
			got, err := os.ReadFile(filepath.Join(root, "f-"+strings.ReplaceAll(c.name, " ", "")))
			if err != nil || string(got) != "the sender's data" {
				t.Fatalf("stored %q, %v", got, err)
			}
			if n := e.relay.Spliced() - spliced; n != 1+c.strangers {
				t.Fatalf("the relay spliced %d data connections; want the sender's and %d of the stranger's", n, c.strangers)
			}
		})
	}
}

// An agent of the tunnel protocol before yamux (ferry-tunnel/1) is told in
// its Hello, which it still reads, that it is too old, and not to retry.
func TestOldAgentTunnel(t *testing.T) {
	e := newEnv(t, time.Hour)
	_, secret := e.endpoint("laptop", time.Now().Add(time.Hour))
	dir := t.TempDir()
	if _, err := agent.Pair(e.ctx, e.url, secret, e.ca.Pin(), dir); err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, agent.CertFile), filepath.Join(dir, agent.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	tc, err := tls.Dial("tcp", strings.TrimPrefix(e.url, "tcp://"), &tls.Config{NextProtos: []string{tunnel.ProtoTunnelOld},
		RootCAs: e.ca.Pool(), ServerName: tunnel.RelayName, Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	var hello tunnel.Hello
	if err := tunnel.ReadLine(tc, &hello); err != nil || !hello.Revoked || !strings.Contains(hello.Error, "older than the service") {
		t.Fatalf("hello: %+v, %v; want a refusal that says the agent is too old", hello, err)
	}
}
