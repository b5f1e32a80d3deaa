//go:build interop

package interop

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ferry/internal/partname"
	"ferry/internal/pgtest"
	"ferry/service/api"
	"ferry/service/domain"

	_ "modernc.org/sqlite" // registers "sqlite", to lock the service's database
)

// The service's record of a task across restarts and at its end: what a
// task moved adds up after kill -9s of the service, restarts are events
// and faults, and a canceled task says what it left and how to finish it.

// TestServiceRestartsRecordSQLite: a ferry server on SQLite is killed with
// SIGKILL at random points of one transfer between ferry servers, several
// times, and started again on the same data each time.
func TestServiceRestartsRecordSQLite(t *testing.T) {
	needFerry(t)
	dst := startFerryConfig(t, ferryConfig{Anonymous: true})
	testRestartsRecord(t, serviceConfig{Lease: time.Minute}, dst, dst)
}

// TestServiceRestartsRecordPostgreSQL: the same on PostgreSQL.
func TestServiceRestartsRecordPostgreSQL(t *testing.T) {
	needFerry(t)
	dst := startFerryConfig(t, ferryConfig{Anonymous: true})
	testRestartsRecord(t, serviceConfig{Lease: time.Minute, DB: pgtest.DSN(t)}, dst, dst)
}

// TestServiceRestartsRecordGCT: the same on SQLite, to a GCT server.
func TestServiceRestartsRecordGCT(t *testing.T) {
	needTools(t)
	dst := startGCTServer(t)
	testRestartsRecord(t, serviceConfig{Lease: time.Minute}, dst, dst)
}

// signaler is a server process that takes signals (a throttle's).
type signaler interface{ signal(syscall.Signal) }

// signal signals the GCT daemon and its sessions.
func (s *gctServer) signal(sig syscall.Signal) {
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	p.signalGroup(sig)
}

// testRestartsRecord kills the service up to three times mid-transfer to
// dst, at random points of the tree's bytes (the seed is logged), each
// time once the source and dst are frozen and the service has recorded
// what it knew, and checks at the end: every file byte-equal, none
// recorded done or whole at a kill sent again (retrieved from the source
// or its copy written again), each restart an event and a fault, and the
// bytes transferred at least the tree's (every byte moved at least once:
// what a killed run moved and had not counted, files whole at the
// destination that it had not checked, counts when the next run finds
// them whole).
func testRestartsRecord(t *testing.T, cfg serviceConfig, dst server, dstSig signaler) {
	const most = 3
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 0))
	root := t.TempDir()
	files := makeServiceTree(t, filepath.Join(root, "tree"), 300, 8)
	src := startFerryConfig(t, ferryConfig{Root: root, Anonymous: true, Args: []string{"--log-level", "debug"}})
	tree := treeBytes(t, src.Path("tree"))
	// The kills come at random points of the tree's bytes, in order.
	at := make([]float64, most)
	for i := range at {
		at[i] = 0.05 + 0.4*rnd.Float64()
	}
	slices.Sort(at)
	s := startService(t, cfg)
	c := newServiceUser(t, s, "")
	c.addEndpoint("src", src)
	c.addEndpoint("dst", dst)
	th := startThrottle(t, src, time.Millisecond, 40*time.Millisecond)
	// The destination too: its socket buffers would take much of the
	// tree between two of the source's stops.
	dth := startThrottle(t, dstSig, time.Millisecond, 40*time.Millisecond)
	id := c.transfer("src:/tree", "dst:"+epPath(dst, "tree"), "-r", "--label", "kill -9")
	var done int64
	var snaps []atKill
	for _, frac := range at {
		c.waitFor(id, fmt.Sprintf("%.0f%% of the bytes moved", 100*frac), time.Minute, func(t api.Task) bool {
			return t.BytesTransferred >= int64(frac*float64(tree)) && t.FilesTransferred > done
		})
		th.freeze()
		dth.freeze()
		task := c.task(id)
		if task.Status != domain.StatusActive || task.FilesTransferred >= int64(files) {
			// Past the point already: this run is not killed.
			t.Logf("the task was done with %d of %d files before %.0f%% of its bytes: no more kills", task.FilesTransferred, files, 100*frac)
			th.release()
			dth.release()
			break
		}
		// What moved before the freeze is recorded (the next flushes):
		// the kill loses only what is stuck in flight.
		task = settled(c, id)
		done = task.FilesTransferred
		k := snapshotAt(t, c, id, src, dst)
		s.kill9()
		t.Logf("kill %d: %d of %d files recorded done, %d more whole; %d bytes counted, %d at the destination",
			len(snaps)+1, done, files, len(k.ids)-int(done), task.BytesTransferred, treeBytes(t, dst.Path("tree")))
		k.logEnd = len(src.log.Bytes())
		snaps = append(snaps, k)
		th.release()
		dth.release()
		s.restart()
		th = startThrottle(t, src, time.Millisecond, 40*time.Millisecond)
		dth = startThrottle(t, dstSig, time.Millisecond, 40*time.Millisecond)
	}
	if len(snaps) == 0 {
		t.Fatal("the task was done before the first kill")
	}
	th.release()
	dth.release()
	task := c.succeeded(id, 2*time.Minute)
	if task.Files != int64(files) {
		t.Errorf("task counts %d files, want %d", task.Files, files)
	}
	if err := compareTrees(src.Path("tree"), dst.Path("tree")); err != nil {
		t.Fatal(err)
	}
	for i, k := range snaps {
		k.check(t, i+1, src)
	}
	ev := c.events(id)
	if n := strings.Count(ev, "after a service restart"); n != len(snaps) {
		t.Errorf("%d events say the task resumed after a service restart, want %d:\n%s", n, len(snaps), ev)
	}
	if task.Faults < int64(len(snaps)) {
		t.Errorf("the task counts %d faults after %d restarts", task.Faults, len(snaps))
	}
	if task.BytesTransferred < tree {
		t.Errorf("the task counts %d bytes transferred, %.1f%% short of the %d bytes of the tree it moved",
			task.BytesTransferred, 100*float64(tree-task.BytesTransferred)/float64(tree), tree)
	}
	t.Logf("%d bytes transferred for a tree of %d bytes, %d faults", task.BytesTransferred, tree, task.Faults)
}

