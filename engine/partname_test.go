package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"ferry/engine"
	"ferry/internal/partname"
	"ferry/internal/synclevel"
	"ferry/storage"
)

// watching is a destination driver that records the names files are
// created under and, at every write, looks at the files under their final
// names: each must be whole, equal to its source (want).
type watching struct {
	storage.Driver
	root string
	want map[string][]byte // by the destination's path
	old  map[string][]byte // what was there before, as whole

	mu      sync.Mutex
	created []string
	seen    []string // files seen short or different under their final names
}

func (w *watching) Create(ctx context.Context, name string, flag storage.OpenFlag) (storage.File, error) {
	w.mu.Lock()
	w.created = append(w.created, name)
	w.mu.Unlock()
	f, err := w.Driver.Create(ctx, name, flag)
	if err != nil {
		return nil, err
	}
	return &watchedFile{File: f, w: w}, nil
}

// look reads every file under its final name.
func (w *watching) look() {
	for p, data := range w.want {
		got, err := os.ReadFile(filepath.Join(w.root, p))
		if err == nil && !bytes.Equal(got, data) && !bytes.Equal(got, w.old[p]) {
			w.mu.Lock()
			w.seen = append(w.seen, fmt.Sprintf("%s: %d bytes of %d", p, len(got), len(data)))
			w.mu.Unlock()
		}
	}
}

type watchedFile struct {
	storage.File
	w *watching
}

func (f *watchedFile) WriteAt(p []byte, off int64) (int, error) {
	f.w.look()
	return f.File.WriteAt(p, off)
}

// TestTemporaryNames: every file is written under its temporary name and
// renamed over its final one once whole (and verified, and its mtime
// set): whole files, parallel streams, chunks from several sessions; no
// file is ever seen short or different under its final name, nothing
// temporary is left, and an old destination file is replaced. InPlace
// writes under the final names.
func TestTemporaryNames(t *testing.T) {
	mtime := time.Date(2021, 2, 3, 4, 5, 6, 0, time.UTC)
	files := map[string][]byte{"/d/small": random(3000), "/d/big": random(5<<20 + 123), "/d/sub/naïve": random(70000), "/d/empty": nil}
	for _, tc := range []struct {
		name    string
		opts    func(*engine.Options)
		inPlace bool
	}{
		{"whole files", func(o *engine.Options) { o.ChunkSize = -1 }, false},
		{"parallel streams, verified", func(o *engine.Options) { o.ChunkSize, o.Parallelism, o.Verify = -1, 4, true }, false},
		{"chunks, verified, mtime", func(o *engine.Options) { o.ChunkSize, o.Concurrency, o.Verify, o.PreserveMtime = 1<<20, 3, true, true }, false},
		{"chunks, not verified", func(o *engine.Options) { o.ChunkSize, o.Concurrency = 1<<20, 3 }, false},
		{"in place", func(o *engine.Options) { o.InPlace = true }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := startEndpoint(t, "", nil)
			w := &watching{want: map[string][]byte{}, old: map[string][]byte{"/d/big": random(6 << 20)}}
			dst := startEndpoint(t, "", func(d storage.Driver) storage.Driver { w.Driver = d; return w })
			w.root = dst.root
			for p, data := range files {
				writeFile(t, filepath.Join(src.root, p), data)
				os.Chtimes(filepath.Join(src.root, p), mtime, mtime)
				if !tc.inPlace {
					w.want[p] = data
				}
			}
			writeFile(t, filepath.Join(dst.root, "d", "big"), w.old["/d/big"]) // an old file, longer
			o := fastOptions()
			o.Tar = engine.TarNever
			tc.opts(&o)
			res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/d", Dst: "/d"}}, o, nil)
			if err != nil || res.Transferred != len(files) || res.Faults != 0 {
				t.Fatalf("%+v %v", res, err)
			}
			compareTrees(t, filepath.Join(src.root, "d"), filepath.Join(dst.root, "d"))
			w.mu.Lock()
			defer w.mu.Unlock()
			if len(w.seen) > 0 {
				t.Errorf("files seen under their final names before they were whole: %v", w.seen)
			}
			for _, name := range w.created {
				if partname.Is(path.Base(name)) == tc.inPlace {
					t.Errorf("created %s", name)
				}
			}
			if o.PreserveMtime {
				for p := range files {
					if st, err := os.Stat(filepath.Join(dst.root, p)); err != nil || !st.ModTime().Equal(mtime) {
						t.Errorf("%s: mtime %v, want %v (%v)", p, st.ModTime(), mtime, err)
					}
				}
			}
		})
	}
}

