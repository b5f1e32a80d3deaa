package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ferry/engine"
	"ferry/internal/synclevel"
	"ferry/storage"
)

// gatedList is a source driver whose listing of the directory dir waits
// until the file until exists (at the destination), or gives up after
// patience and says so (late).
type gatedList struct {
	storage.Driver
	dir, until string
	patience   time.Duration
	late       atomic.Bool
}

func (g *gatedList) ReadDir(ctx context.Context, name string) ([]storage.Info, error) {
	if name == g.dir {
		deadline := time.Now().Add(g.patience)
		for {
			if _, err := os.Stat(g.until); err == nil {
				break
			}
			if time.Now().After(deadline) {
				g.late.Store(true)
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return g.Driver.ReadDir(ctx, name)
}

// TestFirstFileBeforeListingEnds copies a tree whose second directory
// cannot be listed until the file of the first has arrived at the
// destination: the copy moves files while it lists, so the listing goes
// on and the copy ends well. A copy that listed the whole tree first
// would wait the listing's patience out.
func TestFirstFileBeforeListingEnds(t *testing.T) {
	root, dstRoot := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(root, "tree/a/f"), []byte("first"))
	writeFile(t, filepath.Join(root, "tree/b/g"), []byte("second"))
	g := &gatedList{dir: "/tree/b", until: filepath.Join(dstRoot, "tree/a/f"), patience: 20 * time.Second}
	src := startEndpoint(t, root, func(d storage.Driver) storage.Driver { g.Driver = d; return g })
	dst := startEndpoint(t, dstRoot, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := engine.Copy(ctx, src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/tree", Dst: "/tree", Recursive: true}}, fastOptions(), nil)
	if err != nil || res.Transferred != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	if g.late.Load() {
		t.Fatal("/tree/a/f did not arrive while /tree/b was being listed: nothing moved before the listing ended")
	}
	compareTrees(t, filepath.Join(root, "tree"), filepath.Join(dstRoot, "tree"))
}

// flakyList is a source driver whose listing of dir fails the first
// time, as a listing whose data connection died would.
type flakyList struct {
	storage.Driver
	dir   string
	tries atomic.Int32
}

func (f *flakyList) ReadDir(ctx context.Context, name string) ([]storage.Info, error) {
	if name == f.dir && f.tries.Add(1) == 1 {
		return nil, errors.New("the listing broke")
	}
	return f.Driver.ReadDir(ctx, name)
}

// TestListingBrokenListedAgain copies a tree one of whose directories
// fails to list once: that directory is listed again, and every file
// moves.
func TestListingBrokenListedAgain(t *testing.T) {
	root, dstRoot := t.TempDir(), t.TempDir()
	for _, rel := range []string{"tree/a/f", "tree/b/g", "tree/b/h", "tree/c/i"} {
		writeFile(t, filepath.Join(root, rel), []byte(rel))
	}
	f := &flakyList{dir: "/tree/b"}
	src := startEndpoint(t, root, func(d storage.Driver) storage.Driver { f.Driver = d; return f })
	dst := startEndpoint(t, dstRoot, nil)
	res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/tree", Dst: "/tree", Recursive: true}}, fastOptions(), nil)
	if err != nil || res.Transferred != 4 || res.Failed != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if n := f.tries.Load(); n != 2 {
		t.Errorf("/tree/b listed %d times, want 2", n)
	}
	compareTrees(t, filepath.Join(root, "tree"), filepath.Join(dstRoot, "tree"))
}

// swapDir is a source driver that, once it has listed the directory
// first, replaces the directory dir (in that listing) by a file, and adds
// a file to the directory grow, not yet listed.
type swapDir struct {
	storage.Driver
	root, first, dir, grow string
	once                   sync.Once
}

func (s *swapDir) ReadDir(ctx context.Context, name string) ([]storage.Info, error) {
	es, err := s.Driver.ReadDir(ctx, name)
	if name == s.first {
		s.once.Do(func() {
			os.RemoveAll(filepath.Join(s.root, s.dir))
			os.WriteFile(filepath.Join(s.root, s.dir), []byte("now a file"), 0o644)
			os.WriteFile(filepath.Join(s.root, s.grow, "new"), []byte("added"), 0o644)
		})
	}
	return es, err
}

// TestTreeChangesWhileListed copies a tree that changes while it is
// listed: a directory listed as one becomes a file before it is walked
// (it fails alone, with a clear error), and a file is added to a
// directory not yet listed (it moves). The copy goes on without starting
// again.
func TestTreeChangesWhileListed(t *testing.T) {
	root, dstRoot := t.TempDir(), t.TempDir()
	for _, rel := range []string{"tree/a/f", "tree/b/g", "tree/c/h"} {
		writeFile(t, filepath.Join(root, rel), []byte(rel))
	}
	s := &swapDir{root: root, first: "/tree", dir: "tree/b", grow: "tree/c"}
	src := startEndpoint(t, root, func(d storage.Driver) storage.Driver { s.Driver = d; return s })
	dst := startEndpoint(t, dstRoot, nil)
	rep := &recorder{}
	res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/tree", Dst: "/tree", Recursive: true}}, fastOptions(), rep)
	if err != nil {
		t.Fatalf("%+v %v", res, err)
	}
	if res.Transferred != 3 || res.Failed != 1 {
		t.Errorf("%d transferred, %d failed; want 3 and 1 (%+v)", res.Transferred, res.Failed, res)
	}
	if r := rep.done["/tree/b"]; r.Outcome != engine.Failed || r.Err == nil || !strings.Contains(r.Err.Error(), "list source directory") {
		t.Errorf("/tree/b: %+v, want a failure to list it", r)
	}
	for _, rel := range []string{"tree/a/f", "tree/c/h", "tree/c/new"} {
		if _, err := os.Stat(filepath.Join(dstRoot, rel)); err != nil {
			t.Errorf("%s: %v", rel, err)
		}
	}
}

// TestSymlinkLoopEnds copies a tree with a symlink that leads back to an
// ancestor: the walk does not enter it again, says so, and ends.
func TestSymlinkLoopEnds(t *testing.T) {
	root, dstRoot := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(root, "tree/sub/f"), []byte("f"))
	if err := os.Symlink("..", filepath.Join(root, "tree/sub/up")); err != nil {
		t.Fatal(err)
	}
	src := startEndpoint(t, root, nil)
	dst := startEndpoint(t, dstRoot, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep := &recorder{}
	res, err := engine.Copy(ctx, src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/tree", Dst: "/tree", Recursive: true}}, fastOptions(), rep)
	if err != nil {
		t.Fatalf("%+v %v", res, err)
	}
	if res.Transferred != 1 || res.Failed != 1 {
		t.Errorf("%d transferred, %d failed; want 1 and 1 (%+v)", res.Transferred, res.Failed, res)
	}
	if r := rep.done["/tree/sub/up"]; r.Outcome != engine.Failed || r.Err == nil || !strings.Contains(r.Err.Error(), "symlink loop") {
		t.Errorf("/tree/sub/up: %+v, want a failure naming the loop", r)
	}
}

// TestNonUTF8Name copies a file whose name is not valid UTF-8: it moves
// under its name, byte for byte, or fails alone with a clear error.
func TestNonUTF8Name(t *testing.T) {
	root, dstRoot := t.TempDir(), t.TempDir()
	name := "caf\xe9"
	writeFile(t, filepath.Join(root, "tree", name), []byte("latin-1"))
	writeFile(t, filepath.Join(root, "tree/ok"), []byte("ok"))
	src := startEndpoint(t, root, nil)
	dst := startEndpoint(t, dstRoot, nil)
	rep := &recorder{}
	res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/tree", Dst: "/tree", Recursive: true}}, fastOptions(), rep)
	if err != nil {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(dstRoot, "tree/ok")); err != nil {
		t.Error(err)
	}
	r, ok := rep.done["/tree/"+name]
	switch {
	case !ok:
		t.Errorf("%q: not reported (%+v)", name, res)
	case r.Outcome == engine.Transferred:
		if got, err := os.ReadFile(filepath.Join(dstRoot, "tree", name)); err != nil || string(got) != "latin-1" {
			t.Errorf("%q: %q %v", name, got, err)
		}
	case r.Outcome != engine.Failed || r.Err == nil:
		t.Errorf("%q: %+v, want it moved or failed with an error", name, r)
	}
}

// TestHugeDirectoryInWindows syncs a directory larger than the
// destination listing the engine holds (hugeDir, made small here) into
// one that has part of it and entries the source does not: it is placed
// window by window, the destination's names are looked up, not held, and
// the extra entries are deleted from the streamed listing.
func TestHugeDirectoryInWindows(t *testing.T) {
	defer engine.SetDirWindows(10, 25)()
	root, dstRoot := t.TempDir(), t.TempDir()
	for i := range 60 {
		writeFile(t, filepath.Join(root, fmt.Sprintf("big/f%03d", i)), []byte(fmt.Sprint(i)))
		if i < 30 {
			writeFile(t, filepath.Join(dstRoot, fmt.Sprintf("big/f%03d", i)), []byte(fmt.Sprint(i)))
		}
	}
	for i := range 10 {
		writeFile(t, filepath.Join(dstRoot, fmt.Sprintf("big/extra%02d", i)), []byte("old"))
	}
	src := startEndpoint(t, root, nil)
	dst := startEndpoint(t, dstRoot, nil)
	o := fastOptions()
	o.SyncLevel = synclevel.Size
	o.DeleteExtra = true
	rep := &recorder{}
	dst.cmds.take()
	res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/big", Dst: "/big", Recursive: true}}, o, rep)
	if err != nil {
		t.Fatalf("%+v %v", res, err)
	}
	if res.Transferred != 30 || res.Skipped != 30 || res.Deleted != 10 || res.Failed != 0 {
		t.Errorf("%d transferred, %d skipped, %d deleted, %d failed; want 30, 30, 10, 0 (%+v)", res.Transferred, res.Skipped, res.Deleted, res.Failed, res)
	}
	if n := dst.cmds.count("MLST"); n < 60 {
		t.Errorf("%d lookups at the destination; want the 60 names looked up, not a listing held", n)
	}
	compareTrees(t, filepath.Join(root, "big"), filepath.Join(dstRoot, "big"))
}

// waitList is a source driver whose listing of the directory dir waits
// until the directory other is being listed too, or gives up after
// patience and says so (late).
type waitList struct {
	storage.Driver
	dir, other string
	patience   time.Duration
	started    chan struct{}
	once       sync.Once
	late       atomic.Bool
}

func (w *waitList) ReadDir(ctx context.Context, name string) ([]storage.Info, error) {
	switch name {
	case w.other:
		w.once.Do(func() { close(w.started) })
	case w.dir:
		select {
		case <-w.started:
		case <-time.After(w.patience):
			w.late.Store(true)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return w.Driver.ReadDir(ctx, name)
}

// TestListingsInFlight copies a tree whose first subdirectory cannot be
// listed until its second is being listed: several directories are
// listed at once, on sessions of their own, and the copy ends well.
func TestListingsInFlight(t *testing.T) {
	root, dstRoot := t.TempDir(), t.TempDir()
	for _, rel := range []string{"tree/a/f", "tree/b/g", "tree/c/h"} {
		writeFile(t, filepath.Join(root, rel), []byte(rel))
	}
	w := &waitList{dir: "/tree/a", other: "/tree/b", patience: 20 * time.Second, started: make(chan struct{})}
	src := startEndpoint(t, root, func(d storage.Driver) storage.Driver { w.Driver = d; return w })
	dst := startEndpoint(t, dstRoot, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := engine.Copy(ctx, src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/tree", Dst: "/tree", Recursive: true}}, fastOptions(), nil)
	if err != nil || res.Transferred != 3 {
		t.Fatalf("%+v %v", res, err)
	}
	if w.late.Load() {
		t.Fatal("/tree/b was not listed while /tree/a was: one listing at a time")
	}
	compareTrees(t, filepath.Join(root, "tree"), filepath.Join(dstRoot, "tree"))
}

// outstanding is a Reporter that keeps the most files planned and not
// yet done at any moment.
type outstanding struct {
	mu                sync.Mutex
	planned, done, hi int
}

func (o *outstanding) Planned(files int, _ int64) {
	o.mu.Lock()
	o.planned += files
	o.hi = max(o.hi, o.planned-o.done)
	o.mu.Unlock()
}
func (o *outstanding) Progress(int64)                     {}
func (o *outstanding) Fault(string, error, time.Duration) {}
func (o *outstanding) Done(engine.FileResult)             { o.mu.Lock(); o.done++; o.mu.Unlock() }

// TestBoundedWindow copies more files than the engine admits at once
// (16,384 not yet final; the planner hands on 4,096 at a time): at no
// moment are more than those planned and not done, so what the engine
// holds does not grow with the tree.
func TestBoundedWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("30,000 files")
	}
	const dirs, per = 30, 1000
	root, dstRoot := t.TempDir(), t.TempDir()
	for d := range dirs {
		dir := filepath.Join(root, "tree", fmt.Sprintf("d%02d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range per {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d", f)), []byte{byte(f)}, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	src := startEndpoint(t, root, nil)
	dst := startEndpoint(t, dstRoot, nil)
	rep := &outstanding{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := engine.Copy(ctx, src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/tree", Dst: "/tree", Recursive: true}}, fastOptions(), rep)
	if err != nil || res.Transferred != dirs*per {
		t.Fatalf("%d transferred, want %d: %v", res.Transferred, dirs*per, err)
	}
	if most := 16_384 + 4_096; rep.hi > most {
		t.Errorf("%d files planned and not done at once; want at most %d of %d", rep.hi, most, dirs*per)
	}
}

// TestDeadlineWhileListing runs a copy whose deadline comes while a
// directory is being listed: the copy says the deadline was reached and
// that the listing did not end, as a run that stops while moving does.
func TestDeadlineWhileListing(t *testing.T) {
	root, dstRoot := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(root, "tree/a/f"), []byte("first"))
	writeFile(t, filepath.Join(root, "tree/b/g"), []byte("second"))
	g := &gatedList{dir: "/tree/b", until: filepath.Join(dstRoot, "never"), patience: 30 * time.Second}
	src := startEndpoint(t, root, func(d storage.Driver) storage.Driver { g.Driver = d; return g })
	dst := startEndpoint(t, dstRoot, nil)
	o := fastOptions()
	o.Deadline = time.Now().Add(2 * time.Second)
	res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/tree", Dst: "/tree", Recursive: true}}, o, nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "deadline reached") || !strings.Contains(err.Error(), "the listing did not end") {
		t.Fatalf("%v (%+v): want the deadline, reached while listing", err, res)
	}
}

// TestDestinationListingsInFlight syncs a tree into one that exists,
// whose first destination subdirectory cannot be listed until its second
// is being listed: the existing destination directories are listed ahead
// too, and the copy ends well.
func TestDestinationListingsInFlight(t *testing.T) {
	root, dstRoot := t.TempDir(), t.TempDir()
	for _, rel := range []string{"tree/a/f", "tree/b/g", "tree/c/h"} {
		writeFile(t, filepath.Join(root, rel), []byte(rel))
		writeFile(t, filepath.Join(dstRoot, rel), []byte("old"))
	}
	w := &waitList{dir: "/tree/a", other: "/tree/b", patience: 20 * time.Second, started: make(chan struct{})}
	src := startEndpoint(t, root, nil)
	dst := startEndpoint(t, dstRoot, func(d storage.Driver) storage.Driver { w.Driver = d; return w })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := fastOptions()
	o.SyncLevel = synclevel.Size
	res, err := engine.Copy(ctx, src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/tree", Dst: "/tree", Recursive: true}}, o, nil)
	if err != nil || res.Transferred != 3 {
		t.Fatalf("%+v %v", res, err)
	}
	if w.late.Load() {
		t.Fatal("/tree/b was not listed at the destination while /tree/a was: one listing at a time")
	}
	compareTrees(t, filepath.Join(root, "tree"), filepath.Join(dstRoot, "tree"))
}
