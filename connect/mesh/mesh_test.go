package mesh

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"ferry/connect/agent"
	"ferry/connect/ca"
	"ferry/connect/relay"
	"ferry/engine"
	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/service/domain"
	"ferry/service/sqlstore"
)

// env is a service of several processes on one SQLite database, each
// with its own handle on it, its relay on loopback and its mesh.
type env struct {
	t    *testing.T
	ctx  context.Context
	db   string // the database file
	ca   *ca.CA
	user domain.User
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c, err := ca.Generate()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: t.Context(), db: filepath.Join(t.TempDir(), "ferry.db"), ca: c}
	e.user = domain.User{Name: "alice", PasswordHash: "x"}
	if err := e.store().CreateUser(e.ctx, &e.user); err != nil {
		t.Fatal(err)
	}
	return e
}

// store opens a handle on the database, closed when the test ends.
func (e *env) store() *sqlstore.DB {
	e.t.Helper()
	st, err := sqlstore.Open(e.ctx, e.db)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { st.Close() })
	return st
}

// process is one process of the service.
type process struct {
	relay *relay.Relay
	mesh  *Mesh
	url   string
}

// process starts process id: its relay, which checks agents' certificates
// hourly, and its mesh, whose record lasts lease. The mesh is not served:
// its record lapses unless renewed.
func (e *env) process(id string, lease time.Duration) *process {
	e.t.Helper()
	st := e.store()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	p := &process{url: "tcp://" + ln.Addr().String()}
	p.relay = &relay.Relay{Store: st, CA: e.ca, Process: id, Public: netip.MustParseAddr("127.0.0.1"), CheckEvery: time.Hour}
	go p.relay.Serve(ln)
	e.t.Cleanup(func() { p.relay.Close() })
	p.mesh = &Mesh{Store: st, CA: e.ca, Local: p.relay, Self: domain.Process{ID: id, RelayURL: p.url}, Lease: lease, Poll: 20 * time.Millisecond}
	if err := p.mesh.Join(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// agent makes connect endpoint name and runs its agent, paired with and
// connected to p, over a new root until the test ends; its Run error
// arrives on the channel, and stop stops it. It returns once the store
// says p holds the agent: p's relay takes the agent in before it records
// that, and the other processes know only the record.
func (e *env) agent(p *process, name string) (ep domain.Endpoint, root string, done <-chan error, stop func()) {
	e.t.Helper()
	ep = domain.Endpoint{OwnerID: e.user.ID, Name: name, Auth: domain.AuthConnect}
	secret := rand.Text()
	if err := p.mesh.Store.CreateConnectEndpoint(e.ctx, &ep, domain.SetupKeyHash(secret), time.Now().Add(time.Hour)); err != nil {
		e.t.Fatal(err)
	}
	dir := e.t.TempDir()
	if _, err := agent.Pair(e.ctx, p.url, secret, e.ca.Pin(), dir); err != nil {
		e.t.Fatal(err)
	}
	root, fs := servertest.Root(e.t)
	ctx, cancel := context.WithCancel(e.ctx)
	errc, finished := make(chan error, 1), make(chan struct{})
	go func() {
		errc <- (&agent.Agent{Relays: []string{p.url}, Dir: dir, FS: fs}).Run(ctx)
		close(finished)
	}()
	stop = func() { cancel(); <-finished }
	e.t.Cleanup(stop)
	waitRouted(e.t, p, ep.ID)
	return ep, root, errc, stop
}

// waitRouted waits until the store says p holds the agent of id.
func waitRouted(t *testing.T, p *process, id string) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		routes, err := p.mesh.Store.AgentRoutes(t.Context(), []string{id}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if routes[id].ID == p.mesh.Self.ID {
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the store does not say process %s holds the agent of %s", p.mesh.Self.ID, id)
		}
	}
}

// waitOnline waits until agents says the agent of id is online, or not.
func waitOnline(t *testing.T, agents domain.Agents, id string, want bool) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if _, ok := agents.Online(t.Context(), id); ok == want {
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("agent of %s online: want %v", id, want)
		}
	}
}

// waitClosed fails the test unless gone is closed within d.
func waitClosed(t *testing.T, gone <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-gone:
	case <-time.After(d):
		t.Fatalf("%s: the agent still looks connected after %v", what, d)
	}
}