// TestTemporaryLeftOrRemoved: a copy interrupted (its context canceled)
// or a file canceled keeps what arrived under the file's temporary name
// and says so in Result.Partial, and the same copy again resumes from it;
// a file that fails for good leaves no temporary file.
func TestTemporaryLeftOrRemoved(t *testing.T) {
	for _, how := range []string{"interrupted", "file canceled"} {
		t.Run(how, func(t *testing.T) {
			src := startEndpoint(t, "", nil)
			trip := &tripwire{}
			dst := startEndpoint(t, "", func(d storage.Driver) storage.Driver { trip.Driver = d; return trip })
			data := random(64 << 20)
			writeFile(t, filepath.Join(src.root, "big"), data)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			o := fastOptions()
			o.ChunkSize, o.Concurrency = 4<<20, 2
			o.Cancels = &engine.Cancels{}
			trip.n.Store(16 << 20)
			trip.fn = cancel
			if how == "file canceled" {
				trip.fn = func() { o.Cancels.Cancel("/big") }
			}
			res, _ := engine.Copy(ctx, src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/big", Dst: "/big"}}, o, nil)
			tmp := partname.For("/big")
			if fmt.Sprint(res.Partial) != fmt.Sprint([]string{tmp}) {
				t.Fatalf("partial files %q, want %q", res.Partial, tmp)
			}
			if _, err := os.Stat(filepath.Join(dst.root, "big")); err == nil {
				t.Fatal("the interrupted file bears its final name")
			}
			st, err := os.Stat(filepath.Join(dst.root, tmp))
			if err != nil || st.Size() == 0 {
				t.Fatalf("temporary file: %v", err)
			}
			o.Cancels = nil
			res, err = engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/big", Dst: "/big"}}, o, nil)
			if err != nil || res.Transferred != 1 || len(res.Partial) != 0 {
				t.Fatalf("again: %+v %v", res, err)
			}
			if res.Bytes >= int64(len(data)) {
				t.Errorf("again: moved %d MiB of %d: nothing resumed", res.Bytes>>20, len(data)>>20)
			}
			compareTrees(t, src.root, dst.root)
		})
	}
	t.Run("failed", func(t *testing.T) {
		// The source changes under the transfer: found at the end, after
		// the file's data landed, with no try left, the file fails.
		root := t.TempDir()
		ch := &changing{root: root}
		src := startEndpoint(t, root, func(d storage.Driver) storage.Driver { ch.Driver = d; return ch })
		dst := startEndpoint(t, "", nil)
		writeFile(t, filepath.Join(root, "f"), random(3<<20))
		o := fastOptions()
		o.MaxAttempts = 1
		res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/f", Dst: "/f"}}, o, nil)
		if err != nil || res.Failed != 1 || len(res.Partial) != 0 {
			t.Fatalf("%+v %v", res, err)
		}
		if es, _ := os.ReadDir(dst.root); len(es) != 0 {
			t.Errorf("left at the destination: %v", es)
		}
	})
}

// TestRetryKeepsWholeFile: the destination dies after all of a file's
// data landed, before it could say so: the retry finds the file whole
// under its temporary name, equal by checksum, and only finishes it
// (renames it) instead of sending it again.
func TestRetryKeepsWholeFile(t *testing.T) {
	src := startEndpoint(t, "", nil)
	trip := &tripwire{}
	dst := startEndpoint(t, "", func(d storage.Driver) storage.Driver { trip.Driver = d; return trip })
	data := random(32 << 20)
	writeFile(t, filepath.Join(src.root, "big"), data)
	trip.n.Store(int64(len(data)))
	trip.fail = true // the 226 never comes, whether or not the kill lands first
	trip.fn = func() {
		addr := dst.Addr
		dst.srv.Close() // every session dies
		dst.start(t, addr)
	}
	o := fastOptions()
	o.ChunkSize, o.Parallelism = -1, 1
	rep := &recorder{}
	res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/big", Dst: "/big"}}, o, rep)
	if err != nil || res.Transferred != 1 {
		t.Fatalf("%+v %v %v", res, err, rep.faults)
	}
	if res.Faults == 0 {
		t.Fatal("the destination was killed but no fault was counted")
	}
	compareTrees(t, src.root, dst.root)
	if res.Bytes > int64(len(data)) {
		t.Errorf("moved %d MiB for a %d MiB file that had arrived whole", res.Bytes>>20, len(data)>>20)
	}
	if got := rep.progress.Load(); got != int64(len(data)) {
		t.Errorf("progress %d bytes, want %d", got, len(data))
	}
}

// TestWholeFileLookedAtAgain: the destination fails once a file's data
// all landed, before it could say so, and the retry's look at the file
// fails too: the file is looked at again on a later try, found whole under
// its temporary name and only renamed. Nothing of it is sent again, and
// the progress counts it once, what the failed try's markers said arrived
// included.
func TestWholeFileLookedAtAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		down func(*outage) // at the first fault: the failed write's
	}{
		{
			name: "no session to look on",
			down: func(o *outage) {
				o.refuse.Store(1) // the finisher's dial, after its session died
				o.dst.srv.Close() // every session dies
				o.dst.start(o.t, o.addr)
			},
		},
		{
			name: "look refused, next try cannot dial",
			down: func(o *outage) { o.look.fails.Store(1) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := startEndpoint(t, "", nil)
			out := &outage{t: t}
			out.look = &failedLook{tripwire: tripwire{fn: func() {}, fail: true}, refuse: &out.refuse}
			dst := startEndpoint(t, "", func(d storage.Driver) storage.Driver { out.look.Driver = d; return out.look })
			out.dst, out.addr = dst, dst.Addr
			data := random(32 << 20)
			writeFile(t, filepath.Join(src.root, "big"), data)
			out.look.n.Store(int64(len(data)))
			d := dst.Endpoint
			d.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if out.refuse.Add(-1) >= 0 {
					return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
				}
				var dl net.Dialer
				return dl.DialContext(ctx, network, addr)
			}
			rep := &onFault{recorder: &recorder{}, faults: map[int]func(){1: func() { tc.down(out) }}}
			o := fastOptions()
			o.ChunkSize, o.Parallelism, o.Concurrency = -1, 1, 1
			o.Recursive = false // one file: no pairs dialed ahead (on a loaded machine's long round trip), the next try dials
			res, err := engine.Copy(context.Background(), src.Endpoint, d, []engine.Item{{Src: "/big", Dst: "/big"}}, o, rep)
			if err != nil || res.Transferred != 1 {
				t.Fatalf("%+v %v %v", res, err, rep.recorder.faults)
			}
			compareTrees(t, src.root, dst.root)
			if n := dst.cmds.count("STOR"); n != 1 {
				t.Errorf("%d STOR at the destination, want 1: the file that had arrived whole was sent again; faults: %q", n, rep.recorder.faults)
			}
			if res.Bytes > int64(len(data)) {
				t.Errorf("moved %d bytes for a %d-byte file that had arrived whole", res.Bytes, len(data))
			}
			if got := rep.progress.Load(); got != int64(len(data)) {
				t.Errorf("progress %d bytes, want %d", got, len(data))
			}
		})
	}
}

