package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/internal/pgtest"
	"ferry/internal/synclevel"
	"ferry/service/domain"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// stores are the two kinds of database a service runs on.
var stores = []struct {
	name string
	dsn  func(t *testing.T) string
}{
	{"SQLite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "ferry.db") }},
	{"PostgreSQL", func(t *testing.T) string { return pgtest.DSN(t) }},
}

// TestCancelStopsTheData cancels a running task, and one file of another,
// through a second handle on the database, as another service process
// would. Heartbeats are a minute apart, so only the database's signal
// can reach the worker: the data must stop within about a second (the
// source reads at 16 MiB/s), the task end CANCELED, and nothing count as
// a fault.
func TestCancelStopsTheData(t *testing.T) {
	const rate = 16 << 20
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			for _, one := range []bool{false, true} {
				name := map[bool]string{false: "task", true: "one file"}[one]
				t.Run(name, func(t *testing.T) {
					f := newFixtureOn(t, st.dsn(t))
					write(t, filepath.Join(f.src.root, "tree", "big"), random(64<<20))
					write(t, filepath.Join(f.src.root, "tree", "small"), random(1<<20))
					f.src.fs.rate.Store(rate)
					task := f.submit(domain.Options{SyncLevel: synclevel.None}, domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
					w := f.worker("w1", f.store, &spy{})
					w.Lease, w.HeartbeatEvery = 3*time.Minute, time.Minute
					serve(t, w)
					f.wait(task.ID, 10*time.Second, func(domain.Task) bool { return f.dst.fs.written.Load() >= 4<<20 })

					other := f.open()
					asked := time.Now()
					var err error
					if one {
						err = other.CancelFile(context.Background(), f.user.ID, task.ID, "/tree/big")
					} else {
						_, err = other.RequestCancel(context.Background(), f.user.ID, task.ID, time.Now())
					}
					if err != nil {
						t.Fatal(err)
					}
					before := f.dst.fs.written.Load()
					// Wait until the writes stop, then measure what came after the cancel.
					if !quiet(&f.dst.fs.written) {
						t.Fatalf("data still moving %v after the cancel", time.Since(asked))
					}
					after := f.dst.fs.written.Load() - before
					t.Logf("%.1f MiB written after the cancel", float64(after)/(1<<20))
					if after > rate*3/2 {
						t.Errorf("%d MiB moved after the cancel; at %d MiB/s, want about a second's worth", after>>20, rate>>20)
					}
					got := f.wait(task.ID, 5*time.Second, finished)
					if one {
						if got.Status != domain.StatusSucceeded || got.FilesTransferred != 1 {
							t.Errorf("task %s, %+v; want SUCCEEDED with the small file", got.Status, got.Counters)
						}
						files, _, _ := f.store.Files(context.Background(), task.ID, domain.FileCanceled, 0, 10)
						if len(files) != 1 || files[0].Src != "/tree/big" {
							t.Errorf("canceled file records %+v", files)
						}
					} else if got.Status != domain.StatusFailed || got.FatalError == nil || got.FatalError.Code != "CANCELED" {
						t.Errorf("task %s %+v, want FAILED CANCELED", got.Status, got.FatalError)
					}
					if got.Faults != 0 {
						t.Errorf("%d faults counted; a cancel is not one", got.Faults)
					}
					for _, e := range f.events(task.ID) {
						if e.Code == domain.EventFault {
							t.Errorf("event %s: %s", e.Code, e.Description)
						}
					}
				})
			}
		})
	}
}

// TestCancelAsTheLastFileEnds: a cancel that arrives while the engine
// finishes the last file ends the task CANCELED, as the user was told.
func TestCancelAsTheLastFileEnds(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.src.root, "one"), random(1000))
	task := f.submit(domain.Options{SyncLevel: synclevel.None}, domain.Item{Src: "/one", Dst: "/one"})
	late := &spy{after: func() {
		if _, err := f.open().RequestCancel(context.Background(), f.user.ID, task.ID, time.Now()); err != nil {
			t.Error(err)
		}
	}}
	w := f.worker("w1", f.store, late)
	w.HeartbeatEvery = time.Minute
	serve(t, w)
	got := f.wait(task.ID, 5*time.Second, finished)
	if got.Status != domain.StatusFailed || got.FatalError == nil || got.FatalError.Code != "CANCELED" {
		t.Fatalf("task %s %+v, want FAILED CANCELED", got.Status, got.FatalError)
	}
}