// atKill is what a test knows of a task when the service was killed: the
// destination copies of the files recorded done then or whole without a
// record, by source path, and how far the source's log went.
type atKill struct {
	ids    map[string]fileID
	local  map[string]string // each one's local path
	logEnd int
}

// snapshotAt takes an atKill of task id, a transfer of the tree "tree"
// from src to dst.
func snapshotAt(t *testing.T, c *serviceCLI, id string, src *ferryServer, dst server) atKill {
	t.Helper()
	rec := c.recorded(id)
	k := atKill{local: map[string]string{}}
	err := filepath.WalkDir(src.Path("tree"), func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src.Root(), p)
		rel = filepath.ToSlash(rel)
		local := dst.Path(rel)
		if _, ok := rec["/"+rel]; !ok {
			a, _ := os.ReadFile(p)
			if b, err := os.ReadFile(local); err != nil || !bytes.Equal(a, b) {
				return nil
			}
		}
		k.local["/"+rel] = local
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	k.ids = fileIDs(t, "/", slices.Collect(maps.Values(k.local)))
	return k
}

// check fails the test if a file of k was sent again after the kill:
// retrieved from the source, or its copy written again.
func (k atKill) check(t *testing.T, n int, src *ferryServer) {
	t.Helper()
	again := retrieved(t, src.log.Bytes()[k.logEnd:])
	after := fileIDs(t, "/", slices.Collect(maps.Values(k.local)))
	bad := 0
	for s, local := range k.local {
		if again[s] > 0 || after[local] != k.ids[local] {
			t.Errorf("kill %d: %s was done or whole then, and was sent again (retrieved %d times; copy %+v, was %+v)",
				n, s, again[s], after[local], k.ids[local])
			if bad++; bad > 10 {
				t.Fatal("more files were sent again; giving up the list")
			}
		}
	}
}

