package worker_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/internal/partname"
	"ferry/internal/synclevel"
	"ferry/service/domain"
	"ferry/stack"
	"ferry/stack/forward"
	"ferry/storage"
)

// startForwarder is startEndpoint with ferry's multicast layer, as ferry
// gridftp --multicast serves it.
func startForwarder(t *testing.T) *endpoint {
	t.Helper()
	root, p := servertest.Root(t)
	c := &counting{Driver: p, opens: map[string]int{}, creates: map[string]int{}}
	layers := stack.Kinds()
	maps.Copy(layers, forward.Kinds())
	addr := servertest.Serve(t, &server.Server{FS: c, Anonymous: true, Auth: servertest.Users{"alice": "pw"}, DataTimeout: 5 * time.Second,
		MarkerInterval: 50 * time.Millisecond, Layers: layers})
	return &endpoint{root: root, url: "ftp://" + addr, fs: c}
}

// destinations starts n forwarding endpoints, activated for alice.
func (f *fixture) destinations(n int) ([]*endpoint, []domain.Endpoint) {
	f.t.Helper()
	var srvs []*endpoint
	var eps []domain.Endpoint
	for i := range n {
		srv := startForwarder(f.t)
		ep := domain.Endpoint{OwnerID: f.user.ID, Name: fmt.Sprintf("dest%d", i), Servers: []string{srv.url}, Auth: domain.AuthPassword}
		if err := f.store.CreateEndpoint(context.Background(), &ep); err != nil {
			f.t.Fatal(err)
		}
		f.activate(ep, domain.Login{User: "alice", Password: "pw"}, time.Hour)
		srvs, eps = append(srvs, srv), append(eps, ep)
	}
	return srvs, eps
}

// submitMany creates a transfer task of items from src to each of eps,
// the second at its own path.
func (f *fixture) submitMany(eps []domain.Endpoint, items ...domain.Item) domain.Task {
	f.t.Helper()
	t := domain.Task{UserID: f.user.ID, Type: domain.TypeTransfer, SrcEndpoint: f.srcEP.ID, Items: items,
		Options: domain.Options{SyncLevel: synclevel.None}}
	for i, ep := range eps {
		d := domain.Destination{Endpoint: ep.ID}
		if i == 1 {
			for _, it := range items {
				d.Paths = append(d.Paths, "/other"+it.Dst)
			}
		}
		t.Destinations = append(t.Destinations, d)
	}
	if err := f.store.CreateTask(context.Background(), &t); err != nil {
		f.t.Fatal(err)
	}
	return t
}

// destDir is where destination i of a submitMany task keeps dir.
func destDir(srv *endpoint, i int, dir string) string {
	if i == 1 {
		return filepath.Join(srv.root, "other", dir)
	}
	return filepath.Join(srv.root, dir)
}

// TestManyDestinations: a task with three destinations, ferry servers
// that forward, ends with every file at each, counted per destination
// and for the task.
func TestManyDestinations(t *testing.T) {
	f := newFixture(t)
	f.files("set", 12, 40_000)
	f.files("set/sub", 3, 1000)
	srvs, eps := f.destinations(3)
	task := f.submitMany(eps, domain.Item{Src: "/set", Dst: "/copy", Recursive: true})
	serve(t, f.worker("w1", f.store, &spy{}))
	got := f.wait(task.ID, 30*time.Second, finished)
	if got.Status != domain.StatusSucceeded || got.Files != 15 || got.FilesTransferred != 15 || got.FilesFailed != 0 {
		t.Fatalf("task %s %+v\nevents: %v", got.Status, got.Counters, f.events(task.ID))
	}
	for i, srv := range srvs {
		sameTree(t, filepath.Join(f.src.root, "set"), destDir(srv, i, "copy"))
		d := got.Destinations[i]
		if d.Endpoint != eps[i].ID || d.FilesTransferred != 15 || d.FilesSkipped != 0 || d.FilesFailed != 0 || d.BytesTransferred != 12*40_000+3*1000 {
			t.Errorf("destination %d: %+v", i, d)
		}
	}
	recs, _, err := f.store.DestFiles(context.Background(), task.ID, -1, domain.FileSucceeded, 0, 1000)
	if err != nil || len(recs) != 45 {
		t.Fatalf("%d records at destinations (%v), want 45", len(recs), err)
	}
	if e, ok := f.event(task.ID, domain.EventStarted); !ok || !strings.Contains(e.Description, "to 3 destinations") || !strings.Contains(e.Description, eps[2].Name) {
		t.Errorf("STARTED event %+v", e)
	}
	if n := len(f.done(task.ID)); n != 15 {
		t.Errorf("%d files recorded done for the task, want 15", n)
	}
}

