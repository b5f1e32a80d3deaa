package worker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"ferry/internal/netpolicy"
	"ferry/internal/peertest"
	"ferry/internal/synclevel"
	"ferry/service/domain"
)

// sharing is the fixture's source served as alice's anonymous endpoint
// "shared", public, and bob with an anonymous endpoint of his own on the
// fixture's destination.
type sharing struct {
	*fixture
	shared, bobs domain.Endpoint
	bob          domain.User
}

func newSharing(t *testing.T) *sharing {
	t.Helper()
	s := &sharing{fixture: newFixture(t), bob: domain.User{Name: "bob", PasswordHash: "x"}}
	ctx := context.Background()
	if err := s.store.CreateUser(ctx, &s.bob); err != nil {
		t.Fatal(err)
	}
	s.shared = domain.Endpoint{OwnerID: s.user.ID, Name: "shared", Servers: []string{s.src.url}, Auth: domain.AuthAnonymous, Public: true}
	s.bobs = domain.Endpoint{OwnerID: s.bob.ID, Name: "mine", Servers: []string{s.dst.url}, Auth: domain.AuthAnonymous}
	for _, ep := range []*domain.Endpoint{&s.shared, &s.bobs} {
		if err := s.store.CreateEndpoint(ctx, ep); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// submitAs creates a transfer of /tree from src to dst for user.
func (s *sharing) submitAs(user domain.User, src, dst domain.Endpoint) domain.Task {
	s.t.Helper()
	t := domain.Task{UserID: user.ID, Type: domain.TypeTransfer, SrcEndpoint: src.ID, DstEndpoint: dst.ID,
		Items: []domain.Item{{Src: "/tree", Dst: "/tree", Recursive: true}}, Options: domain.Options{SyncLevel: synclevel.None}}
	if err := s.store.CreateTask(context.Background(), &t); err != nil {
		s.t.Fatal(err)
	}
	return t
}

// setPublic makes alice's shared endpoint public or private, through
// another handle on the database, as another process would.
func (s *sharing) setPublic(public bool) {
	s.t.Helper()
	s.shared.Public = public
	if err := s.open().UpdateEndpoint(context.Background(), s.shared); err != nil {
		s.t.Fatal(err)
	}
}

// wantRevoked checks that task ended FAILED because the endpoint went
// private.
func (s *sharing) wantRevoked(task domain.Task) domain.Task {
	s.t.Helper()
	got := s.wait(task.ID, 10*time.Second, finished)
	if got.Status != domain.StatusFailed || got.FatalError == nil || got.FatalError.Code != domain.NicePermissionDenied ||
		!strings.Contains(got.FatalError.Description, "alice#shared is no longer shared") {
		s.t.Fatalf("task %s %+v %+v; want FAILED %s saying alice#shared is no longer shared", got.Status, got.FatalError, got.Counters, domain.NicePermissionDenied)
	}
	return got
}

// TestPrivateEndpointWaitingTask: bob's task from alice's public endpoint
// waits INACTIVE; alice makes the endpoint private; bob resumes the task:
// it fails without a byte moved. Alice's own task still runs.
func TestPrivateEndpointWaitingTask(t *testing.T) {
	s := newSharing(t)
	s.files("tree", 5, 1000)
	ctx := context.Background()
	task := s.submitAs(s.bob, s.shared, s.bobs)
	if n, err := s.store.Deactivate(ctx, s.bob.ID, s.shared.ID, domain.NiceNotActivated, time.Now()); err != nil || n != 1 {
		t.Fatalf("Deactivate = %d, %v", n, err)
	}
	s.setPublic(false)
	if err := s.store.ResumeTask(ctx, s.bob.ID, task.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	serve(t, s.worker("w1", s.store, &spy{}))
	if got := s.wantRevoked(task); got.BytesTransferred != 0 || got.FilesTransferred != 0 {
		t.Fatalf("the task moved %d files, %d bytes from a private endpoint", got.FilesTransferred, got.BytesTransferred)
	}
	own := s.submitAs(s.user, s.shared, s.dstEP)
	if got := s.wait(own.ID, 10*time.Second, finished); got.Status != domain.StatusSucceeded {
		t.Fatalf("alice's own task on her private endpoint: %s %+v", got.Status, got.FatalError)
	}
}

// TestPrivateEndpointRunningTask: alice makes her endpoint private while
// bob's task copies from it: the task stops at once, FAILED.
func TestPrivateEndpointRunningTask(t *testing.T) {
	s := newSharing(t)
	const files = 100
	s.files("tree", files, 1000)
	s.src.fs.delay.Store(int64(20 * time.Millisecond))
	task := s.submitAs(s.bob, s.shared, s.bobs)
	w := s.worker("w1", s.store, &spy{})
	w.HeartbeatEvery = time.Minute // only the store's signal tells the run
	serve(t, w)
	s.wait(task.ID, 10*time.Second, func(t domain.Task) bool { return t.FilesTransferred >= 5 })
	s.setPublic(false)
	got := s.wantRevoked(task) // a run the store does not tell ends SUCCEEDED
	if got.FilesTransferred >= files {
		t.Fatalf("the task ended after the endpoint went private with %d of %d files transferred", got.FilesTransferred, files)
	}
	opened := 0
	for i := range files {
		opened += s.src.fs.count(fmt.Sprintf("/tree/f%03d", i))
	}
	if opened == 0 {
		t.Fatal("no source file was opened")
	}
	time.Sleep(200 * time.Millisecond)
	again := 0
	for i := range files {
		again += s.src.fs.count(fmt.Sprintf("/tree/f%03d", i))
	}
	if again != opened {
		t.Errorf("files were still read from the private endpoint after the task failed: %d opens, then %d", opened, again)
	}
}

// TestPolicyRefusesTaskEndpoint: a task whose endpoint's server is at an
// address the operator's policy refuses (here loopback, the service being
// elsewhere) fails at once, saying which rule refused it.
func TestPolicyRefusesTaskEndpoint(t *testing.T) {
	f := newFixture(t)
	f.files("tree", 2, 100)
	task := f.submit(domain.Options{}, domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
	w := f.worker("w1", f.store, &spy{})
	var err error
	if w.Networks, err = netpolicy.New("", false); err != nil {
		t.Fatal(err)
	}
	serve(t, w)
	got := f.wait(task.ID, 10*time.Second, finished)
	if got.Status != domain.StatusFailed || got.FatalError == nil || got.FatalError.Code != domain.NicePermissionDenied ||
		!strings.Contains(got.FatalError.Description, "loopback") {
		t.Fatalf("task %s %+v; want FAILED %s naming the loopback rule", got.Status, got.FatalError, domain.NicePermissionDenied)
	}
}

// TestPeerWordsNotInTaskEvents: a task whose source is an SSH server
// fails, and neither its fatal error nor its events repeat the banner.
func TestPeerWordsNotInTaskEvents(t *testing.T) {
	const secret = "INTERNAL-SECRET-9c1d"
	ssh := peertest.Serve(t, "SSH-2.0-OpenSSH_9.6 "+secret+"\r\n", "")
	f := newFixture(t)
	f.srcEP.Servers = []string{"ftp://" + ssh}
	if err := f.store.UpdateEndpoint(context.Background(), f.srcEP); err != nil {
		t.Fatal(err)
	}
	task := f.submit(domain.Options{}, domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
	serve(t, f.worker("w1", f.store, &spy{}))
	got := f.wait(task.ID, 10*time.Second, finished)
	if got.Status != domain.StatusFailed || got.FatalError == nil {
		t.Fatalf("task %s %+v, want FAILED", got.Status, got.FatalError)
	}
	told := got.FatalError.Description
	for _, e := range f.events(task.ID) {
		told += "\n" + e.Description + " " + e.Details
	}
	if strings.Contains(told, secret) || !strings.Contains(told, "not as a GridFTP server") {
		t.Fatalf("the task's history repeats the SSH server's banner, or does not say what answered:\n%s", told)
	}
}