// TestResumeFromMarkers: a worker dies while a large file moves; the next
// run sends only what the restart markers the first recorded do not
// cover.
func TestResumeFromMarkers(t *testing.T) {
	f := newFixture(t)
	data := random(32 << 20)
	write(t, filepath.Join(f.src.root, "big"), data)
	f.src.fs.rate.Store(8 << 20)
	task := f.submit(domain.Options{SyncLevel: synclevel.None}, domain.Item{Src: "/big", Dst: "/big"})
	first := f.open()
	w1 := f.worker("w1", first, &spy{})
	w1.Lease = time.Second
	stop1 := serve(t, w1)
	var recorded int64
	f.wait(task.ID, 20*time.Second, func(domain.Task) bool {
		ps, _, err := f.store.Partials(context.Background(), task.ID, 0, 0)
		if err != nil || len(ps) != 1 {
			return false
		}
		var size, ns int64
		var ranges string
		fmt.Sscan(ps[0].State, &size, &ns, &ranges)
		var a, b int64
		fmt.Sscanf(ranges, "%d-%d", &a, &b)
		recorded = b - a
		return recorded >= 8<<20
	})
	first.Close() // killed: nothing more reaches the store
	stop1()
	quiet(&f.src.fs.read)
	f.src.fs.rate.Store(0)
	before := f.src.fs.read.Load()
	serve(t, f.worker("w2", f.store, &spy{}))
	got := f.wait(task.ID, 20*time.Second, finished)
	if got.Status != domain.StatusSucceeded {
		t.Fatalf("task %s %+v", got.Status, got.FatalError)
	}
	if b, _ := os.ReadFile(filepath.Join(f.dst.root, "big")); !bytes.Equal(b, data) {
		t.Fatal("the resumed copy differs")
	}
	again := f.src.fs.read.Load() - before
	t.Logf("%d MiB recorded at the destination before the kill; %d MiB read after it", recorded>>20, again>>20)
	if again > int64(len(data))-recorded {
		t.Errorf("read %d bytes after the restart; the markers had %d of %d", again, recorded, len(data))
	}
	if got.BytesTransferred != int64(len(data)) || got.BytesTotal != int64(len(data)) {
		t.Errorf("counters %+v, want %d bytes transferred and in total", got.Counters, len(data))
	}
	if ps, _, _ := f.store.Partials(context.Background(), task.ID, 0, 0); len(ps) != 0 {
		t.Errorf("partials left after the file was done: %+v", ps)
	}
}

// TestResumeFromChunksCountsOnce: a worker dies while a large file moves
// in chunks, once the task's stored counter holds bytes of chunks not yet
// whole (their markers) beyond the ranges its partial record has; the
// next run sends those chunks again, and the task ends with exactly the
// file's size transferred and in total, not the bytes sent twice on top.
func TestResumeFromChunksCountsOnce(t *testing.T) {
	f := newFixture(t)
	data, task := f.bigInChunks()
	first := f.open()
	w1 := f.worker("w1", first, &spy{chunk: chunkSize})
	w1.Lease = time.Second
	stop1 := serve(t, w1)
	f.midChunk(task.ID)
	first.Close() // killed: nothing more reaches the store
	stop1()
	quiet(&f.src.fs.read)
	f.src.fs.rate.Store(0)
	serve(t, f.worker("w2", f.store, &spy{chunk: chunkSize}))
	f.countedOnce(task.ID, data)
}