// TestManyDestinationsResume: a task whose earlier run left files at its
// destinations, recorded there, resumes each destination where it
// stood: none of them is sent a file it had again.
func TestManyDestinationsResume(t *testing.T) {
	f := newFixture(t)
	f.files("set", 10, 30_000)
	srvs, eps := f.destinations(3)
	task := f.submitMany(eps, domain.Item{Src: "/set", Dst: "/copy", Recursive: true})
	had := []int{10, 4, 2} // the first files of the set each destination had
	ctx := context.Background()
	if _, err := f.store.Claim(ctx, "earlier", time.Now(), time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	var b domain.Batch
	for i, srv := range srvs {
		for j := range had[i] {
			name := fmt.Sprintf("f%03d", j)
			data, _ := os.ReadFile(filepath.Join(f.src.root, "set", name))
			write(t, filepath.Join(destDir(srv, i, "copy"), name), data)
			dst := "/copy/" + name
			if i == 1 {
				dst = "/other" + dst
			}
			b.DestFiles = append(b.DestFiles, domain.DestFile{Dest: i, Src: "/set/" + name, Dst: dst, Size: 30_000, State: domain.FileSucceeded})
		}
	}
	if err := f.store.Progress(ctx, task.ID, "earlier", b); err != nil {
		t.Fatal(err)
	}
	// The earlier worker stopped: the task waits for the next.
	if err := f.store.SetStatus(ctx, task.ID, "earlier", domain.StatusActive, domain.NiceQueued, nil, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	serve(t, f.worker("w1", f.store, &spy{}))
	got := f.wait(task.ID, 30*time.Second, finished)
	if got.Status != domain.StatusSucceeded || got.Files != 10 || got.FilesTransferred != 10 {
		t.Fatalf("task %s %+v\nevents: %v", got.Status, got.Counters, f.events(task.ID))
	}
	for i, srv := range srvs {
		sameTree(t, filepath.Join(f.src.root, "set"), destDir(srv, i, "copy"))
		for j := range 10 {
			p := "/copy/" + fmt.Sprintf("f%03d", j)
			if i == 1 {
				p = "/other" + p
			}
			if n := srv.fs.created(p); j < had[i] && n != 0 {
				t.Errorf("destination %d had %s and was sent it %d more times", i, p, n)
			} else if j >= had[i] && n == 0 {
				t.Errorf("destination %d lacked %s and was not sent it", i, p)
			}
		}
		if d := got.Destinations[i]; d.FilesTransferred != 10 || d.FilesFailed != 0 {
			t.Errorf("destination %d: %+v", i, d)
		}
	}
	// The source sent the files every destination had to none of them.
	if n := f.src.fs.count("/set/f000"); n != 0 {
		t.Errorf("the source sent f000, which every destination had, %d times", n)
	}
}

// refusing refuses to create files whose names end in suffix ("/name"),
// under their final or temporary names.
type refusing struct {
	storage.Driver
	suffix string
}

func (r refusing) Create(ctx context.Context, name string, flag storage.OpenFlag) (storage.File, error) {
	if strings.HasSuffix(name, r.suffix) || strings.HasSuffix(name, "/"+partname.For(path.Base(r.suffix))) {
		return nil, fmt.Errorf("refused by the test: %w", storage.ErrPermission)
	}
	return r.Driver.Create(ctx, name, flag)
}

// TestManyDestinationsFailure: a file that one destination refuses fails
// there, named in its record and event; the others get it, and the task
// fails for that file alone.
func TestManyDestinationsFailure(t *testing.T) {
	f := newFixture(t)
	f.files("set", 6, 10_000)
	srvs, eps := f.destinations(3)
	srvs[2].fs.Driver = refusing{Driver: srvs[2].fs.Driver, suffix: "/f003"}
	task := f.submitMany(eps, domain.Item{Src: "/set", Dst: "/copy", Recursive: true})
	serve(t, f.worker("w1", f.store, &spy{}))
	got := f.wait(task.ID, 30*time.Second, finished)
	if got.Status != domain.StatusFailed || got.Files != 6 || got.FilesTransferred != 5 || got.FilesFailed != 1 {
		t.Fatalf("task %s %+v\nevents: %v", got.Status, got.Counters, f.events(task.ID))
	}
	for i := range srvs {
		want := domain.DestCounters{FilesTransferred: 6, BytesTransferred: 60_000}
		if i == 2 {
			want = domain.DestCounters{FilesTransferred: 5, FilesFailed: 1, BytesTransferred: 50_000}
		}
		if got.Destinations[i].DestCounters != want {
			t.Errorf("destination %d: %+v, want %+v", i, got.Destinations[i].DestCounters, want)
		}
	}
	failed, _, err := f.store.DestFiles(context.Background(), task.ID, -1, domain.FileFailed, 0, 100)
	if err != nil || len(failed) != 1 || failed[0].Dest != 2 || failed[0].Src != "/set/f003" || !strings.Contains(failed[0].Error, "PERMISSION_DENIED") {
		t.Fatalf("failures at destinations: %+v, %v", failed, err)
	}
	e, ok := f.event(task.ID, domain.EventFileFailed)
	if !ok || !strings.Contains(e.Description, "/set/f003 at "+"alice#"+eps[2].Name) {
		t.Errorf("FILE_FAILED event %+v", e)
	}
	if got.FatalError == nil || !strings.Contains(got.FatalError.Description, "alice#"+eps[2].Name) {
		t.Errorf("fatal error %+v: want it to name the destination", *got.FatalError)
	}
}