// outage is what a test's destination outage acts on: the destination
// endpoint at addr, its storage, the count of dials to it to refuse.
type outage struct {
	t      *testing.T
	dst    *endpoint
	addr   string
	look   *failedLook
	refuse atomic.Int32
}

// failedLook is a tripwire whose Stat (a look at a file: MLST) fails while
// fails is above zero; the dial after a failed look is refused (the file
// goes again: its next try fails before it starts).
type failedLook struct {
	tripwire
	fails  atomic.Int32
	refuse *atomic.Int32
}

func (l *failedLook) Stat(ctx context.Context, name string) (storage.Info, error) {
	if l.fails.Add(-1) >= 0 {
		l.refuse.Store(1)
		return storage.Info{}, errors.New("failedLook: no look at the file")
	}
	return l.tripwire.Stat(ctx, name)
}

// onFault is a recorder that runs faults[n] when the n-th fault is
// reported, before the engine goes on.
type onFault struct {
	*recorder
	n      int
	faults map[int]func()
}

func (r *onFault) Fault(p string, err error, d time.Duration) {
	r.recorder.Fault(p, err, d)
	r.mu.Lock()
	r.n++
	f := r.faults[r.n]
	r.mu.Unlock()
	if f != nil {
		f()
	}
}

// TestTemporaryNamesListed: a tree's listings leave temporary names
// alone: one at the source is no file of the user's to send, one at the
// destination (another copy may be writing it) is not deleted as extra.
func TestTemporaryNamesListed(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	writeFile(t, filepath.Join(src.root, "d", "a"), []byte("a"))
	writeFile(t, filepath.Join(src.root, "d", partname.For("gone")), []byte("being written at the source"))
	writeFile(t, filepath.Join(dst.root, "d", "extra"), []byte("old"))
	other := filepath.Join(dst.root, "d", partname.For("other"))
	writeFile(t, other, []byte("another copy's"))
	o := fastOptions()
	o.DeleteExtra = true
	rep := &recorder{}
	res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/d", Dst: "/d"}}, o, rep)
	if err != nil || res.Files != 1 || res.Transferred != 1 || res.Deleted != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if fmt.Sprint(rep.deleted) != "[/d/extra]" {
		t.Errorf("deleted %v, want /d/extra", rep.deleted)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another copy's temporary file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst.root, "d", partname.For("gone"))); err == nil {
		t.Error("a temporary file at the source was sent")
	}
}

