package worker_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"ferry/engine"
	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/internal/partname"
	"ferry/internal/synclevel"
	"ferry/service/domain"
	"ferry/service/gridops"
	"ferry/service/secret"
	"ferry/service/sqlstore"
	"ferry/service/worker"
	"ferry/storage"
)

// users is a server.Authenticator with fixed passwords.

// counting is a storage driver that counts the opens of each file (one
// per transfer: the tests do not verify) and makes each wait a little; it
// can read at a bounded rate, and it counts the bytes written.
type counting struct {
	storage.Driver
	delay   atomic.Int64 // nanoseconds
	rate    atomic.Int64 // bytes read per second; 0: no bound
	read    atomic.Int64
	written atomic.Int64
	quota   atomic.Int64                  // bytes that may be written; 0: no bound
	hold    atomic.Pointer[chan struct{}] // when set, reads wait until it is closed
	mu      sync.Mutex
	opens   map[string]int
	creates map[string]int
}

func (c *counting) Open(ctx context.Context, name string) (storage.File, error) {
	c.mu.Lock()
	c.opens[name]++
	c.mu.Unlock()
	time.Sleep(time.Duration(c.delay.Load()))
	f, err := c.Driver.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return &countedFile{File: f, c: c}, nil
}

func (c *counting) Create(ctx context.Context, name string, flag storage.OpenFlag) (storage.File, error) {
	c.mu.Lock()
	c.creates[name]++
	c.mu.Unlock()
	f, err := c.Driver.Create(ctx, name, flag)
	if err != nil {
		return nil, err
	}
	return &countedFile{File: f, c: c}, nil
}

// countedFile reads at its driver's rate and counts what is written.
type countedFile struct {
	storage.File
	c *counting
}

func (f *countedFile) ReadAt(p []byte, off int64) (int, error) {
	if h := f.c.hold.Load(); h != nil {
		<-*h
	}
	if r := f.c.rate.Load(); r > 0 {
		time.Sleep(time.Duration(int64(len(p)) * int64(time.Second) / r))
	}
	n, err := f.File.ReadAt(p, off)
	f.c.read.Add(int64(n))
	return n, err
}

func (f *countedFile) WriteAt(p []byte, off int64) (int, error) {
	if q := f.c.quota.Load(); q > 0 && f.c.written.Load()+int64(len(p)) > q {
		return 0, syscall.ENOSPC
	}
	n, err := f.File.WriteAt(p, off)
	f.c.written.Add(int64(n))
	return n, err
}

func (c *counting) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opens[name]
}

// created counts the opens of name for writing, under its temporary
// name or its own.
func (c *counting) created(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.creates[name] + c.creates[partname.For(name)] // written under its temporary name, then renamed
}

// endpoint is a ferry GridFTP server over a temp directory that accepts
// alice's password and anonymous logins.
type endpoint struct {
	root string
	url  string
	fs   *counting
}

func startEndpoint(t *testing.T) *endpoint {
	t.Helper()
	root, p := servertest.Root(t)
	c := &counting{Driver: p, opens: map[string]int{}, creates: map[string]int{}}
	addr := servertest.Serve(t, &server.Server{FS: c, Anonymous: true, Auth: servertest.Users{"alice": "pw"}, DataTimeout: 5 * time.Second,
		MarkerInterval: 50 * time.Millisecond})
	return &endpoint{root: root, url: "ftp://" + addr, fs: c}
}

// fixture is a store with user alice, two activated password endpoints
// src and dst, and a sealing box.
type fixture struct {
	t        *testing.T
	dsn      string // the store: a SQLite file or a PostgreSQL URL
	store    *sqlstore.DB
	box      *secret.Box
	user     domain.User
	src, dst *endpoint
	srcEP    domain.Endpoint
	dstEP    domain.Endpoint
	notes    *notes
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOn(t, filepath.Join(t.TempDir(), "ferry.db"))
}

// newFixtureOn is newFixture on the store named by dsn.
func newFixtureOn(t *testing.T, dsn string) *fixture {
	t.Helper()
	f := &fixture{t: t, dsn: dsn, notes: &notes{}}
	f.store = f.open()
	key := make([]byte, secret.KeySize)
	rand.Read(key)
	var err error
	if f.box, err = secret.New(key); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f.user = domain.User{Name: "alice", Email: "alice@example.org", PasswordHash: "x"}
	if err := f.store.CreateUser(ctx, &f.user); err != nil {
		t.Fatal(err)
	}
	f.src, f.dst = startEndpoint(t), startEndpoint(t)
	for _, e := range []struct {
		ep  *domain.Endpoint
		srv *endpoint
	}{{&f.srcEP, f.src}, {&f.dstEP, f.dst}} {
		*e.ep = domain.Endpoint{OwnerID: f.user.ID, Name: filepath.Base(e.srv.root), Servers: []string{e.srv.url}, Auth: domain.AuthPassword}
		if err := f.store.CreateEndpoint(ctx, e.ep); err != nil {
			t.Fatal(err)
		}
		f.activate(*e.ep, domain.Login{User: "alice", Password: "pw"}, time.Hour)
	}
	return f
}

// open opens another handle on the fixture's database, as another
// process would.
func (f *fixture) open() *sqlstore.DB {
	s, err := sqlstore.Open(context.Background(), f.dsn)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { s.Close() })
	return s
}

