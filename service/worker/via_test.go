package worker_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/internal/synclevel"
	"ferry/service/domain"
)

// relayed makes a head node (a forwarding server) and an endpoint behind
// it, both password endpoints; the head node is activated for alice when
// activated says so, the endpoint behind it always.
func (f *fixture) relayed(activated bool) (head, inner *endpoint, headEP, innerEP domain.Endpoint) {
	f.t.Helper()
	ctx := context.Background()
	head, inner = startForwarder(f.t), startEndpoint(f.t)
	headEP = domain.Endpoint{OwnerID: f.user.ID, Name: "head", Servers: []string{head.url}, Auth: domain.AuthPassword}
	if err := f.store.CreateEndpoint(ctx, &headEP); err != nil {
		f.t.Fatal(err)
	}
	innerEP = domain.Endpoint{OwnerID: f.user.ID, Name: "inner", Servers: []string{inner.url}, Auth: domain.AuthPassword, Via: headEP.ID}
	if err := f.store.CreateEndpoint(ctx, &innerEP); err != nil {
		f.t.Fatal(err)
	}
	if activated {
		f.activate(headEP, domain.Login{User: "alice", Password: "pw"}, time.Hour)
	}
	f.activate(innerEP, domain.Login{User: "alice", Password: "pw"}, time.Hour)
	return head, inner, headEP, innerEP
}

// empty fails the test unless root holds no file or directory.
func empty(t *testing.T, root string) {
	t.Helper()
	var found []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if p != root {
			found = append(found, p)
		}
		return err
	})
	if len(found) > 0 {
		t.Fatalf("the head node's root holds %v, want nothing", found)
	}
}

// TestViaDestination: a task to one destination behind a relay goes
// through the relay's server, which writes nothing (the service never
// connects to the destination: its engine endpoint refuses to dial), and
// every file arrives, recorded for the task.
func TestViaDestination(t *testing.T) {
	f := newFixture(t)
	f.files("set", 10, 40_000)
	f.files("set/sub", 3, 1000)
	head, inner, _, innerEP := f.relayed(true)
	task := domain.Task{UserID: f.user.ID, Type: domain.TypeTransfer, SrcEndpoint: f.srcEP.ID, DstEndpoint: innerEP.ID,
		Items: []domain.Item{{Src: "/set", Dst: "/copy", Recursive: true}}, Options: domain.Options{SyncLevel: synclevel.None, VerifyChecksum: true}}
	if err := f.store.CreateTask(context.Background(), &task); err != nil {
		t.Fatal(err)
	}
	serve(t, f.worker("w1", f.store, &spy{}))
	got := f.wait(task.ID, 30*time.Second, finished)
	if got.Status != domain.StatusSucceeded || got.Files != 13 || got.FilesTransferred != 13 || got.FilesFailed != 0 {
		t.Fatalf("task %s %+v\nevents: %v", got.Status, got.Counters, f.events(task.ID))
	}
	sameTree(t, filepath.Join(f.src.root, "set"), filepath.Join(inner.root, "copy"))
	empty(t, head.root)
	if n := len(f.done(task.ID)); n != 13 {
		t.Errorf("%d files recorded done, want 13", n)
	}
	if len(got.Destinations) != 0 {
		t.Errorf("the task shows destinations %+v, want its one destination as submitted", got.Destinations)
	}
}

// TestViaOneOfMany: one destination of several is behind a relay; each
// gets every file, the relay nothing.
func TestViaOneOfMany(t *testing.T) {
	f := newFixture(t)
	f.files("set", 6, 20_000)
	head, inner, _, innerEP := f.relayed(true)
	srvs, eps := f.destinations(1)
	task := f.submitMany([]domain.Endpoint{eps[0], innerEP}, domain.Item{Src: "/set", Dst: "/copy", Recursive: true})
	serve(t, f.worker("w1", f.store, &spy{}))
	got := f.wait(task.ID, 30*time.Second, finished)
	if got.Status != domain.StatusSucceeded || got.FilesTransferred != 6 {
		t.Fatalf("task %s %+v\nevents: %v", got.Status, got.Counters, f.events(task.ID))
	}
	sameTree(t, filepath.Join(f.src.root, "set"), destDir(srvs[0], 0, "copy"))
	sameTree(t, filepath.Join(f.src.root, "set"), destDir(inner, 1, "copy"))
	empty(t, head.root)
	if d := got.Destinations[1]; d.FilesTransferred != 6 {
		t.Errorf("the destination behind the relay: %+v", d)
	}
}

// TestViaNotActivated: a task to an endpoint behind a relay that its
// user has not activated waits NOT_ACTIVATED, naming the relay, and
// goes on once it is activated.
func TestViaNotActivated(t *testing.T) {
	f := newFixture(t)
	f.files("set", 3, 1000)
	_, inner, headEP, innerEP := f.relayed(false)
	task := domain.Task{UserID: f.user.ID, Type: domain.TypeTransfer, SrcEndpoint: f.srcEP.ID, DstEndpoint: innerEP.ID,
		Items: []domain.Item{{Src: "/set", Dst: "/copy", Recursive: true}}, Options: domain.Options{SyncLevel: synclevel.None}}
	if err := f.store.CreateTask(context.Background(), &task); err != nil {
		t.Fatal(err)
	}
	serve(t, f.worker("w1", f.store, &spy{}))
	got := f.wait(task.ID, 30*time.Second, func(t domain.Task) bool { return t.Status == domain.StatusInactive })
	if got.NiceStatus != domain.NiceNotActivated {
		t.Fatalf("task %s %s, want INACTIVE %s", got.Status, got.NiceStatus, domain.NiceNotActivated)
	}
	if e, ok := f.event(task.ID, domain.EventInactive); !ok || !strings.Contains(e.Description, "head") {
		t.Fatalf("INACTIVE event %+v, want it to name the head node", e)
	}
	f.activate(headEP, domain.Login{User: "alice", Password: "pw"}, time.Hour)
	if n, err := f.store.Reactivate(context.Background(), f.user.ID, headEP.ID, time.Now()); err != nil || n != 1 {
		t.Fatalf("Reactivate of the head node: %d, %v", n, err)
	}
	got = f.wait(task.ID, 30*time.Second, finished)
	if got.Status != domain.StatusSucceeded {
		t.Fatalf("task %s %+v\nevents: %v", got.Status, got.Counters, f.events(task.ID))
	}
	sameTree(t, filepath.Join(f.src.root, "set"), filepath.Join(inner.root, "copy"))
}

// TestViaSource: a task whose source has been put behind a relay since
// it was submitted fails, naming the head node.
func TestViaSource(t *testing.T) {
	f := newFixture(t)
	f.files("set", 1, 1000)
	_, _, headEP, _ := f.relayed(true)
	task := f.submit(domain.Options{SyncLevel: synclevel.None}, domain.Item{Src: "/set", Dst: "/copy", Recursive: true})
	src := f.srcEP
	src.Via = headEP.ID
	if err := f.store.UpdateEndpoint(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	serve(t, f.worker("w1", f.store, &spy{}))
	got := f.wait(task.ID, 30*time.Second, finished)
	if got.Status != domain.StatusFailed || got.FatalError == nil || !strings.Contains(got.FatalError.Description, "alice#head") {
		t.Fatalf("task %s %+v", got.Status, got.FatalError)
	}
}
