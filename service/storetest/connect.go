package storetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"ferry/service/domain"
)

var connectTests = []test{
	{"SetupKeys", testSetupKeys},
	{"CreateConnectEndpoint", testCreateConnectEndpoint},
	{"Processes", testProcesses},
	{"AgentRoutes", testAgentRoutes},
	{"InitCA", testInitCA},
	{"ResumeEndpoint", testResumeEndpoint},
}

// connectEndpoint creates a connect endpoint of owner.
func (f *fixture) connectEndpoint(owner domain.User, name string) domain.Endpoint {
	f.t.Helper()
	e := domain.Endpoint{OwnerID: owner.ID, Name: name, Auth: domain.AuthConnect}
	f.ok(f.s.CreateEndpoint(f.ctx, &e))
	e.Owner = owner.Name
	return e
}

func testSetupKeys(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice := f.user("alice")
	ep, other := f.connectEndpoint(alice, "laptop"), f.connectEndpoint(alice, "desk")
	plain := f.endpoint(alice, "dtn", false, 0)

	_, err := f.s.CertGeneration(f.ctx, ep.ID)
	wantCode(t, err, domain.ENotFound) // never paired
	gen, err := f.s.NewSetupKey(f.ctx, ep.ID, "h1", t0.Add(time.Hour))
	f.ok(err)
	_, err = f.s.NewSetupKey(f.ctx, other.ID, "o1", t0.Add(time.Hour))
	f.ok(err)

	// Single use, by its hash only.
	id, g, err := f.s.UseSetupKey(f.ctx, "h1", t0)
	f.ok(err)
	equal(t, "paired endpoint and generation", []any{id, g}, []any{ep.ID, gen})
	_, _, err = f.s.UseSetupKey(f.ctx, "h1", t0)
	wantCode(t, err, domain.ENotFound)
	got, err := f.s.CertGeneration(f.ctx, ep.ID)
	f.ok(err)
	equal(t, "generation", got, gen)

	// A new key revokes the certificates of the earlier generation, and
	// replaces an unused key.
	gen2, err := f.s.NewSetupKey(f.ctx, ep.ID, "h2", t0.Add(time.Hour))
	f.ok(err)
	if gen2 <= gen {
		t.Fatalf("new generation %d, want more than %d", gen2, gen)
	}
	gen3, err := f.s.NewSetupKey(f.ctx, ep.ID, "h3", t0.Add(time.Hour))
	f.ok(err)
	_, _, err = f.s.UseSetupKey(f.ctx, "h2", t0)
	wantCode(t, err, domain.ENotFound)
	got, err = f.s.CertGeneration(f.ctx, ep.ID)
	f.ok(err)
	equal(t, "generation after two new keys", got, gen3)

	// Keys expire.
	_, _, err = f.s.UseSetupKey(f.ctx, "h3", t0.Add(time.Hour))
	wantCode(t, err, domain.ENotFound)

	// Another endpoint's key is its own.
	id, _, err = f.s.UseSetupKey(f.ctx, "o1", t0)
	f.ok(err)
	equal(t, "other endpoint", id, other.ID)

	runErrCases(t, []errCase{
		{"not a connect endpoint", func() error { _, err := f.s.NewSetupKey(f.ctx, plain.ID, "p", t0.Add(time.Hour)); return err }, domain.EInvalid},
		{"missing endpoint", func() error { _, err := f.s.NewSetupKey(f.ctx, "nope", "p", t0.Add(time.Hour)); return err }, domain.ENotFound},
	})

	// Deleting the endpoint revokes every certificate.
	f.ok(f.s.DeleteEndpoint(f.ctx, ep.ID))
	_, err = f.s.CertGeneration(f.ctx, ep.ID)
	wantCode(t, err, domain.ENotFound)
}

