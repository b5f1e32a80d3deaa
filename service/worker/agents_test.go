package worker_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ferry/internal/synclevel"
	"ferry/service/domain"
)

// fakeRelay reaches a GridFTP server as if it were a connect endpoint's
// agent; away drops it as an agent that stops does.
type fakeRelay struct {
	addr   string
	mu     sync.Mutex
	online bool
	gone   chan struct{}
	conns  []net.Conn
}

func (r *fakeRelay) Dial(ctx context.Context, _ string) (net.Conn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.online {
		return nil, domain.Errorf(domain.EUnavailable, "not connected")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", r.addr)
	if err == nil {
		r.conns = append(r.conns, c)
	}
	return c, err
}

func (r *fakeRelay) Online(context.Context, string) (<-chan struct{}, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gone, r.online
}

func (r *fakeRelay) away() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.online = false
	close(r.gone)
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

func (r *fakeRelay) back() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.online, r.gone = true, make(chan struct{})
}

// A task whose connect endpoint's agent is away waits INACTIVE, and goes on
// where it stopped when the agent is back.
func TestAgentAway(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.srcEP.Auth, f.srcEP.Servers, f.srcEP.Owner = domain.AuthConnect, nil, f.user.Name
	if err := f.store.UpdateEndpoint(ctx, f.srcEP); err != nil {
		t.Fatal(err)
	}
	relay := &fakeRelay{addr: strings.TrimPrefix(f.src.url, "ftp://"), gone: make(chan struct{})}
	f.files("tree", 100, 1000)
	f.src.fs.delay.Store(int64(20 * time.Millisecond))
	task := f.submit(domain.Options{SyncLevel: synclevel.None, NotifyOnInactive: true},
		domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
	w := f.worker("w1", f.store, &spy{})
	w.Agents = relay
	serve(t, w)

	offline := func() {
		t.Helper()
		got := f.wait(task.ID, 5*time.Second, func(t domain.Task) bool { return t.Status == domain.StatusInactive })
		if got.NiceStatus != domain.NiceEndpointOffline {
			t.Fatalf("task INACTIVE with %s, want %s", got.NiceStatus, domain.NiceEndpointOffline)
		}
		evs := f.events(task.ID)
		last := evs[len(evs)-1]
		if want := "endpoint " + f.srcEP.DisplayName() + "'s agent is not connected"; last.Code != domain.EventInactive || !strings.Contains(last.Description, want) {
			t.Fatalf("last event %s %q, want INACTIVE saying %q", last.Code, last.Description, want)
		}
	}
	comeBack := func() {
		t.Helper()
		relay.back()
		// What the relay does when an agent connects.
		if n, err := f.store.ResumeEndpoint(ctx, f.srcEP.ID, domain.NiceEndpointOffline, time.Now()); err != nil || n != 1 {
			t.Fatalf("ResumeEndpoint = %d, %v", n, err)
		}
		w.Wake()
	}

	offline() // submitted while the agent was away
	comeBack()
	f.wait(task.ID, 5*time.Second, func(task domain.Task) bool { return task.FilesTransferred >= 10 })
	relay.away()
	offline()
	done := f.done(task.ID)
	if len(done) == 0 || len(done) == 100 {
		t.Fatalf("%d files done when the agent went away", len(done))
	}

	f.src.fs.delay.Store(0)
	comeBack()
	got := f.wait(task.ID, 10*time.Second, finished)
	if got.Status != domain.StatusSucceeded || got.FilesTransferred != 100 {
		t.Fatalf("task %s %+v", got.Status, got.Counters)
	}
	for _, p := range done {
		if n := f.src.fs.count(p); n != 1 {
			t.Errorf("%s was done before the agent went away and then sent %d times", p, n)
		}
	}
	sameTree(t, filepath.Join(f.src.root, "tree"), filepath.Join(f.dst.root, "tree"))
	f.notes.expect(t, "[alice INACTIVE alice INACTIVE]")
}