// TestStaleTemporaryDeleted: a file the sync level skips (whole at the
// destination) loses the temporary file an earlier run left of it.
func TestStaleTemporaryDeleted(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	data := random(5000)
	writeFile(t, filepath.Join(src.root, "d", "f"), data)
	writeFile(t, filepath.Join(dst.root, "d", "f"), data)
	tmp := filepath.Join(dst.root, "d", partname.For("f"))
	writeFile(t, tmp, data[:100])
	for _, item := range []engine.Item{{Src: "/d", Dst: "/d"}, {Src: "/d/f", Dst: "/d/f"}} {
		writeFile(t, tmp, data[:100])
		o := fastOptions()
		o.SyncLevel = synclevel.Size
		res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{item}, o, nil)
		if err != nil || res.Skipped != 1 {
			t.Fatalf("%s: %+v %v", item.Src, res, err)
		}
		if _, err := os.Stat(tmp); err == nil {
			t.Errorf("%s: the temporary file of a file skipped is left", item.Src)
		}
	}
}

// renameThenFail renames as asked, then says it failed, once: the reply
// of a rename that was done is lost.
type renameThenFail struct {
	storage.Driver
	once sync.Once
}

func (r *renameThenFail) Rename(ctx context.Context, oldname, newname string) error {
	err := r.Driver.Rename(ctx, oldname, newname)
	failed := false
	r.once.Do(func() { failed = true })
	if err == nil && failed {
		return errors.New("the reply is lost")
	}
	return err
}