// TestDeadlineChangeMidChunkCountsOnce: a new deadline restarts the
// engine while a large file moves in chunks, once bytes of chunks not yet
// whole were counted; the next engine run sends those chunks again, and
// the task ends with exactly the file's size transferred and in total.
func TestDeadlineChangeMidChunkCountsOnce(t *testing.T) {
	f := newFixture(t)
	data, task := f.bigInChunks()
	e := &spy{chunk: chunkSize}
	serve(t, f.worker("w1", f.store, e))
	f.midChunk(task.ID)
	if err := f.store.UpdateTask(context.Background(), f.user.ID, task.ID, "", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	f.countedOnce(task.ID, data)
	if runs := len(e.runs()); runs < 2 {
		t.Errorf("%d engine runs, want the new deadline to start another", runs)
	}
}

// chunkSize is the chunks bigInChunks' file moves in, with a spy's chunk.
const chunkSize = 4 << 20

// bigInChunks submits a task of one 32 MiB file, /big, that the source
// reads at 8 MiB/s: 8 chunks, each a second or so.
func (f *fixture) bigInChunks() ([]byte, domain.Task) {
	data := random(32 << 20)
	write(f.t, filepath.Join(f.src.root, "big"), data)
	f.src.fs.rate.Store(8 << 20)
	return data, f.submit(domain.Options{SyncLevel: synclevel.None}, domain.Item{Src: "/big", Dst: "/big"})
}

// midChunk waits until the store has a whole chunk of task id's file in
// its partial record, and a quarter chunk more counted: bytes of chunks
// not yet whole.
func (f *fixture) midChunk(id string) {
	f.t.Helper()
	var have, counted int64
	f.wait(id, 20*time.Second, func(got domain.Task) bool {
		ps, _, err := f.store.Partials(context.Background(), id, 0, 0)
		if err != nil || len(ps) != 1 {
			return false
		}
		have, counted = ps[0].Have, got.BytesTransferred
		return have >= chunkSize && counted > have+chunkSize/4
	})
	f.t.Logf("%d MiB counted, %d MiB in the partial record's ranges", counted>>20, have>>20)
}

// countedOnce waits for task id to succeed and checks that it copied data
// to /big and counted its size, once, transferred and in total.
func (f *fixture) countedOnce(id string, data []byte) {
	f.t.Helper()
	got := f.wait(id, 30*time.Second, finished)
	if got.Status != domain.StatusSucceeded {
		f.t.Fatalf("task %s %+v", got.Status, got.FatalError)
	}
	if b, _ := os.ReadFile(filepath.Join(f.dst.root, "big")); !bytes.Equal(b, data) {
		f.t.Fatal("the copy differs")
	}
	if size := int64(len(data)); got.BytesTransferred != size || got.BytesTotal != size {
		f.t.Errorf("%d bytes transferred of %d in total, want %d of %d (the file's size)", got.BytesTransferred, got.BytesTotal, size, size)
	}
}

// quiet waits until n stops changing for 300 ms; false if it still
// changes after ten seconds.
func quiet(n *atomic.Int64) bool {
	start := time.Now()
	for last := int64(-1); time.Since(start) < 10*time.Second; time.Sleep(300 * time.Millisecond) {
		v := n.Load()
		if v == last {
			return true
		}
		last = v
	}
	return false
}

// TestRestartTakesBackItsTasks: a worker killed with a minute left on its
// lease, started again under its name, goes on at once.
func TestRestartTakesBackItsTasks(t *testing.T) {
	f := newFixture(t)
	f.files("tree", 60, 2000)
	f.src.fs.delay.Store(int64(20 * time.Millisecond))
	task := f.submit(domain.Options{SyncLevel: synclevel.None}, domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
	first := f.open()
	w1 := f.worker("host/127.0.0.1:8080", first, &spy{})
	w1.Lease = time.Minute
	stop1 := serve(t, w1)
	f.wait(task.ID, 10*time.Second, func(domain.Task) bool { return len(f.done(task.ID)) >= 5 })
	first.Close() // killed: its lease stays
	stop1()
	f.src.fs.delay.Store(0)
	w2 := f.worker("host/127.0.0.1:8080", f.store, &spy{})
	w2.Lease = time.Minute
	serve(t, w2)
	// Half the killed worker's lease: a restart that waited for it to
	// lapse fails the wait.
	got := f.wait(task.ID, 30*time.Second, finished)
	if got.Status != domain.StatusSucceeded {
		t.Fatalf("task %s after the restart; want SUCCEEDED well before the lease lapses", got.Status)
	}
	if _, ok := f.event(task.ID, domain.EventLeaseTaken); ok {
		t.Error("the restarted worker waited for its own lease to lapse")
	}
}

// batches is a store that records the file records of each Progress call.
type batches struct {
	domain.Store
	mu    sync.Mutex
	sizes []int
}

func (b *batches) Progress(ctx context.Context, taskID, worker string, batch domain.Batch) error {
	b.mu.Lock()
	b.sizes = append(b.sizes, len(batch.Files))
	b.mu.Unlock()
	return b.Store.Progress(ctx, taskID, worker, batch)
}

// TestLargeRunsWriteInSmallBatches: a sync that finds thousands of files
// already there records them in many short transactions, not one long
// one that would hold SQLite's write lock from every other request.
func TestLargeRunsWriteInSmallBatches(t *testing.T) {
	f := newFixture(t)
	const n = 3000
	for i := range n {
		p := fmt.Sprintf("tree/d%02d/f%04d", i%30, i)
		write(t, filepath.Join(f.src.root, p), []byte("x"))
		write(t, filepath.Join(f.dst.root, p), []byte("x"))
	}
	task := f.submit(domain.Options{SyncLevel: synclevel.Size}, domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
	rec := &batches{Store: f.store}
	w := f.worker("w1", rec, &spy{})
	w.FlushFiles = 100000 // nothing but the batch bound splits them
	w.FlushEvery = time.Hour
	serve(t, w)
	got := f.wait(task.ID, 30*time.Second, finished)
	if got.Status != domain.StatusSucceeded || got.FilesSkipped != n {
		t.Fatalf("task %s %+v", got.Status, got.Counters)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	total := 0
	for _, s := range rec.sizes {
		total += s
		if s > 500 {
			t.Errorf("one transaction wrote %d file records", s)
		}
	}
	if total != n {
		t.Errorf("%d file records written, want %d", total, n)
	}
}

// TestEndpointMovedMidTask: a task retries a source whose server is gone;
// the user points the endpoint at the new server, through another
// process, and the task goes on there at once, not at its next try of
// the old address.
func TestEndpointMovedMidTask(t *testing.T) {
	f := newFixture(t)
	f.files("tree", 10, 1000)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "ftp://" + ln.Addr().String()
	ln.Close()
	live := f.srcEP.Servers
	f.srcEP.Servers = []string{gone}
	if err := f.store.UpdateEndpoint(context.Background(), f.srcEP); err != nil {
		t.Fatal(err)
	}
	task := f.submit(domain.Options{SyncLevel: synclevel.None}, domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
	w := f.worker("w1", f.store, &spy{})
	w.HeartbeatEvery, w.Backoff = time.Minute, 30*time.Second
	serve(t, w)
	f.wait(task.ID, 10*time.Second, func(t domain.Task) bool { return t.Faults > 0 })
	f.srcEP.Servers = live
	if err := f.open().UpdateEndpoint(context.Background(), f.srcEP); err != nil {
		t.Fatal(err)
	}
	got := f.wait(task.ID, 5*time.Second, finished)
	if got.Status != domain.StatusSucceeded {
		t.Fatalf("task %s %+v", got.Status, got.FatalError)
	}
	sameTree(t, filepath.Join(f.src.root, "tree"), filepath.Join(f.dst.root, "tree"))
}

// TestOutageIsOneFault: the destination's server goes away for a moment
// while 150 files wait for it. Each file that failed is a fault, but the
// task's history tells the cause once, with a count.
func TestOutageIsOneFault(t *testing.T) {
	f := newFixture(t)
	f.files("tree", 150, 20000)
	f.src.fs.delay.Store(int64(2 * time.Millisecond))
	// The destination on an address of its own, so that it can come back there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	serveOn := func(ln net.Listener) *server.Server {
		srv := &server.Server{FS: f.dst.fs, Auth: servertest.Users{"alice": "pw"}, DataTimeout: 5 * time.Second}
		go srv.Serve(ln)
		return srv
	}
	dst := serveOn(ln)
	f.dstEP.Servers = []string{"ftp://" + addr}
	if err := f.store.UpdateEndpoint(context.Background(), f.dstEP); err != nil {
		t.Fatal(err)
	}
	task := f.submit(domain.Options{SyncLevel: synclevel.None}, domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
	w := f.worker("w1", f.store, &spy{})
	w.Backoff = 500 * time.Millisecond
	serve(t, w)
	f.wait(task.ID, 10*time.Second, func(domain.Task) bool { return len(f.done(task.ID)) >= 10 })
	dst.Close()
	time.Sleep(2 * time.Second)
	for ln, err = net.Listen("tcp", addr); err != nil; ln, err = net.Listen("tcp", addr) {
		time.Sleep(20 * time.Millisecond)
	}
	dst = serveOn(ln)
	t.Cleanup(func() { dst.Close() })
	got := f.wait(task.ID, 30*time.Second, finished)
	if got.Status != domain.StatusSucceeded || got.Faults == 0 {
		t.Fatalf("task %s, %d faults", got.Status, got.Faults)
	}
	// What failed attempts moved is not counted: the bytes are the tree's.
	if got.BytesTransferred != 150*20000 || got.BytesTotal != 150*20000 {
		t.Errorf("%d bytes transferred of %d, want %d", got.BytesTransferred, got.BytesTotal, 150*20000)
	}
	var faults []string
	for _, e := range f.events(task.ID) {
		if e.Code == domain.EventFault || e.Code == domain.EventConnectFailed {
			faults = append(faults, e.Description)
		}
	}
	t.Logf("%d faults, told in %d events: %q", got.Faults, len(faults), faults)
	if len(faults) > 3 {
		t.Errorf("%d fault events for one outage", len(faults))
	}
	sameTree(t, filepath.Join(f.src.root, "tree"), filepath.Join(f.dst.root, "tree"))
}

// TestDestinationFull: the destination fills up. The task does not retry
// until its deadline saying OK: it goes INACTIVE (NO_SPACE) at once, tells
// the user why, leaves no partial file, and once space is freed and the
// user resumes it, it finishes.
func TestDestinationFull(t *testing.T) {
	f := newFixture(t)
	f.files("tree", 20, 1<<20)
	f.dst.fs.quota.Store(5 << 20)
	task := f.submit(domain.Options{SyncLevel: synclevel.None, NotifyOnInactive: true, NotifyOnSucceeded: true},
		domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
	if err := f.store.UpdateTask(context.Background(), f.user.ID, task.ID, "", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	serve(t, f.worker("w1", f.store, &spy{}))
	got := f.wait(task.ID, 10*time.Second, func(t domain.Task) bool { return t.Status != domain.StatusActive })
	if got.Status != domain.StatusInactive || got.NiceStatus != domain.NiceNoSpace {
		t.Fatalf("task %s %s, want INACTIVE NO_SPACE", got.Status, got.NiceStatus)
	}
	e, _ := f.event(task.ID, domain.EventInactive)
	if !strings.Contains(e.Description, "is full") || !strings.Contains(e.Description, "ferry task resume "+task.ID) {
		t.Errorf("INACTIVE event %q: want why and what to do", e.Description)
	}
	for _, ev := range f.events(task.ID) {
		if ev.Code == domain.EventFault {
			t.Errorf("fault event %q: a full disk is not retried", ev.Description)
		}
	}
	done := f.done(task.ID)
	entries, _ := os.ReadDir(filepath.Join(f.dst.root, "tree"))
	for _, de := range entries {
		p := "/tree/" + de.Name()
		a, _ := os.ReadFile(filepath.Join(f.src.root, p))
		b, _ := os.ReadFile(filepath.Join(f.dst.root, p))
		if !bytes.Equal(a, b) {
			t.Errorf("%s is partial at the destination", p)
		}
	}
	t.Logf("%d files done, %d at the destination when it was full", len(done), len(entries))

	f.dst.fs.quota.Store(0) // space freed
	if err := f.open().ResumeTask(context.Background(), f.user.ID, task.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	got = f.wait(task.ID, 10*time.Second, finished)
	if got.Status != domain.StatusSucceeded {
		t.Fatalf("resumed task %s %+v", got.Status, got.FatalError)
	}
	if got.BytesTransferred != 20<<20 || got.BytesTotal != 20<<20 {
		t.Errorf("%d bytes transferred of %d, want %d", got.BytesTransferred, got.BytesTotal, 20<<20)
	}
	sameTree(t, filepath.Join(f.src.root, "tree"), filepath.Join(f.dst.root, "tree"))
	f.notes.expect(t, "[alice INACTIVE alice SUCCEEDED]")
}

// committedThenCanceled is a store whose Progress writes the batch and then,
// when the caller's context ended meanwhile, reports that instead, as a
// database driver may when a commit races a cancel.
type committedThenCanceled struct{ domain.Store }

func (s committedThenCanceled) Progress(ctx context.Context, taskID, worker string, b domain.Batch) error {
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Millisecond):
	}
	if err := s.Store.Progress(context.WithoutCancel(ctx), taskID, worker, b); err != nil {
		return err
	}
	return ctx.Err()
}

// TestFlushesCountOnce: the run ends while a flush commits; its batch
// counts once.
func TestFlushesCountOnce(t *testing.T) {
	for range 5 {
		f := newFixture(t)
		f.files("tree", 200, 100)
		task := f.submit(domain.Options{SyncLevel: synclevel.None}, domain.Item{Src: "/tree", Dst: "/tree", Recursive: true})
		w := f.worker("w1", committedThenCanceled{f.store}, &spy{})
		w.FlushEvery, w.FlushFiles = 10*time.Millisecond, 1
		stop := serve(t, w)
		got := f.wait(task.ID, 10*time.Second, finished)
		stop()
		if got.FilesTransferred != 200 || got.Files != 200 {
			t.Fatalf("task %s counts %+v, want 200 files transferred", got.Status, got.Counters)
		}
		if files, _, _ := f.store.Files(context.Background(), task.ID, "", 0, 1000); len(files) != 200 {
			t.Fatalf("%d file records, want 200", len(files))
		}
	}
}