// A process drives an agent connected to another: it lists and copies
// from it, and sees it go.
func TestRemoteAgent(t *testing.T) {
	e := newEnv(t)
	a, b := e.process("a", time.Hour), e.process("b", time.Hour)
	ep, root, _, stop := e.agent(a, "laptop")
	data := make([]byte, 3<<20)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(root, "big"), data, 0o644); err != nil {
		t.Fatal(err)
	}

	if _, ok := b.relay.Online(e.ctx, ep.ID); ok {
		t.Fatal("the agent is connected to b's relay too")
	}
	gone, ok := b.mesh.Online(e.ctx, ep.ID)
	if !ok {
		t.Fatal("b does not see the agent connected to a")
	}
	// A copy that b drives, through a's relay, from the agent to an
	// ordinary server.
	dstRoot, fs := servertest.Root(t)
	dst := engine.Endpoint{Addr: servertest.Serve(t, &server.Server{FS: fs, Anonymous: true})}
	src := engine.Endpoint{Addr: "agent of laptop", Outbound: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return b.mesh.Dial(ctx, ep.ID)
	}}
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	res, err := engine.Copy(ctx, src, dst, []engine.Item{{Src: "/big", Dst: "/big"}}, engine.Options{Parallelism: 2, Verify: true}, nil)
	if err != nil || res.Failed > 0 || res.Transferred != 1 {
		t.Fatalf("copy through b: %v, %+v", err, res)
	}
	if got, err := os.ReadFile(filepath.Join(dstRoot, "big")); err != nil || len(got) != len(data) {
		t.Fatalf("copied %d bytes, %v", len(got), err)
	}

	// An endpoint whose agent is nowhere.
	other := domain.Endpoint{OwnerID: e.user.ID, Name: "desk", Auth: domain.AuthConnect}
	if err := b.mesh.Store.CreateEndpoint(e.ctx, &other); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.mesh.Online(e.ctx, other.ID); ok {
		t.Fatal("an agent that never connected is online")
	}
	if _, err := b.mesh.Dial(e.ctx, other.ID); domain.ErrorCode(err) != domain.EUnavailable {
		t.Fatalf("dial an agent that never connected: %v, want EUnavailable", err)
	}

	// The agent leaves a: b sees it go.
	stop()
	waitClosed(t, gone, 2*time.Second, "agent stopped")
	waitOnline(t, b.mesh, ep.ID, false)
	if _, err := b.mesh.Dial(e.ctx, ep.ID); domain.ErrorCode(err) != domain.EUnavailable {
		t.Fatalf("dial a stopped agent: %v, want EUnavailable", err)
	}
}

// A process that dies leaves its agents' records, which lapse with its
// own; one that stops cleanly takes its record away at once. The lapse is
// seen through b's clock, moved past a's lease, so no real lease has to
// run out while the test is loaded.
func TestHolderGoes(t *testing.T) {
	for _, c := range []struct {
		name  string
		serve bool // a renews its record until cancelled
		end   func(cancel context.CancelFunc, skew *atomic.Int64)
	}{
		// Not renewed: a was killed, and its lease has run out for b.
		{"record lapses", false, func(_ context.CancelFunc, skew *atomic.Int64) { skew.Store(int64(2 * time.Hour)) }},
		{"stops", true, func(cancel context.CancelFunc, _ *atomic.Int64) { cancel() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			a, b := e.process("a", time.Hour), e.process("b", time.Hour)
			var skew atomic.Int64
			b.mesh.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
			ctx, cancel := context.WithCancel(e.ctx)
			served := make(chan error, 1)
			if c.serve {
				go func() { served <- a.mesh.Serve(ctx) }()
			}
			ep, _, _, _ := e.agent(a, "laptop")
			gone, ok := b.mesh.Online(e.ctx, ep.ID)
			if !ok {
				t.Fatal("b does not see the agent connected to a")
			}
			c.end(cancel, &skew)
			waitClosed(t, gone, 10*time.Second, c.name)
			if _, ok := b.mesh.Online(e.ctx, ep.ID); ok {
				t.Fatal("b still sees the agent of a process that went")
			}
			if c.serve {
				if err := <-served; err != nil {
					t.Fatal(err)
				}
			}
			cancel()
		})
	}
}

// A revocation through one process drops the agent at the process it is
// connected to at once (its relay would check only hourly).
func TestDrop(t *testing.T) {
	e := newEnv(t)
	a, b := e.process("a", time.Hour), e.process("b", time.Hour)
	ep, _, done, _ := e.agent(a, "laptop")
	if _, err := b.mesh.Store.NewSetupKey(e.ctx, ep.ID, "new", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	b.mesh.Drop(ep.ID)
	select {
	case err := <-done:
		if _, ok := errors.AsType[*agent.RevokedError](err); !ok {
			t.Fatalf("agent ended with %v, want a RevokedError", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked agent is still connected")
	}
	waitOnline(t, b.mesh, ep.ID, false)
}

// Processes of another service (another CA) reach no agent here.
func TestOtherService(t *testing.T) {
	e := newEnv(t)
	a := e.process("a", time.Hour)
	ep, _, _, _ := e.agent(a, "laptop")
	stranger := e.process("b", time.Hour)
	stranger.mesh.CA, _ = ca.Generate()
	if _, err := stranger.mesh.Dial(e.ctx, ep.ID); domain.ErrorCode(err) != domain.EUnavailable {
		t.Fatalf("a process of another CA dialled the agent: %v", err)
	}
}