// TestLostRenameReply: a rename that was done but not confirmed is found
// done when the file is finished again (its temporary name gone, the file
// under its name the source's), whether the file is renamed alone or with
// others, and with its mtime set: not failed, not sent again.
func TestLostRenameReply(t *testing.T) {
	mtime := time.Date(2022, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tc := range []struct {
		name string
		opts func(*engine.Options)
	}{
		{"rename alone", func(o *engine.Options) {}},
		{"verified, mtime", func(o *engine.Options) { o.Verify, o.PreserveMtime = true, true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := startEndpoint(t, "", nil)
			r := &renameThenFail{}
			dst := startEndpoint(t, "", func(d storage.Driver) storage.Driver { r.Driver = d; return r })
			for i := range 3 {
				p := filepath.Join(src.root, "d", fmt.Sprint(i))
				writeFile(t, p, random(1000+i))
				os.Chtimes(p, mtime, mtime)
			}
			o := fastOptions()
			o.Tar = engine.TarNever
			tc.opts(&o)
			rep := &recorder{}
			res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/d", Dst: "/d"}}, o, rep)
			if err != nil || res.Transferred != 3 || res.Failed != 0 || res.Faults != 1 {
				t.Fatalf("%+v %v %v", res, err, rep.faults)
			}
			if res.Bytes != 1000+1001+1002 {
				t.Errorf("moved %d bytes: a file was sent again", res.Bytes)
			}
			compareTrees(t, filepath.Join(src.root, "d"), filepath.Join(dst.root, "d"))
			if o.PreserveMtime {
				for i := range 3 {
					if st, _ := os.Stat(filepath.Join(dst.root, "d", fmt.Sprint(i))); !st.ModTime().Equal(mtime) {
						t.Errorf("%d: mtime %v", i, st.ModTime())
					}
				}
			}
		})
	}
}

// TestRenamesOnWorkersPairs: files that need nothing but their rename once
// they landed are renamed on the session pairs that moved them: by a
// ferry server itself (SITE PARTSTOR), with no command of their own, or,
// by a server that does not name PARTSTOR in FEAT (as GCT), with RNFR and
// RNTO pipelined behind the next transfers. A tree of small files costs
// its destination no session beyond the workers' (no finisher's), and
// every file arrives whole under its final name.
func TestRenamesOnWorkersPairs(t *testing.T) {
	const files = 40
	for _, tc := range []struct {
		name       string
		pipelining int
		partStor   bool
	}{
		{"pipelined", 8, true},
		{"one at a time", 1, true},
		{"pipelined, no PARTSTOR", 8, false},
		{"one at a time, no PARTSTOR", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := startEndpoint(t, "", nil)
			w := &watching{want: map[string][]byte{}}
			var wrapLn func(net.Listener) net.Listener
			if !tc.partStor {
				wrapLn = func(ln net.Listener) net.Listener { return noPartStor{ln} }
			}
			dst := startEndpointLn(t, "", func(d storage.Driver) storage.Driver { w.Driver = d; return w }, wrapLn)
			w.root = dst.root
			for i := range files {
				data := random(100 + i)
				p := fmt.Sprintf("/d/f%d", i)
				writeFile(t, filepath.Join(src.root, p), data)
				w.want[p] = data
			}
			o := fastOptions()
			o.Tar, o.Concurrency, o.Pipelining = engine.TarNever, 2, tc.pipelining
			dst.cmds.take()
			res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/d", Dst: "/d"}}, o, nil)
			if err != nil || res.Transferred != files || res.Faults != 0 {
				t.Fatalf("%+v %v", res, err)
			}
			compareTrees(t, filepath.Join(src.root, "d"), filepath.Join(dst.root, "d"))
			d := dst.cmds.take()
			if d["PASS"] > o.Concurrency {
				t.Errorf("%d logins at the destination; want at most one a worker (%d): no finisher's", d["PASS"], o.Concurrency)
			}
			renames := files
			if tc.partStor {
				renames = 0
			}
			if d["RNFR"] != renames || d["RNTO"] != renames || d["STOR"] != files {
				t.Errorf("%d STOR, %d RNFR and %d RNTO; want %d STOR, %d RNFR and RNTO", d["STOR"], d["RNFR"], d["RNTO"], files, renames)
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if len(w.seen) > 0 {
				t.Errorf("files seen under their final names before they were whole: %v", w.seen)
			}
		})
	}
}

// noPartStor is a listener whose sessions do not name PARTSTOR in FEAT:
// a server that does not rename files itself, as GCT.
type noPartStor struct{ net.Listener }

func (l noPartStor) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return noPartStorConn{c}, nil
}

type noPartStorConn struct{ net.Conn }