func (f *fixture) activate(ep domain.Endpoint, l domain.Login, life time.Duration) {
	f.t.Helper()
	sealed, err := f.box.Seal(l, secret.Context(f.user.ID, ep.ID))
	if err != nil {
		f.t.Fatal(err)
	}
	now := time.Now()
	if err := f.store.PutActivation(context.Background(), domain.Activation{UserID: f.user.ID, EndpointID: ep.ID,
		Sealed: sealed, Expires: now.Add(life), Created: now}); err != nil {
		f.t.Fatal(err)
	}
}

// files writes n files of size bytes under dir at the source.
func (f *fixture) files(dir string, n, size int) {
	for i := range n {
		write(f.t, filepath.Join(f.src.root, dir, fmt.Sprintf("f%03d", i)), random(size))
	}
}

func write(t *testing.T, p string, data []byte) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// submit creates a transfer task of items from src to dst.
func (f *fixture) submit(opts domain.Options, items ...domain.Item) domain.Task {
	f.t.Helper()
	t := domain.Task{UserID: f.user.ID, Type: domain.TypeTransfer, SrcEndpoint: f.srcEP.ID, DstEndpoint: f.dstEP.ID,
		Items: items, Options: opts}
	if err := f.store.CreateTask(context.Background(), &t); err != nil {
		f.t.Fatal(err)
	}
	return t
}

// spy is the workers' engine: engine.Copy with two session pairs and two
// transfers in flight each, so that a test can see a task mid-way, and
// the error of every run.
type spy struct {
	mu           sync.Mutex
	errs         []error
	active, most int           // runs at once, now and at most
	after        func()        // called after each run, before it returns
	stall        time.Duration // the engine's StallTimeout; 0: its default
	chunk        int64         // the engine's ChunkSize; 0: its default
}

func (s *spy) copy(ctx context.Context, src, dst engine.Endpoint, items []engine.Item, o engine.Options, rep engine.Reporter) (engine.Result, error) {
	s.mu.Lock()
	s.active++
	s.most = max(s.most, s.active)
	s.mu.Unlock()
	o.Concurrency, o.Pipelining = 2, 2
	if s.stall != 0 {
		o.StallTimeout = s.stall
	}
	if s.chunk != 0 {
		o.ChunkSize = s.chunk
	}
	res, err := engine.Copy(ctx, src, dst, items, o, rep)
	if s.after != nil {
		s.after()
	}
	s.mu.Lock()
	s.active--
	s.errs = append(s.errs, err)
	s.mu.Unlock()
	return res, err
}

func (s *spy) runs() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

// notes is a Notifier that keeps what it is told.
type notes struct {
	mu  sync.Mutex
	got []string // "user status"
}

func (n *notes) Notify(_ context.Context, u domain.User, t domain.Task) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, u.Name+" "+t.Status)
	return nil
}

// expect waits a moment for the notifications to be want ("[alice SUCCEEDED]").
func (n *notes) expect(t *testing.T, want string) {
	t.Helper()
	var got string
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		n.mu.Lock()
		got = fmt.Sprint(n.got)
		n.mu.Unlock()
		if got == want {
			return
		}
	}
	t.Errorf("notifications %s, want %s", got, want)
}

// worker makes a worker with fast timings over store.
func (f *fixture) worker(id string, store domain.Store, e *spy) *worker.Worker {
	return &worker.Worker{Store: store, Box: f.box, Ops: &gridops.Ops{Timeout: 5 * time.Second}, Notify: f.notes, ID: id,
		Lease: 2 * time.Second, HeartbeatEvery: 100 * time.Millisecond, Poll: 20 * time.Millisecond,
		FlushEvery: 50 * time.Millisecond, FlushFiles: 5, Backoff: 20 * time.Millisecond, Engine: e.copy}
}