// settled waits until task id's record, its counters and its partial
// files, has not changed for a while (longer than the worker's flush
// interval), and returns it.
func settled(c *serviceCLI, id string) api.Task {
	c.t.Helper()
	var last api.Task
	var lastPartial, same int
	for same < 4 {
		time.Sleep(400 * time.Millisecond)
		task := c.task(id)
		var p api.PartialPaths
		c.decode(&p, "task", "show", id, "--partial")
		if task.BytesTransferred == last.BytesTransferred && task.FilesTransferred == last.FilesTransferred && len(p.Data) == lastPartial {
			same++
		} else {
			same = 0
		}
		last, lastPartial = task, len(p.Data)
	}
	return last
}

// treeBytes is the size of the files under dir.
func treeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err == nil && !de.IsDir() {
			fi, err := de.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestServiceCanceledLeaves: a task canceled while large files are half
// way to a ferry server says what it left (events, ferry task show
// --partial), and ferry task resume names the command that finishes the
// job, which does.
func TestServiceCanceledLeaves(t *testing.T) {
	needFerry(t)
	dst := startFerryConfig(t, ferryConfig{Anonymous: true})
	// Its socket buffers would take much of the files between two of the
	// source's stops.
	startThrottle(t, dst, time.Millisecond, 40*time.Millisecond)
	testCanceledLeaves(t, dst, 64<<20)
}

// TestServiceCanceledLeavesGCT: the same with a GCT destination.
func TestServiceCanceledLeavesGCT(t *testing.T) {
	needTools(t)
	testCanceledLeaves(t, startGCTServer(t), 256<<20)
}

func testCanceledLeaves(t *testing.T, dst server, size int64) {
	root := t.TempDir()
	for i := range 4 {
		writeRandomFile(t, filepath.Join(root, "tree", fmt.Sprintf("big-%d.dat", i)), size)
	}
	src := startFerryConfig(t, ferryConfig{Root: root, Anonymous: true})
	s := startService(t, serviceConfig{})
	c := newServiceUser(t, s, "")
	c.addEndpoint("src", src)
	c.addEndpoint("dst", dst)
	th := startThrottle(t, src, time.Millisecond, 40*time.Millisecond)
	to := epPath(dst, "tree")
	id := c.transfer("src:/tree", "dst:"+to, "-r", "--label", "canceled")
	// Files are recorded as their data starts to move; then nothing more
	// moves, and the task is canceled.
	var partial api.PartialPaths
	for {
		c.decode(&partial, "task", "show", id, "--partial")
		if len(partial.Data) > 0 {
			break
		}
		if task := c.task(id); domain.Done(task.Status) {
			t.Fatalf("task %s %s before any partial file was listed; events:\n%s", id, task.Status, c.events(id))
		}
		time.Sleep(50 * time.Millisecond)
	}
	th.freeze()
	c.ok("", "task", "cancel", id)
	task := c.wait(id, time.Minute)
	th.release()
	if task.Status != domain.StatusFailed {
		t.Fatalf("canceled task %s: %s", id, task.Status)
	}
	c.decode(&partial, "task", "show", id, "--partial")
	if len(partial.Data) == 0 {
		t.Fatalf("the canceled task lists no partial file")
	}
	for _, p := range partial.Data {
		// The data is under the file's temporary name; a file whose data
		// had not reached it yet may have none.
		var have int64
		if fi, err := os.Stat(dst.Path(partname.For(strings.TrimPrefix(p.SourcePath, "/")))); err == nil {
			have = fi.Size()
		}
		if p.Size != size || p.BytesAtDestination < 0 || p.BytesAtDestination > have {
			t.Errorf("%s listed partial: size %d, %d bytes at the destination; the copy has %d", p.SourcePath, p.Size, p.BytesAtDestination, have)
		}
	}
	// The event names the first few files by name; the list is in the
	// order they were recorded.
	ev := c.events(id)
	named := slices.ContainsFunc(partial.Data, func(p api.PartialPath) bool { return strings.Contains(ev, p.SourcePath) })
	if !strings.Contains(ev, "partial at the destination") || !named {
		t.Errorf("no event says which files the task left partial:\n%s", ev)
	}

	r := c.run("", "task", "resume", id)
	if r.code == 0 {
		t.Fatalf("resume of a canceled task succeeded:\n%s", r)
	}
	want := "ferry transfer " + task.SourceEndpointID + ":/tree " + task.DestinationEndpointID + ":" + to + " -r --sync-level size"
	if !strings.Contains(r.stderr, want) {
		t.Fatalf("ferry task resume of a canceled task does not name %q:\n%s", want, r)
	}
	t.Logf("ferry task resume: %s", strings.TrimSpace(r.stderr))
	again := c.transfer(strings.Fields(want)[2:]...)
	c.succeeded(again, 2*time.Minute)
	if err := compareTrees(src.Path("tree"), dst.Path("tree")); err != nil {
		t.Fatal(err)
	}
}

// TestServiceDatabaseOutage: the service's PostgreSQL becomes unreachable
// mid-transfer (every connection to it cut, new ones refused) for a few
// seconds; the task goes on, and once the database is back its events say
// for how long it was out, and it ends SUCCEEDED with every file whole.
func TestServiceDatabaseOutage(t *testing.T) {
	needFerry(t)
	dsn, err := url.Parse(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	db := startCutProxy(t, dsn.Host)
	dsn.Host = db.addr
	f := newKillFixture(t)
	s := startService(t, serviceConfig{DB: dsn.String(), Lease: time.Minute})
	c := newServiceUser(t, s, "")
	id := f.submit(t, c)
	c.waitFor(id, "files recorded done", time.Minute, func(t api.Task) bool { return t.FilesTransferred > 0 })
	db.cut()
	// Out for a while: longer than several flushes and heartbeats.
	time.Sleep(5 * time.Second)
	db.restore()
	f.th.release()
	task := c.succeeded(id, 2*time.Minute)
	if err := compareTrees(f.src.Path("tree"), f.dst.Path("tree")); err != nil {
		t.Fatal(err)
	}
	ev := c.events(id)
	if !strings.Contains(ev, "the database was unreachable for") {
		t.Errorf("no event says the database was out:\n%s", ev)
	}
	t.Logf("%d files, %d bytes; events:\n%s", task.Files, task.BytesTransferred, ev)
}

// TestServiceDatabaseLockedSQLite: another process holds the service's
// SQLite database locked (BEGIN EXCLUSIVE) mid-transfer, longer than the
// service waits for a lock; the task goes on, its events say for how
// long the database was out, and it ends SUCCEEDED with every file whole.
func TestServiceDatabaseLockedSQLite(t *testing.T) {
	needFerry(t)
	data := t.TempDir()
	f := newKillFixture(t)
	s := startService(t, serviceConfig{Data: data, Lease: time.Minute})
	c := newServiceUser(t, s, "")
	id := f.submit(t, c)
	c.waitFor(id, "files recorded done", time.Minute, func(t api.Task) bool { return t.FilesTransferred > 0 })
	db, err := sql.Open("sqlite", filepath.Join(data, "ferry.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	f.th.release()
	// Locked for longer than the service's busy timeout (10 s).
	time.Sleep(15 * time.Second)
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	task := c.succeeded(id, 2*time.Minute)
	if err := compareTrees(f.src.Path("tree"), f.dst.Path("tree")); err != nil {
		t.Fatal(err)
	}
	ev := c.events(id)
	if !strings.Contains(ev, "the database was unreachable for") {
		t.Errorf("no event says the database was out:\n%s", ev)
	}
	if tree := treeBytes(t, f.src.Path("tree")); task.BytesTransferred < tree {
		t.Errorf("the task counts %d bytes transferred, less than the %d bytes of the tree", task.BytesTransferred, tree)
	}
}

// cutProxy forwards TCP connections to a server until cut, which closes
// them all and refuses new ones until restore.
type cutProxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	p := &cutProxy{t: t, target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

// serve accepts on ln until it closes.
func (p *cutProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

// cut closes the listener and every connection.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// restore listens again on the same address.
func (p *cutProxy) restore() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(ln)
}