// A connect endpoint and its first setup key are made together or not at
// all: a failure of either leaves neither.
func testCreateConnectEndpoint(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice := f.user("alice")
	ep := domain.Endpoint{OwnerID: alice.ID, Name: "laptop", Auth: domain.AuthConnect, DefaultDir: "/"}
	f.ok(f.s.CreateConnectEndpoint(f.ctx, &ep, "h1", t0.Add(time.Hour)))
	wantUUID(t, ep.ID)
	got, err := f.s.Endpoint(f.ctx, ep.ID)
	f.ok(err)
	equal(t, "stored endpoint", got.Name+" "+got.Auth+" "+got.Owner, "laptop connect alice")
	id, gen, err := f.s.UseSetupKey(f.ctx, "h1", t0)
	f.ok(err)
	equal(t, "paired endpoint and generation", []any{id, gen}, []any{ep.ID, int64(1)})

	// The key of another endpoint: the key fails after the endpoint was
	// inserted, which must not stay.
	f.ok(f.s.CreateConnectEndpoint(f.ctx, &domain.Endpoint{OwnerID: alice.ID, Name: "desk", Auth: domain.AuthConnect}, "h2", t0.Add(time.Hour)))
	if err := f.s.CreateConnectEndpoint(f.ctx, &domain.Endpoint{OwnerID: alice.ID, Name: "half", Auth: domain.AuthConnect}, "h2", t0.Add(time.Hour)); err == nil {
		t.Fatal("two endpoints made with one setup key")
	}
	_, err = f.s.EndpointByName(f.ctx, "alice", "half")
	wantCode(t, err, domain.ENotFound)

	runErrCases(t, []errCase{
		{"taken name", func() error {
			return f.s.CreateConnectEndpoint(f.ctx, &domain.Endpoint{OwnerID: alice.ID, Name: "laptop", Auth: domain.AuthConnect}, "h3", t0.Add(time.Hour))
		}, domain.EConflict},
		{"not a connect endpoint", func() error {
			return f.s.CreateConnectEndpoint(f.ctx, &domain.Endpoint{OwnerID: alice.ID, Name: "dtn", Auth: domain.AuthAnonymous}, "h4", t0.Add(time.Hour))
		}, domain.EInvalid},
	})
	// Neither failure left a key behind.
	for _, h := range []string{"h3", "h4"} {
		_, _, err := f.s.UseSetupKey(f.ctx, h, t0)
		wantCode(t, err, domain.ENotFound)
	}
}

func testResumeEndpoint(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice, bob := f.user("alice"), f.user("bob")
	agent, dtn := f.connectEndpoint(alice, "laptop"), f.endpoint(alice, "dtn", true, 0)
	offline := f.task(alice, agent, dtn, t0)
	bobs := f.task(bob, dtn, agent, t0)
	expired := f.task(alice, agent, dtn, t0) // paused for another reason
	elsewhere := f.task(alice, dtn, dtn, t0)
	for _, task := range []domain.Task{offline, bobs, expired, elsewhere} {
		f.claim(task, "w", t0, 0)
		nice := domain.NiceEndpointOffline
		if task.ID == expired.ID {
			nice = domain.NiceCredentialExpired
		}
		f.ok(f.s.SetStatus(f.ctx, task.ID, "w", domain.StatusInactive, nice, nil, t0, nil))
	}
	n, err := f.s.ResumeEndpoint(f.ctx, agent.ID, domain.NiceEndpointOffline, t0.Add(time.Minute))
	f.ok(err)
	equal(t, "tasks resumed", n, 2)
	for _, c := range []struct {
		task         domain.Task
		status, nice string
	}{
		{offline, domain.StatusActive, domain.NiceQueued},
		{bobs, domain.StatusActive, domain.NiceQueued},
		{expired, domain.StatusInactive, domain.NiceCredentialExpired},
		{elsewhere, domain.StatusInactive, domain.NiceEndpointOffline},
	} {
		got := f.get(c.task.ID)
		if got.Status != c.status || got.NiceStatus != c.nice || got.Worker != "" {
			t.Errorf("task %s: %s/%s held by %q; want %s/%s", c.task.ID, got.Status, got.NiceStatus, got.Worker, c.status, c.nice)
		}
	}
	evs := f.events(offline.ID)
	if last := evs[len(evs)-1]; last.Code != domain.EventResumed || !last.Time.Equal(t0.Add(time.Minute)) {
		t.Fatalf("last event %+v, want RESUMED at %v", last, t0.Add(time.Minute))
	}
}