// serve runs w until the test ends or the returned stop is called; stop
// waits for Serve to return.
func serve(t *testing.T, w *worker.Worker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Serve(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// wait polls the task until cond holds.
func (f *fixture) wait(id string, within time.Duration, cond func(domain.Task) bool) domain.Task {
	f.t.Helper()
	end := time.Now().Add(within)
	for {
		t, err := f.store.TaskByID(context.Background(), id)
		if err != nil {
			f.t.Fatal(err)
		}
		if cond(t) {
			return t
		}
		if time.Now().After(end) {
			f.t.Fatalf("task still %s (%s) after %v: %+v", t.Status, t.NiceStatus, within, t.Counters)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func orEmpty(notes string) string {
	if notes == "" {
		return "[]"
	}
	return notes
}

func finished(t domain.Task) bool { return domain.Done(t.Status) }

// done is the source paths of the files recorded done: SUCCEEDED or
// SKIPPED.
func (f *fixture) done(id string) []string {
	f.t.Helper()
	var d []string
	for marker := int64(0); ; {
		files, next, err := f.store.Files(context.Background(), id, "", marker, 1000)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, fl := range files {
			if fl.State == domain.FileSucceeded || fl.State == domain.FileSkipped {
				d = append(d, fl.Src)
			}
		}
		if marker = next; marker == 0 {
			return d
		}
	}
}

func (f *fixture) events(id string) []domain.Event {
	f.t.Helper()
	ev, _, err := f.store.Events(context.Background(), id, domain.Page{Limit: 1000})
	if err != nil {
		f.t.Fatal(err)
	}
	return ev
}

// event finds the first event with code.
func (f *fixture) event(id, code string) (domain.Event, bool) {
	for _, e := range f.events(id) {
		if e.Code == code {
			return e, true
		}
	}
	return domain.Event{}, false
}

// sameTree fails unless dst holds exactly src's files.
func sameTree(t *testing.T, src, dst string) {
	t.Helper()
	n := 0
	filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join(dst, rel))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs at the destination (%v)", rel, err)
		}
		n++
		return nil
	})
	if n == 0 {
		t.Error("empty source tree")
	}
}

func TestTransferSucceeds(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.src.root, "data", "a"), random(1000))
	write(t, filepath.Join(f.src.root, "data", "sub", "b"), random(5000))
	write(t, filepath.Join(f.src.root, "data", "sub", "c"), random(7))
	write(t, filepath.Join(f.src.root, "data", "scratch.tmp"), random(10))
	write(t, filepath.Join(f.src.root, "single.txt"), []byte("hello"))
	write(t, filepath.Join(f.dst.root, "out", "data", "extra"), []byte("not in the source"))
	task := f.submit(domain.Options{SyncLevel: synclevel.None, VerifyChecksum: true, DeleteDestinationExtra: true,
		FilterRules:       []domain.FilterRule{{Method: "exclude", Name: "*.tmp", Type: "file"}},
		NotifyOnSucceeded: true, NotifyOnFailed: true},
		domain.Item{Src: "/data", Dst: "/out/data", Recursive: true}, domain.Item{Src: "/single.txt", Dst: "/out/single.txt"})
	if err := f.store.CancelFile(context.Background(), f.user.ID, task.ID, "/data/sub/c"); err != nil {
		t.Fatal(err)
	}
	serve(t, f.worker("w1", f.store, &spy{}))
	got := f.wait(task.ID, 10*time.Second, finished)

	if got.Status != domain.StatusSucceeded || got.FatalError != nil || got.NiceStatus != "" || got.CompletionTime.IsZero() {
		t.Fatalf("task %+v", got)
	}
	want := domain.Counters{Files: 4, Directories: 2, FilesTransferred: 3, BytesTransferred: 6005, BytesTotal: 6005, BytesChecksummed: 6005}
	if got.Counters != want {
		t.Errorf("counters %+v, want %+v", got.Counters, want)
	}
	files, _, err := f.store.Files(context.Background(), task.ID, "", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, r := range files {
		states[r.Src] = r.State
		if r.State == domain.FileSucceeded && (r.Algorithm == "" || r.Checksum == "" || r.Dst == "") {
			t.Errorf("record %+v lacks its checksum or destination", r)
		}
	}
	wantStates := map[string]string{"/data/a": domain.FileSucceeded, "/data/sub/b": domain.FileSucceeded,
		"/single.txt": domain.FileSucceeded, "/data/sub/c": domain.FileCanceled}
	if fmt.Sprint(states) != fmt.Sprint(wantStates) {
		t.Errorf("file records %v, want %v", states, wantStates)
	}
	for _, p := range []string{"out/data/extra", "out/data/scratch.tmp", "out/data/sub/c"} {
		if _, err := os.Stat(filepath.Join(f.dst.root, p)); err == nil {
			t.Errorf("%s exists at the destination", p)
		}
	}
	os.Remove(filepath.Join(f.src.root, "data", "scratch.tmp"))
	os.Remove(filepath.Join(f.src.root, "data", "sub", "c"))
	sameTree(t, filepath.Join(f.src.root, "data"), filepath.Join(f.dst.root, "out", "data"))
	var codes []string
	for _, e := range f.events(task.ID) {
		codes = append(codes, e.Code)
	}
	// The walk reports the canceled file when it meets it, the settings
	// once they are settled (STARTED): either may come first.
	if s := strings.Join(codes, " "); s != "QUEUED DELETED STARTED FILE_CANCELED SUCCEEDED" && s != "QUEUED DELETED FILE_CANCELED STARTED SUCCEEDED" {
		t.Errorf("events %s", s)
	}
	if e, _ := f.event(task.ID, domain.EventDeleted); e.Details != `{"paths":["/out/data/extra"]}` {
		t.Errorf("DELETED %q, details %q: want the path deleted", e.Description, e.Details)
	}
	dels, _, err := f.store.Deletions(context.Background(), task.ID, 0, 0)
	if err != nil || len(dels) != 1 || dels[0].Path != "/out/data/extra" || dels[0].Dir || dels[0].Size != int64(len("not in the source")) {
		t.Errorf("deletions %+v %v, want /out/data/extra", dels, err)
	}
	if e, _ := f.event(task.ID, domain.EventStarted); !strings.Contains(e.Details, `"concurrency":2`) ||
		!strings.Contains(e.Description, "averaging") || !strings.Contains(e.Details, `"why":"`) {
		t.Errorf("STARTED %q, details %q: want the settings and why the engine chose them", e.Description, e.Details)
	}
	f.notes.expect(t, "[alice SUCCEEDED]")
}

