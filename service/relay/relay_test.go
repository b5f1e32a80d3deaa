package relay

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"ferry/agent"
	"ferry/engine"
	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/service/ca"
	"ferry/service/domain"
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
	addr    string
	user    domain.User
	resumed atomic.Int32
	later   atomic.Int64 // the relay's clock runs this far ahead
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
	c, err := ca.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, store: st, ca: c, addr: ln.Addr().String()}
	e.relay = &Relay{Store: st, CA: c, Public: netip.MustParseAddrPort(e.addr), CheckEvery: check,
		Resumed: func() { e.resumed.Add(1) }, Now: func() time.Time { return time.Now().Add(time.Duration(e.later.Load())) }}
	go e.relay.Serve(ln)
	t.Cleanup(func() { e.relay.Close() })
	e.user = domain.User{Name: "alice", PasswordHash: "x"}
	if err := st.CreateUser(ctx, &e.user); err != nil {
		t.Fatal(err)
	}
	return e
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
	id, err := agent.Pair(e.ctx, e.addr, secret, e.ca.Pin(), dir)
	if err != nil {
		e.t.Fatal(err)
	}
	if id != ep.ID {
		e.t.Fatalf("paired with %s, want %s", id, ep.ID)
	}
	return e.run(dir)
}

// run runs the agent whose credentials are in dir.
func (e *env) run(dir string) (root string, done <-chan error) {
	e.t.Helper()
	root = e.t.TempDir()
	fs, err := posix.New(root)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	errc, finished := make(chan error, 1), make(chan struct{})
	a := &agent.Agent{Relay: e.addr, Dir: dir, FS: fs}
	go func() {
		errc <- a.Run(ctx)
		close(finished)
	}()
	e.t.Cleanup(func() { cancel(); <-finished })
	return root, errc
}

func (e *env) waitOnline(id string, want bool) {
	e.t.Helper()
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if _, ok := e.relay.Online(id); ok == want {
			return
		}
		if time.Since(start) > 5*time.Second {
			e.t.Fatalf("agent of %s online: want %v", id, want)
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
	if _, err := agent.Pair(e.ctx, e.addr, secret, strings.Repeat("A", 43), t.TempDir()); err == nil {
		t.Fatal("paired with a relay whose CA is not the pinned one")
	}
	dir := t.TempDir()
	if _, err := agent.Pair(e.ctx, e.addr, secret, e.ca.Pin(), dir); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, agent.KeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", err, st.Mode())
	}
	// Once only.
	if _, err := agent.Pair(e.ctx, e.addr, secret, e.ca.Pin(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "not valid") {
		t.Fatalf("second use of a setup key: %v", err)
	}
	// Expired.
	old := e.newKey(ep, time.Now().Add(-time.Second))
	if _, err := agent.Pair(e.ctx, e.addr, old, e.ca.Pin(), t.TempDir()); err == nil {
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
	if _, err := agent.Pair(e.ctx, e.addr, secret, e.ca.Pin(), dir); err != nil {
		t.Fatal(err)
	}
	certOf := func() *x509.Certificate {
		b, _ := os.ReadFile(filepath.Join(dir, agent.CertFile))
		c, err := ca.ParseCertPEM(b)
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
	if id, _, err := ca.Agent(certOf()); err != nil || id != ep.ID {
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
	got, err := e.store.TaskByID(e.ctx, task.ID)
	if err != nil || got.Status != domain.StatusActive || e.resumed.Load() != 1 {
		t.Fatalf("task %s/%s (%v), %d wake-ups; want ACTIVE and one", got.Status, got.NiceStatus, err, e.resumed.Load())
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