// A process's record holds until it expires, unless renewed or deleted.
func testProcesses(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	a := domain.Process{ID: "host:1", RelayURL: "http://a:8080/api/v0.10/relay", Expires: t0.Add(time.Minute)}
	b := domain.Process{ID: "host:2", RelayURL: "tcp://b:8443", Expires: t0.Add(2 * time.Minute)}
	f.ok(f.s.PutProcess(f.ctx, b))
	f.ok(f.s.PutProcess(f.ctx, a))
	live := func(at time.Time) []domain.Process {
		t.Helper()
		ps, err := f.s.Processes(f.ctx, at)
		f.ok(err)
		return ps
	}
	equal(t, "live at t0", live(t0), []domain.Process{a, b})
	equal(t, "live once a lapsed", live(t0.Add(time.Minute)), []domain.Process{b})

	// Renewed, and moved.
	a.Expires, a.RelayURL = t0.Add(3*time.Minute), "http://a2:8080/api/v0.10/relay"
	f.ok(f.s.PutProcess(f.ctx, a))
	equal(t, "live after a renewed", live(t0.Add(150*time.Second)), []domain.Process{a})

	f.ok(f.s.DeleteProcess(f.ctx, a.ID))
	equal(t, "live after a left", live(t0), []domain.Process{b})
	wantCode(t, f.s.DeleteProcess(f.ctx, a.ID), domain.ENotFound)

	// Long-lapsed records go when another process renews its own.
	c := domain.Process{ID: "host:3", RelayURL: "tcp://c:1", Expires: t0.Add(48 * time.Hour)}
	f.ok(f.s.PutProcess(f.ctx, c))
	equal(t, "after b lapsed long ago", live(t0.Add(-time.Hour)), []domain.Process{c})
}

// An agent is reached through the process it is connected to, while that
// process's record holds.
func testAgentRoutes(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	alice := f.user("alice")
	laptop, desk, gone := f.connectEndpoint(alice, "laptop"), f.connectEndpoint(alice, "desk"), f.connectEndpoint(alice, "gone")
	a := domain.Process{ID: "a", RelayURL: "tcp://a:1", Expires: t0.Add(time.Minute)}
	b := domain.Process{ID: "b", RelayURL: "tcp://b:1", Expires: t0.Add(time.Hour)}
	f.ok(f.s.PutProcess(f.ctx, a))
	f.ok(f.s.PutProcess(f.ctx, b))
	routes := func(at time.Time) map[string]domain.Process {
		t.Helper()
		m, err := f.s.AgentRoutes(f.ctx, []string{laptop.ID, desk.ID, gone.ID, "nope"}, at)
		f.ok(err)
		return m
	}
	equal(t, "no agent connected", routes(t0), map[string]domain.Process{})

	f.ok(f.s.PutAgentRoute(f.ctx, laptop.ID, "a"))
	f.ok(f.s.PutAgentRoute(f.ctx, desk.ID, "b"))
	f.ok(f.s.PutAgentRoute(f.ctx, gone.ID, "a"))
	equal(t, "routes", routes(t0), map[string]domain.Process{laptop.ID: a, desk.ID: b, gone.ID: a})
	only, err := f.s.AgentRoutes(f.ctx, []string{desk.ID}, t0)
	f.ok(err)
	equal(t, "one route", only, map[string]domain.Process{desk.ID: b})
	// A's record lapses: its agents are no longer reached through it.
	equal(t, "routes once a lapsed", routes(t0.Add(time.Minute)), map[string]domain.Process{desk.ID: b})

	// The laptop's agent moves to b; a, which saw it go only now, forgets
	// its route, which is no longer a's.
	f.ok(f.s.PutAgentRoute(f.ctx, laptop.ID, "b"))
	f.ok(f.s.DeleteAgentRoute(f.ctx, laptop.ID, "a"))
	// The desk's agent leaves b.
	f.ok(f.s.DeleteAgentRoute(f.ctx, desk.ID, "b"))
	// A deleted endpoint's route goes with it.
	f.ok(f.s.DeleteEndpoint(f.ctx, gone.ID))
	equal(t, "routes after the moves", routes(t0), map[string]domain.Process{laptop.ID: b})

	wantCode(t, f.s.PutAgentRoute(f.ctx, gone.ID, "a"), domain.ENotFound)
}

// The first CA stored is the CA, whoever asks.
func testInitCA(t *testing.T, open Open) {
	f := newFixture(t, open(t))
	got, err := f.s.InitCA(f.ctx, []byte("first"))
	f.ok(err)
	equal(t, "CA stored", string(got), "first")
	got, err = f.s.InitCA(f.ctx, []byte("second"))
	f.ok(err)
	equal(t, "CA after a second init", string(got), "first")
}

// initCARace has processes on each store make their CA at once: all get
// the same one.
func initCARace(t *testing.T, stores ...domain.Store) {
	var wg sync.WaitGroup
	got := make([][]byte, 2*len(stores))
	for i := range got {
		wg.Go(func() {
			var err error
			got[i], err = stores[i%len(stores)].InitCA(t.Context(), fmt.Appendf(nil, "CA of process %d", i))
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range got {
		if !bytes.Equal(got[i], got[0]) {
			t.Fatalf("processes got different CAs: %q and %q", got[0], got[i])
		}
	}
}