func TestEndings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(f *fixture) domain.Task
		status string
		nice   string
		fatal  string
		event  string // an event the task must have
		notes  string
		// skipped are the source paths recorded skipped for source
		// errors.
		skipped []string
		// once is a path the fatal error's description names once.
		once string
		said string // the start of the fatal error's description
		// counted, if not empty, is the description of the task's
		// SUCCEEDED event.
		counted string
	}{
		{
			name: "missing source",
			setup: func(f *fixture) domain.Task {
				return f.submit(domain.Options{NotifyOnFailed: true}, domain.Item{Src: "/nope", Dst: "/x"})
			},
			status: domain.StatusFailed, fatal: domain.NiceFileNotFound, event: domain.EventFailed, notes: "[alice FAILED]",
		},
		{
			name: "missing source skipped",
			setup: func(f *fixture) domain.Task {
				write(f.t, filepath.Join(f.src.root, "a"), []byte("a"))
				return f.submit(domain.Options{SkipSourceErrors: true}, domain.Item{Src: "/a", Dst: "/a"}, domain.Item{Src: "/nope", Dst: "/x"})
			},
			status: domain.StatusSucceeded, event: domain.EventSkippedError, skipped: []string{"/nope"},
		},
		{
			name: "source escaping its root",
			setup: func(f *fixture) domain.Task {
				os.Symlink("/etc", filepath.Join(f.src.root, "out"))
				return f.submit(domain.Options{}, domain.Item{Src: "/out/passwd", Dst: "/x"})
			},
			status: domain.StatusFailed, fatal: domain.NicePermissionDenied, event: domain.EventFailed,
		},
		{
			name: "a file failing alone",
			setup: func(f *fixture) domain.Task {
				f.files("d", 2, 10)
				if err := syscall.Mkfifo(filepath.Join(f.src.root, "d", "z"), 0o644); err != nil {
					f.t.Fatal(err) // listed as a file, refused when opened
				}
				return f.submit(domain.Options{}, domain.Item{Src: "/d", Dst: "/d", Recursive: true})
			},
			status: domain.StatusFailed, fatal: domain.NicePermissionDenied, event: domain.EventFileFailed,
		},
		{
			name: "a file refused by the source skipped",
			setup: func(f *fixture) domain.Task {
				f.files("d", 2, 10)
				if err := syscall.Mkfifo(filepath.Join(f.src.root, "d", "z"), 0o644); err != nil {
					f.t.Fatal(err)
				}
				return f.submit(domain.Options{SkipSourceErrors: true}, domain.Item{Src: "/d", Dst: "/d", Recursive: true})
			},
			status: domain.StatusSucceeded, event: domain.EventSkippedError, skipped: []string{"/d/z"},
		},
		{
			name: "destination full, failing on quota errors",
			setup: func(f *fixture) domain.Task {
				f.files("d", 3, 1<<20)
				f.dst.fs.quota.Store(1 << 20)
				return f.submit(domain.Options{FailOnQuotaErrors: true, NotifyOnFailed: true}, domain.Item{Src: "/d", Dst: "/d", Recursive: true})
			},
			status: domain.StatusFailed, fatal: domain.NiceNoSpace, event: domain.EventFailed, notes: "[alice FAILED]",
		},
		{
			name: "not activated",
			setup: func(f *fixture) domain.Task {
				f.store.DeleteActivation(context.Background(), f.user.ID, f.dstEP.ID)
				return f.submit(domain.Options{NotifyOnInactive: true}, domain.Item{Src: "/a", Dst: "/a"})
			},
			status: domain.StatusInactive, nice: domain.NiceNotActivated, event: domain.EventInactive, notes: "[alice INACTIVE]",
		},
		{
			name: "credential expired",
			setup: func(f *fixture) domain.Task {
				f.activate(f.srcEP, domain.Login{User: "alice", Password: "pw"}, -time.Minute)
				return f.submit(domain.Options{}, domain.Item{Src: "/a", Dst: "/a"})
			},
			status: domain.StatusInactive, nice: domain.NiceCredentialExpired, event: domain.EventInactive,
		},
		{
			name: "credential refused",
			setup: func(f *fixture) domain.Task {
				f.activate(f.srcEP, domain.Login{User: "alice", Password: "changed"}, time.Hour)
				write(f.t, filepath.Join(f.src.root, "a"), []byte("a"))
				return f.submit(domain.Options{}, domain.Item{Src: "/a", Dst: "/a"})
			},
			status: domain.StatusInactive, nice: domain.NiceCredentialExpired, event: domain.EventInactive,
		},
		{
			name: "anonymous endpoints need no activation",
			setup: func(f *fixture) domain.Task {
				for _, ep := range []*domain.Endpoint{&f.srcEP, &f.dstEP} {
					ep.Auth = domain.AuthAnonymous
					f.store.UpdateEndpoint(context.Background(), *ep)
					f.store.DeleteActivation(context.Background(), f.user.ID, ep.ID)
				}
				write(f.t, filepath.Join(f.src.root, "a"), []byte("a"))
				return f.submit(domain.Options{}, domain.Item{Src: "/a", Dst: "/a"})
			},
			status: domain.StatusSucceeded, event: domain.EventSucceeded,
		},
		{
			name: "endpoint unreachable",
			setup: func(f *fixture) domain.Task {
				ln, _ := net.Listen("tcp", "127.0.0.1:0")
				ln.Close()
				f.dstEP.Servers = []string{"ftp://" + ln.Addr().String()}
				f.store.UpdateEndpoint(context.Background(), f.dstEP)
				write(f.t, filepath.Join(f.src.root, "a"), []byte("a"))
				return f.submit(domain.Options{}, domain.Item{Src: "/a", Dst: "/a"})
			},
			status: domain.StatusFailed, fatal: domain.NiceConnectFailed, event: domain.EventConnectFailed,
		},
		{
			name: "second server answers",
			setup: func(f *fixture) domain.Task {
				ln, _ := net.Listen("tcp", "127.0.0.1:0")
				ln.Close()
				f.dstEP.Servers = []string{"ftp://" + ln.Addr().String(), f.dst.url}
				f.store.UpdateEndpoint(context.Background(), f.dstEP)
				write(f.t, filepath.Join(f.src.root, "a"), []byte("a"))
				return f.submit(domain.Options{}, domain.Item{Src: "/a", Dst: "/a"})
			},
			status: domain.StatusSucceeded, event: domain.EventConnectFailed,
		},
		{
			name: "deadline passed",
			setup: func(f *fixture) domain.Task {
				write(f.t, filepath.Join(f.src.root, "a"), []byte("a"))
				t := domain.Task{UserID: f.user.ID, Type: domain.TypeTransfer, SrcEndpoint: f.srcEP.ID, DstEndpoint: f.dstEP.ID,
					Items: []domain.Item{{Src: "/a", Dst: "/a"}}, Deadline: time.Now().Add(-time.Second)}
				f.store.CreateTask(context.Background(), &t)
				return t
			},
			status: domain.StatusFailed, fatal: "DEADLINE", event: domain.EventDeadline,
		},
		{
			name: "delete",
			setup: func(f *fixture) domain.Task {
				f.files("d/sub", 3, 10)
				write(f.t, filepath.Join(f.src.root, "f"), nil)
				t := domain.Task{UserID: f.user.ID, Type: domain.TypeDelete, SrcEndpoint: f.srcEP.ID,
					Items:   []domain.Item{{Src: "/d", Recursive: true}, {Src: "/f"}, {Src: "/missing"}},
					Options: domain.Options{IgnoreMissing: true, NotifyOnSucceeded: true}}
				f.store.CreateTask(context.Background(), &t)
				return t
			},
			status: domain.StatusSucceeded, event: domain.EventSucceeded, notes: "[alice SUCCEEDED]",
			counted: "3 paths: 4 files and 2 directories deleted, 1 missing, 0 failed",
		},
		{
			name: "delete missing",
			setup: func(f *fixture) domain.Task {
				t := domain.Task{UserID: f.user.ID, Type: domain.TypeDelete, SrcEndpoint: f.srcEP.ID,
					Items: []domain.Item{{Src: "/missing"}}}
				f.store.CreateTask(context.Background(), &t)
				return t
			},
			status: domain.StatusFailed, fatal: domain.NiceFileNotFound, event: domain.EventFileFailed, once: "/missing", said: "1 of 1 path failed",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			task := tc.setup(f)
			serve(t, f.worker("w1", f.store, &spy{}))
			got := f.wait(task.ID, 10*time.Second, func(t domain.Task) bool { return t.Status != domain.StatusActive })
			fatal := ""
			if got.FatalError != nil {
				fatal = got.FatalError.Code
			}
			if got.Status != tc.status || got.NiceStatus != tc.nice || fatal != tc.fatal {
				t.Fatalf("task %s %q fatal %+v, want %s %q %s", got.Status, got.NiceStatus, got.FatalError, tc.status, tc.nice, tc.fatal)
			}
			if _, ok := f.event(task.ID, tc.event); !ok {
				t.Errorf("no %s event in %+v", tc.event, f.events(task.ID))
			}
			if e, _ := f.event(task.ID, domain.EventSucceeded); tc.counted != "" && e.Description != tc.counted {
				t.Errorf("SUCCEEDED %q, want %q", e.Description, tc.counted)
			}
			if tc.once != "" && strings.Count(got.FatalError.Description, tc.once) != 1 {
				t.Errorf("fatal error %q: want %s named once", got.FatalError.Description, tc.once)
			}
			if tc.said != "" && !strings.HasPrefix(got.FatalError.Description, tc.said) {
				t.Errorf("fatal error %q: want it to start %q", got.FatalError.Description, tc.said)
			}
			skipped, _, err := f.store.Files(context.Background(), task.ID, domain.FileSkippedError, 0, 100)
			var paths []string
			for _, s := range skipped {
				paths = append(paths, s.Src)
			}
			if err != nil || !slices.Equal(paths, tc.skipped) {
				t.Errorf("skipped for source errors: %v, want %v (%v)", paths, tc.skipped, err)
			}
			f.notes.expect(t, orEmpty(tc.notes))
		})
	}
}