func (c noPartStorConn) Write(p []byte) (int, error) {
	if _, err := c.Conn.Write(bytes.Replace(p, []byte(" PARTSTOR\r\n"), nil, 1)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// cutAtRename is a listener whose connections, the third time a session
// answers a rename, close instead: a pair breaks with renames owed (their
// replies lost, done or not).
type cutAtRename struct {
	net.Listener
	n *atomic.Int64
}

func (l cutAtRename) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	return cutAtRenameConn{c, l.n}, err
}

type cutAtRenameConn struct {
	net.Conn
	n *atomic.Int64
}

func (c cutAtRenameConn) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("350 OK. Send RNTO")) && c.n.Add(1) == 3 {
		c.Conn.Close()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

// TestRenamesOwedPairBreaks: a session pair that breaks while the replies
// of renames it sent are owed costs no file: each is looked at and
// finished (renamed, or found renamed), the transfers in flight go again,
// and every file ends whole under its final name, nothing temporary left.
func TestRenamesOwedPairBreaks(t *testing.T) {
	const files = 30
	src := startEndpoint(t, "", nil)
	w := &watching{want: map[string][]byte{}}
	var n atomic.Int64
	dst := startEndpointLn(t, "", func(d storage.Driver) storage.Driver { w.Driver = d; return w },
		func(ln net.Listener) net.Listener { return cutAtRename{noPartStor{ln}, &n} })
	w.root = dst.root
	for i := range files {
		data := random(200 + i)
		p := fmt.Sprintf("/d/f%d", i)
		writeFile(t, filepath.Join(src.root, p), data)
		w.want[p] = data
	}
	o := fastOptions()
	o.Tar, o.Concurrency, o.Pipelining = engine.TarNever, 2, 8
	res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/d", Dst: "/d"}}, o, nil)
	if err != nil || res.Transferred != files || res.Failed != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if n.Load() < 3 {
		t.Fatalf("the pair never broke (%d renames answered)", n.Load())
	}
	compareTrees(t, filepath.Join(src.root, "d"), filepath.Join(dst.root, "d"))
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.seen) > 0 {
		t.Errorf("files seen under their final names before they were whole: %v", w.seen)
	}
}

// cutAtStored is a listener whose connections, the third time a session
// answers a STOR, close instead: the server renamed the file over its
// name, and its reply is lost.
type cutAtStored struct {
	net.Listener
	n *atomic.Int64
}

func (l cutAtStored) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return cutAtStoredConn{c, l.n}, nil
}

type cutAtStoredConn struct {
	net.Conn
	n *atomic.Int64
}

func (c cutAtStoredConn) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("226 Transfer Complete")) && c.n.Add(1) == 3 {
		c.Conn.Close()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

// TestServerRenamedReplyLost: a pair that breaks after the destination
// renamed a file itself (SITE PARTSTOR), before its reply arrived, costs
// no file: it goes again whole, and every file ends whole under its final
// name, none seen there before it was, nothing temporary left.
func TestServerRenamedReplyLost(t *testing.T) {
	const files = 30
	src := startEndpoint(t, "", nil)
	w := &watching{want: map[string][]byte{}}
	var n atomic.Int64
	dst := startEndpointLn(t, "", func(d storage.Driver) storage.Driver { w.Driver = d; return w },
		func(ln net.Listener) net.Listener { return cutAtStored{ln, &n} })
	w.root = dst.root
	for i := range files {
		data := random(300 + i)
		p := fmt.Sprintf("/d/f%d", i)
		writeFile(t, filepath.Join(src.root, p), data)
		w.want[p] = data
	}
	o := fastOptions()
	o.Tar, o.Concurrency, o.Pipelining = engine.TarNever, 2, 8
	res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/d", Dst: "/d"}}, o, nil)
	if err != nil || res.Transferred != files || res.Failed != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if n.Load() < 3 {
		t.Fatalf("the pair never broke (%d STORs answered)", n.Load())
	}
	compareTrees(t, filepath.Join(src.root, "d"), filepath.Join(dst.root, "d"))
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.seen) > 0 {
		t.Errorf("files seen under their final names before they were whole: %v", w.seen)
	}
}