// TestResume stops a worker mid-transfer, by killing it (its store goes
// away and its lease lapses) or by stopping it (it releases the task), and
// lets a second worker finish: nothing recorded done is sent again.
func TestResume(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kill  bool
		level synclevel.Level // exists: files in flight when the worker stopped are partial at the destination
	}{
		{"killed", true, synclevel.None},
		{"stopped", false, synclevel.Exists},
	} {
		kill := tc.kill
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.files("tree", 150, 2000)
			f.src.fs.delay.Store(int64(5 * time.Millisecond))
			task := f.submit(domain.Options{SyncLevel: tc.level}, domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})

			first := f.open()
			w1 := f.worker("w1", first, &spy{})
			w1.Lease = time.Second
			if !kill {
				w1.Lease = time.Minute // the second worker cannot wait for it
			}
			stop1 := serve(t, w1)
			f.wait(task.ID, 10*time.Second, func(domain.Task) bool { return len(f.done(task.ID)) >= 20 })
			if kill {
				first.Close()
			}
			stop1()
			done := f.done(task.ID)
			if len(done) == 150 {
				t.Fatal("the transfer ended before the worker was stopped")
			}
			// Copies complete at the destination but not yet recorded.
			var whole []string
			for i := range 150 {
				p := fmt.Sprintf("/tree/f%03d", i)
				a, _ := os.ReadFile(filepath.Join(f.src.root, p))
				b, err := os.ReadFile(filepath.Join(f.dst.root, p))
				if err == nil && bytes.Equal(a, b) && !slices.Contains(done, p) {
					whole = append(whole, p)
				}
			}
			created := map[string]int{}
			for _, p := range whole {
				created[p] = f.dst.fs.created(p)
			}
			t.Logf("%d files recorded done, %d more whole at the destination", len(done), len(whole))
			if !kill {
				got := f.wait(task.ID, time.Second, func(domain.Task) bool { return true })
				if got.Status != domain.StatusActive || got.NiceStatus != domain.NiceQueued || got.Worker != "" {
					t.Fatalf("stopped worker left the task %s %s %q", got.Status, got.NiceStatus, got.Worker)
				}
			}

			f.src.fs.delay.Store(0)
			serve(t, f.worker("w2", f.store, &spy{}))
			got := f.wait(task.ID, 10*time.Second, finished)
			if got.Status != domain.StatusSucceeded {
				t.Fatalf("task %+v", got)
			}
			for _, p := range done {
				if n := f.src.fs.count(p); n != 1 {
					t.Errorf("%s was recorded done and then sent %d times", p, n)
				}
			}
			for _, p := range whole {
				if n := f.dst.fs.created(p); n != created[p] {
					t.Errorf("%s was whole at the destination, and written again", p)
				}
			}
			sameTree(t, filepath.Join(f.src.root, "tree"), filepath.Join(f.dst.root, "tree"))
			if got.Files != 150 || got.FilesTransferred+got.FilesSkipped != 150 || got.FilesFailed != 0 || got.BytesTotal != got.BytesTransferred ||
				got.Directories != countDirs(t, filepath.Join(f.src.root, "tree")) {
				t.Errorf("counters %+v", got.Counters)
			}
			taken := map[bool]string{true: domain.EventLeaseTaken, false: domain.EventQueued}[kill]
			if _, ok := f.event(task.ID, taken); !ok {
				t.Errorf("no %s event", taken)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	f := newFixture(t)
	f.files("tree", 100, 1000)
	f.src.fs.delay.Store(int64(20 * time.Millisecond))
	task := f.submit(domain.Options{SyncLevel: synclevel.None, NotifyOnFailed: true}, domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
	e := &spy{}
	w := f.worker("w1", f.store, e)
	w.ProgressEvery = 50 * time.Millisecond
	serve(t, w)
	f.wait(task.ID, 10*time.Second, func(domain.Task) bool { return len(f.done(task.ID)) >= 5 })
	if _, err := f.store.RequestCancel(context.Background(), f.user.ID, task.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	got := f.wait(task.ID, 3*time.Second, finished)
	if got.Status != domain.StatusFailed || got.FatalError == nil || got.FatalError.Code != "CANCELED" {
		t.Fatalf("task %+v", got)
	}
	if got.FilesTransferred == 100 {
		t.Error("every file was sent")
	}
	if _, ok := f.event(task.ID, domain.EventCanceled); !ok {
		t.Error("no CANCELED event")
	}
	if e, ok := f.event(task.ID, domain.EventProgress); !ok || !strings.Contains(e.Details, `"bytes_transferred":`) {
		t.Errorf("PROGRESS event %+v", e)
	}
	if runs := e.runs(); len(runs) != 1 || runs[0] == nil {
		t.Errorf("engine runs %v: want one, stopped", runs)
	}
	f.notes.expect(t, "[alice FAILED]")
}

// TestCredentialExpiresMidTask: a task whose credential expires while it
// runs pauses (INACTIVE) and, activated again, goes on without sending
// again what it had done. The credential is renewed until a file is done,
// then left to expire with the source slowed, so that the expiry comes
// mid-task however fast or busy the machine (a 700 ms credential expired
// once before the first file under load).
func TestCredentialExpiresMidTask(t *testing.T) {
	f := newFixture(t)
	f.files("tree", 100, 1000)
	f.src.fs.delay.Store(int64(20 * time.Millisecond))
	const life = 2 * time.Second
	f.activate(f.srcEP, domain.Login{User: "alice", Password: "pw"}, life)
	task := f.submit(domain.Options{SyncLevel: synclevel.None, NotifyOnInactive: true, NotifyOnSucceeded: true},
		domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
	w := f.worker("w1", f.store, &spy{})
	w.HeartbeatEvery = time.Minute // the expiry timer, not a heartbeat, stops the engine
	serve(t, w)
	renewed := time.Now()
	f.wait(task.ID, 30*time.Second, func(domain.Task) bool {
		if len(f.done(task.ID)) > 0 {
			return true
		}
		if time.Since(renewed) > life/4 {
			f.activate(f.srcEP, domain.Login{User: "alice", Password: "pw"}, life)
			renewed = time.Now()
		}
		return false
	})
	f.src.fs.delay.Store(int64(time.Second)) // the other 99 take longer than the life left
	got := f.wait(task.ID, 30*time.Second, func(t domain.Task) bool { return t.Status != domain.StatusActive })
	if got.Status != domain.StatusInactive || got.NiceStatus != domain.NiceCredentialExpired {
		t.Fatalf("task %s %s", got.Status, got.NiceStatus)
	}
	e, _ := f.event(task.ID, domain.EventInactive)
	if !strings.Contains(e.Description, f.srcEP.DisplayName()) || !strings.Contains(e.Description, "expired at") ||
		!strings.Contains(e.Description, "activate it again") {
		t.Errorf("INACTIVE event says %q", e.Description)
	}
	done := f.done(task.ID)
	if len(done) == 0 || len(done) == 100 {
		t.Fatalf("%d files done when the credential expired", len(done))
	}

	f.src.fs.delay.Store(0)
	f.activate(f.srcEP, domain.Login{User: "alice", Password: "pw"}, time.Hour)
	if n, err := f.store.Reactivate(context.Background(), f.user.ID, f.srcEP.ID, time.Now()); err != nil || n != 1 {
		t.Fatalf("Reactivate = %d, %v", n, err)
	}
	w.Wake()
	got = f.wait(task.ID, 10*time.Second, finished)
	if got.Status != domain.StatusSucceeded || got.Files != 100 || got.FilesTransferred != 100 {
		t.Fatalf("task %s %+v", got.Status, got.Counters)
	}
	for _, p := range done {
		if n := f.src.fs.count(p); n != 1 {
			t.Errorf("%s was done before the expiry and then sent %d times", p, n)
		}
	}
	sameTree(t, filepath.Join(f.src.root, "tree"), filepath.Join(f.dst.root, "tree"))
	f.notes.expect(t, "[alice INACTIVE alice SUCCEEDED]")
}

// TestLapsingLeaseStopsTheEngine: a worker that cannot renew its lease
// stops its engine before the lease lapses, so that the worker that takes
// the task next never runs beside it (the two would write the same
// temporary files: one in twenty runs failed a file that way).
func TestLapsingLeaseStopsTheEngine(t *testing.T) {
	f := newFixture(t)
	f.files("tree", 150, 1000)
	f.src.fs.delay.Store(int64(60 * time.Millisecond))
	task := f.submit(domain.Options{SyncLevel: synclevel.None}, domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
	var ended, lease time.Time
	e1 := &spy{}
	e1.after = func() {
		ended = time.Now()
		if tk, err := f.open().TaskByID(context.Background(), task.ID); err == nil {
			lease = tk.LeaseExpires
		}
	}
	w1 := f.worker("w1", f.store, e1)
	w1.Lease, w1.HeartbeatEvery = 3*time.Second, time.Hour // its lease lapses
	w1.Tasks = 1
	stop1 := serve(t, w1)
	f.wait(task.ID, 10*time.Second, func(domain.Task) bool { return len(e1.runs()) > 0 })
	stop1()
	if runs := e1.runs(); len(runs) != 1 || runs[0] == nil {
		t.Fatalf("first worker's engine runs %v: want one, stopped", runs)
	}
	if !ended.Before(lease) {
		t.Errorf("first worker's engine ended at %v, its lease lapsed at %v", ended.Format(time.StampMilli), lease.Format(time.StampMilli))
	}
	serve(t, f.worker("w2", f.store, &spy{}))
	got := f.wait(task.ID, 20*time.Second, finished)
	if got.Status != domain.StatusSucceeded {
		t.Fatalf("task %s %+v", got.Status, got.FatalError)
	}
	sameTree(t, filepath.Join(f.src.root, "tree"), filepath.Join(f.dst.root, "tree"))
}

// TestOwnLeaseLapsed: a worker whose heartbeats stop ends each run before
// its lease lapses and claims the task again; it never runs the task twice
// at once, and the task completes.
func TestOwnLeaseLapsed(t *testing.T) {
	f := newFixture(t)
	f.files("tree", 60, 1000)
	f.src.fs.delay.Store(int64(20 * time.Millisecond))
	task := f.submit(domain.Options{SyncLevel: synclevel.None}, domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
	e := &spy{}
	w := f.worker("w1", f.store, e)
	w.Lease, w.HeartbeatEvery = 400*time.Millisecond, time.Hour
	serve(t, w)
	got := f.wait(task.ID, 20*time.Second, finished)
	if got.Status != domain.StatusSucceeded || got.FilesTransferred != 60 {
		t.Fatalf("task %s %+v", got.Status, got.Counters)
	}
	runs := e.runs()
	if len(runs) < 2 || runs[len(runs)-1] != nil {
		t.Errorf("engine runs %v: want some stopped, the last successful", runs)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.most != 1 {
		t.Errorf("%d engine runs at once, want 1", e.most)
	}
	sameTree(t, filepath.Join(f.src.root, "tree"), filepath.Join(f.dst.root, "tree"))
}

func TestDeadline(t *testing.T) {
	for _, tc := range []struct {
		name   string
		extend bool // the user moves the deadline while the task runs
		status string
	}{
		{"passes mid-transfer", false, domain.StatusFailed},
		{"extended mid-transfer", true, domain.StatusSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.files("tree", 100, 1000)
			f.src.fs.delay.Store(int64(20 * time.Millisecond))
			task := domain.Task{UserID: f.user.ID, Type: domain.TypeTransfer, SrcEndpoint: f.srcEP.ID, DstEndpoint: f.dstEP.ID,
				Items:    []domain.Item{{Src: "/tree", Dst: "/tree", Recursive: true}},
				Options:  domain.Options{SyncLevel: synclevel.None},
				Deadline: time.Now().Add(800 * time.Millisecond)}
			if err := f.store.CreateTask(context.Background(), &task); err != nil {
				t.Fatal(err)
			}
			e := &spy{}
			serve(t, f.worker("w1", f.store, e))
			f.wait(task.ID, 5*time.Second, func(domain.Task) bool { return len(f.done(task.ID)) >= 5 })
			if tc.extend {
				if err := f.store.UpdateTask(context.Background(), f.user.ID, task.ID, "later", time.Now().Add(time.Minute)); err != nil {
					t.Fatal(err)
				}
			}
			got := f.wait(task.ID, 10*time.Second, finished)
			if got.Status != tc.status {
				t.Fatalf("task %s %+v", got.Status, got.FatalError)
			}
			if !tc.extend {
				if got.FatalError == nil || got.FatalError.Code != "DEADLINE" {
					t.Errorf("fatal error %+v", got.FatalError)
				}
				if _, ok := f.event(task.ID, domain.EventDeadline); !ok {
					t.Error("no DEADLINE event")
				}
				return
			}
			if runs := e.runs(); len(runs) != 2 || runs[0] == nil || runs[1] != nil {
				t.Errorf("engine runs %v: want one stopped for the new deadline, one that finished", runs)
			}
			sameTree(t, filepath.Join(f.src.root, "tree"), filepath.Join(f.dst.root, "tree"))
		})
	}
}

func TestLimits(t *testing.T) {
	for _, tc := range []struct {
		name           string
		tasks, perUser int
		most           int // engine runs at once
	}{
		{"one task per user", 4, 1, 1},
		{"two tasks per worker", 2, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.files("tree", 10, 100)
			f.src.fs.delay.Store(int64(20 * time.Millisecond))
			var ids []string
			for i := range 3 {
				ids = append(ids, f.submit(domain.Options{SyncLevel: synclevel.None},
					domain.Item{Src: "/tree", Dst: fmt.Sprintf("/copy%d", i), Recursive: true}).ID)
			}
			e := &spy{}
			w := f.worker("w1", f.store, e)
			w.Tasks, w.PerUser = tc.tasks, tc.perUser
			serve(t, w)
			for _, id := range ids {
				if got := f.wait(id, 10*time.Second, finished); got.Status != domain.StatusSucceeded {
					t.Fatalf("task %s %+v", got.Status, got.FatalError)
				}
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.most != tc.most {
				t.Errorf("%d tasks ran at once, want %d", e.most, tc.most)
			}
		})
	}
}

// countDirs counts the directories of the tree at root, root included.
func countDirs(t *testing.T, root string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSkippedErrorsResume stops a worker after it skipped a missing source
// item (skip_source_errors) and lets a second one finish: the item is
// recorded skipped once, counted once, and the SUCCEEDED event, written by
// the second worker, still says that it was skipped.
func TestSkippedErrorsResume(t *testing.T) {
	f := newFixture(t)
	f.files("tree", 60, 2000)
	f.src.fs.delay.Store(int64(5 * time.Millisecond))
	task := f.submit(domain.Options{SkipSourceErrors: true}, domain.Item{Src: "/nope", Dst: "/nope"},
		domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
	w1 := f.worker("w1", f.open(), &spy{})
	w1.Lease = time.Minute
	stop1 := serve(t, w1)
	f.wait(task.ID, 10*time.Second, func(domain.Task) bool { return len(f.done(task.ID)) >= 10 })
	stop1()
	if got := f.wait(task.ID, time.Second, func(domain.Task) bool { return true }); domain.Done(got.Status) {
		t.Fatal("the transfer ended before the worker was stopped")
	}
	f.src.fs.delay.Store(0)
	serve(t, f.worker("w2", f.store, &spy{}))
	got := f.wait(task.ID, 10*time.Second, finished)
	// A file whole at the destination when the first worker stopped
	// counts skipped too.
	if got.Status != domain.StatusSucceeded || got.Files != 61 || got.FilesTransferred+got.FilesSkipped != 61 || got.FilesSkipped < 1 {
		t.Fatalf("task %s, counters %+v; want SUCCEEDED, 61 files transferred or skipped", got.Status, got.Counters)
	}
	if skipped, _, err := f.store.Files(context.Background(), task.ID, domain.FileSkippedError, 0, 100); err != nil || len(skipped) != 1 {
		t.Errorf("skipped for source errors: %+v, %v; want /nope once", skipped, err)
	}
	if e, _ := f.event(task.ID, domain.EventSucceeded); !strings.Contains(e.Description, "1 for source errors") {
		t.Errorf("SUCCEEDED event %q does not say a file was skipped for a source error", e.Description)
	}
}
