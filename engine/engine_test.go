package engine_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ferry/engine"
	"ferry/gridftp/client"
	"ferry/gridftp/server"
	"ferry/internal/fault"
	"ferry/internal/synclevel"
	"ferry/storage"
	"ferry/storage/posix"
)

// endpoint runs a ferry endpoint server over root, with the driver wrapped
// by wrap when given.
type endpoint struct {
	engine.Endpoint
	root   string
	srv    *server.Server
	fs     storage.Driver
	cmds   commandLog
	wrapLn func(net.Listener) net.Listener
	// dataTimeout is the server's DataTimeout; 0: 5 s.
	dataTimeout time.Duration
}

// commandLog is a slog.Handler that counts the commands a server runs, by
// verb, from its debug log.
type commandLog struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *commandLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *commandLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *commandLog) WithGroup(string) slog.Handler            { return l }

func (l *commandLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "command" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "verb" {
			l.mu.Lock()
			if l.n == nil {
				l.n = map[string]int{}
			}
			l.n[a.Value.String()]++
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

// count is how many of verb so far.
func (l *commandLog) count(verb string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[verb]
}

// take returns the counts so far and starts again from zero.
func (l *commandLog) take() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.n
	l.n = nil
	return n
}

func startEndpoint(t *testing.T, root string, wrap func(storage.Driver) storage.Driver) *endpoint {
	t.Helper()
	return startEndpointLn(t, root, wrap, nil)
}

// startEndpointLn is startEndpoint with the server's listener wrapped by
// wrapLn (nil: not wrapped).
func startEndpointLn(t *testing.T, root string, wrap func(storage.Driver) storage.Driver, wrapLn func(net.Listener) net.Listener) *endpoint {
	t.Helper()
	if root == "" {
		root = t.TempDir()
	}
	p, err := posix.New(root)
	if err != nil {
		t.Fatal(err)
	}
	var d storage.Driver = p
	if wrap != nil {
		d = wrap(d)
	}
	e := &endpoint{root: root, fs: d, wrapLn: wrapLn}
	e.start(t, "127.0.0.1:0")
	return e
}

func (e *endpoint) start(t *testing.T, addr string) {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port of a just-closed server may linger a moment
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	e.Addr = ln.Addr().String()
	if e.wrapLn != nil {
		ln = e.wrapLn(ln)
	}
	e.srv = &server.Server{FS: e.fs, Anonymous: true, AnonymousWrite: true, DataTimeout: cmp.Or(e.dataTimeout, 5*time.Second), MarkerInterval: 50 * time.Millisecond,
		Logger: slog.New(&e.cmds)}
	go e.srv.Serve(ln)
	srv := e.srv
	t.Cleanup(func() { srv.Close() })
}

func fastOptions() engine.Options {
	return engine.Options{Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Recursive: true}
}

func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// compareTrees fails unless dst holds exactly src's files and directories.
func compareTrees(t *testing.T, src, dst string) {
	t.Helper()
	seen := map[string]bool{}
	filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(src, p)
		seen[rel] = true
		q := filepath.Join(dst, rel)
		if d.IsDir() {
			if st, err := os.Stat(q); err != nil || !st.IsDir() {
				t.Errorf("directory %s missing at destination", rel)
			}
			return nil
		}
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(q)
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("file %s differs at %s: %d bytes, want %d (%v)", rel, dst, len(b), len(a), err)
		}
		return nil
	})
	filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dst, p)
		if !seen[rel] {
			t.Errorf("unexpected %s at destination", rel)
		}
		return nil
	})
}

// recorder is a Reporter that keeps everything.
type recorder struct {
	mu       sync.Mutex
	planned  int
	progress atomic.Int64
	faults   []string
	done     map[string]engine.FileResult
	deleted  []string // "dir/" for a directory
}

// Deleted keeps each deletion; a file's must have the size of what the
// tests write at destinations ("old").
func (r *recorder) Deleted(d engine.Deletion) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case d.Dir:
		d.Path += "/"
	case d.Size != int64(len("old")):
		d.Path += fmt.Sprintf(" (size %d)", d.Size)
	}
	r.deleted = append(r.deleted, d.Path)
}

func (r *recorder) Planned(files int, _ int64) { r.mu.Lock(); r.planned += files; r.mu.Unlock() }
func (r *recorder) Progress(d int64)           { r.progress.Add(d) }
func (r *recorder) Fault(p string, err error, _ time.Duration) {
	r.mu.Lock()
	r.faults = append(r.faults, fmt.Sprintf("%s: %v", p, err))
	r.mu.Unlock()
}
func (r *recorder) Done(f engine.FileResult) {
	r.mu.Lock()
	if r.done == nil {
		r.done = map[string]engine.FileResult{}
	}
	r.done[f.Src] = f
	r.mu.Unlock()
}

func TestCopyTree(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	writeFile(t, filepath.Join(src.root, "tree", "a", "b", "c", "d", "e", "deep.bin"), random(70000))
	writeFile(t, filepath.Join(src.root, "tree", "empty"), nil)
	writeFile(t, filepath.Join(src.root, "tree", "with space", "naïve ünïcødé 文件.txt"), random(1234))
	os.MkdirAll(filepath.Join(src.root, "tree", "empty dir"), 0o755)
	for i := range 100 {
		writeFile(t, filepath.Join(src.root, "tree", "many", fmt.Sprintf("f%03d", i)), random(i*37))
	}
	for _, tc := range []struct {
		name string
		opts func(*engine.Options)
	}{
		{"auto", func(*engine.Options) {}},
		{"verified, one session, no pipelining", func(o *engine.Options) {
			o.Verify, o.Concurrency, o.Pipelining, o.Parallelism = true, 1, 1, 3
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.RemoveAll(filepath.Join(dst.root, "tree"))
			o := fastOptions()
			tc.opts(&o)
			rep := &recorder{}
			res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/tree", Dst: "/tree"}}, o, rep)
			if err != nil {
				t.Fatal(err)
			}
			// tree, a, b, c, d, e, "with space", "empty dir" and many.
			if res.Transferred != 103 || res.Failed != 0 || res.Faults != 0 || rep.planned != 103 || res.Directories != 9 {
				t.Fatalf("result %+v, planned %d, faults %v", res, rep.planned, rep.faults)
			}
			compareTrees(t, filepath.Join(src.root, "tree"), filepath.Join(dst.root, "tree"))
			if o.Verify && rep.done["/tree/empty"].Checksum == "" {
				t.Error("verified file without a checksum in its result")
			}
		})
	}
}

// TestSyncLevels: every level but none skips only a destination file of
// the source's size; a shorter one, even newer than its source (what a
// canceled transfer leaves), is sent again.
func TestSyncLevels(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	newer := time.Now().Truncate(time.Second)
	later := newer.Add(time.Minute)
	// same: identical; bytes: same size, other bytes, older; size: other
	// size, older; partial: the source's first bytes, newer; gone: missing
	names := []string{"same", "bytes", "size", "partial", "gone"}
	writeFile(t, filepath.Join(src.root, "d", "same"), []byte("abc"))
	writeFile(t, filepath.Join(src.root, "d", "bytes"), []byte("xyz"))
	writeFile(t, filepath.Join(src.root, "d", "size"), []byte("longer"))
	writeFile(t, filepath.Join(src.root, "d", "partial"), []byte("the whole file"))
	writeFile(t, filepath.Join(src.root, "d", "gone"), []byte("new"))
	for _, n := range names {
		os.Chtimes(filepath.Join(src.root, "d", n), newer, newer)
	}
	for _, tc := range []struct {
		level synclevel.Level
		sent  []string
	}{
		{synclevel.None, names},
		{synclevel.Exists, []string{"size", "partial", "gone"}},
		{synclevel.Size, []string{"size", "partial", "gone"}},
		{synclevel.Mtime, []string{"bytes", "size", "partial", "gone"}},
		{synclevel.Checksum, []string{"bytes", "size", "partial", "gone"}},
	} {
		t.Run(fmt.Sprint(tc.level), func(t *testing.T) {
			os.RemoveAll(filepath.Join(dst.root, "d"))
			writeFile(t, filepath.Join(dst.root, "d", "same"), []byte("abc"))
			writeFile(t, filepath.Join(dst.root, "d", "bytes"), []byte("XYZ"))
			writeFile(t, filepath.Join(dst.root, "d", "size"), []byte("short"))
			writeFile(t, filepath.Join(dst.root, "d", "partial"), []byte("the w"))
			os.Chtimes(filepath.Join(dst.root, "d", "same"), newer, newer)
			os.Chtimes(filepath.Join(dst.root, "d", "bytes"), old, old)
			os.Chtimes(filepath.Join(dst.root, "d", "size"), old, old)
			os.Chtimes(filepath.Join(dst.root, "d", "partial"), later, later)
			o := fastOptions()
			o.SyncLevel = tc.level
			rep := &recorder{}
			res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/d", Dst: "/d"}}, o, rep)
			if err != nil {
				t.Fatal(err)
			}
			var sent []string
			for _, n := range names {
				if rep.done["/d/"+n].Outcome == engine.Transferred {
					sent = append(sent, n)
				}
			}
			if fmt.Sprint(sent) != fmt.Sprint(tc.sent) || res.Skipped != len(names)-len(tc.sent) {
				t.Fatalf("sent %v (skipped %d), want %v", sent, res.Skipped, tc.sent)
			}
			compareTrees(t, filepath.Join(src.root, "d", "partial"), filepath.Join(dst.root, "d", "partial"))
		})
	}
}

func TestSingleFileDestinations(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	data := random(5000)
	writeFile(t, filepath.Join(src.root, "f.bin"), data)
	os.Mkdir(filepath.Join(dst.root, "existing"), 0o755)
	for _, tc := range []struct{ dst, want string }{
		{"/renamed.bin", "renamed.bin"},
		{"/into/", "into/f.bin"},
		{"/existing", "existing/f.bin"},
		{"/a/b/c.bin", "a/b/c.bin"},
	} {
		res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/f.bin", Dst: tc.dst}}, fastOptions(), nil)
		if err != nil || res.Transferred != 1 {
			t.Fatalf("%s: %+v %v", tc.dst, res, err)
		}
		if got, _ := os.ReadFile(filepath.Join(dst.root, tc.want)); !bytes.Equal(got, data) {
			t.Errorf("%s: %s not written", tc.dst, tc.want)
		}
	}
}

// TestSessions counts what a one-file copy costs each server: the sessions
// that plan the copy move the file and rename it from its temporary name,
// the finisher (for a file large enough that its source is checked again)
// dials only its own pair, and each side is looked up once while
// planning: the destination with its parent and the two temporary names
// an earlier run may have left (as the destination, in it), in one
// pipelined round trip.
func TestSessions(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	for _, tc := range []struct {
		name                           string
		size                           int
		inPlace                        bool
		logins, srcLookups, dstLookups int
	}{
		{"small in place: one pair", 1000, true, 1, 1, 2},
		{"small: one pair", 1000, false, 1, 1, 4},
		{"large: a finisher's pair", 2 << 20, false, 2, 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeFile(t, filepath.Join(src.root, "f"), random(tc.size))
			os.Remove(filepath.Join(dst.root, "f"))
			src.cmds.take()
			dst.cmds.take()
			o := fastOptions()
			o.InPlace = tc.inPlace
			res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/f", Dst: "/f"}}, o, nil)
			if err != nil || res.Transferred != 1 {
				t.Fatalf("%+v %v", res, err)
			}
			s, d := src.cmds.take(), dst.cmds.take()
			if s["PASS"] != tc.logins || d["PASS"] != tc.logins {
				t.Errorf("logins: %d at the source, %d at the destination; want %d each", s["PASS"], d["PASS"], tc.logins)
			}
			if s["MLST"] != tc.srcLookups || d["MLST"] != tc.dstLookups {
				t.Errorf("MLST: %d at the source, %d at the destination; want %d and %d", s["MLST"], d["MLST"], tc.srcLookups, tc.dstLookups)
			}
			if s["NOOP"]+d["NOOP"] != 0 {
				t.Errorf("NOOPs sent: the login measures the round trip")
			}
		})
	}
}

func TestChunkedVerifiedPreservingMtime(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	data := random(9<<20 + 12345)
	writeFile(t, filepath.Join(src.root, "big"), data)
	mtime := time.Date(2020, 5, 6, 7, 8, 9, 0, time.UTC)
	os.Chtimes(filepath.Join(src.root, "big"), mtime, mtime)
	writeFile(t, filepath.Join(dst.root, "big"), random(12<<20)) // longer: must be cut
	o := fastOptions()
	o.ChunkSize, o.Verify, o.PreserveMtime, o.Concurrency = 1<<20, true, true, 3
	rep := &recorder{}
	res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/big", Dst: "/big"}}, o, rep)
	if err != nil || res.Transferred != 1 || res.Faults != 0 {
		t.Fatalf("%+v %v %v", res, err, rep.faults)
	}
	got, _ := os.ReadFile(filepath.Join(dst.root, "big"))
	if !bytes.Equal(got, data) {
		t.Fatalf("chunked copy differs (len %d, want %d)", len(got), len(data))
	}
	if st, _ := os.Stat(filepath.Join(dst.root, "big")); !st.ModTime().Equal(mtime) {
		t.Errorf("mtime %v, want %v", st.ModTime(), mtime)
	}
	if rep.progress.Load() != int64(len(data)) {
		t.Errorf("progress %d, want %d", rep.progress.Load(), len(data))
	}
}

// corrupting flips a byte of the first write that covers offset at, once.
type corrupting struct {
	storage.Driver
	at   int64
	done atomic.Bool
}

func (c *corrupting) Create(ctx context.Context, name string, flag storage.OpenFlag) (storage.File, error) {
	f, err := c.Driver.Create(ctx, name, flag)
	if err != nil {
		return nil, err
	}
	return &corruptFile{File: f, c: c}, nil
}

type corruptFile struct {
	storage.File
	c *corrupting
}

func (f *corruptFile) WriteAt(p []byte, off int64) (int, error) {
	if off <= f.c.at && f.c.at < off+int64(len(p)) && f.c.done.CompareAndSwap(false, true) {
		q := append([]byte(nil), p...)
		q[f.c.at-off] ^= 0xff
		p = q
	}
	return f.File.WriteAt(p, off)
}

// TestCorruptChunkRepaired: a chunk corrupted on its way into the
// destination's file is caught by the live checksums and sent again, with
// one stream per transfer and with several (the ends hash on every stream).
func TestCorruptChunkRepaired(t *testing.T) {
	for _, streams := range []int{1, 4} {
		t.Run(fmt.Sprint(streams, " streams"), func(t *testing.T) {
			src := startEndpoint(t, "", nil)
			bad := &corrupting{at: 5<<20 + 77}
			dst := startEndpoint(t, "", func(d storage.Driver) storage.Driver { bad.Driver = d; return bad })
			data := random(8 << 20)
			writeFile(t, filepath.Join(src.root, "big"), data)
			o := fastOptions()
			o.ChunkSize, o.Verify, o.Parallelism = 1<<20, true, streams
			rep := &recorder{}
			res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/big", Dst: "/big"}}, o, rep)
			if err != nil || res.Transferred != 1 {
				t.Fatalf("%+v %v", res, err)
			}
			if !res.Settings.Live {
				t.Error("two ferry endpoints did not use live checksums")
			}
			if !bad.done.Load() || res.Faults != 1 {
				t.Fatalf("corruption injected %v, faults %d (%v): want one fault", bad.done.Load(), res.Faults, rep.faults)
			}
			if got, _ := os.ReadFile(filepath.Join(dst.root, "big")); !bytes.Equal(got, data) {
				t.Fatal("corrupted chunk was not repaired")
			}
			if res.Bytes > int64(len(data))+1<<20 {
				t.Errorf("moved %d bytes for a %d-byte file: more than the bad chunk was sent again", res.Bytes, len(data))
			}
			if got := rep.progress.Load(); got != int64(len(data)) {
				t.Errorf("progress %d bytes, want %d (moved %d)", got, len(data), res.Bytes)
			}
		})
	}
}

// changing modifies a source file (a new mtime) when it is first opened.
type changing struct {
	storage.Driver
	root string
	once sync.Once
}

func (c *changing) Open(ctx context.Context, name string) (storage.File, error) {
	f, err := c.Driver.Open(ctx, name)
	c.once.Do(func() {
		later := time.Now().Add(time.Hour)
		os.Chtimes(filepath.Join(c.root, name), later, later)
	})
	return f, err
}

func TestSourceChangeDetected(t *testing.T) {
	root := t.TempDir()
	ch := &changing{root: root}
	src := startEndpoint(t, root, func(d storage.Driver) storage.Driver { ch.Driver = d; return ch })
	dst := startEndpoint(t, "", nil)
	data := random(2 << 20)
	writeFile(t, filepath.Join(root, "f"), data)
	rep := &recorder{}
	res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/f", Dst: "/f"}}, fastOptions(), rep)
	if err != nil || res.Transferred != 1 || res.Faults != 1 {
		t.Fatalf("%+v %v faults %v", res, err, rep.faults)
	}
	if len(rep.faults) != 1 || !bytes.Contains([]byte(rep.faults[0]), []byte("source changed")) {
		t.Fatalf("faults %v, want one saying the source changed", rep.faults)
	}
}

func TestMissingAndFatal(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	if _, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/nope", Dst: "/x"}}, fastOptions(), nil); err == nil {
		t.Fatal("a missing source item was not an error")
	}
	writeFile(t, filepath.Join(src.root, "d", "f"), nil)
	o := fastOptions()
	o.Recursive = false
	if _, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/d", Dst: "/d"}}, o, nil); err == nil {
		t.Fatal("a directory without recursive was not an error")
	}
	dead := engine.Endpoint{Addr: "127.0.0.1:1"}
	if _, err := engine.Copy(context.Background(), dead, dst.Endpoint, []engine.Item{{Src: "/d", Dst: "/d"}}, fastOptions(), nil); err == nil {
		t.Fatal("an unreachable endpoint was not an error")
	}
}

// vanishing deletes a file when the transfer opens it: a fatal error.
type vanishing struct {
	storage.Driver
	root string
}

func (v *vanishing) Open(ctx context.Context, name string) (storage.File, error) {
	os.Remove(filepath.Join(v.root, name))
	return v.Driver.Open(ctx, name)
}

func TestVanishedFileFailsAlone(t *testing.T) {
	root := t.TempDir()
	v := &vanishing{root: root}
	src := startEndpoint(t, root, func(d storage.Driver) storage.Driver { v.Driver = d; return v })
	dst := startEndpoint(t, "", nil)
	writeFile(t, filepath.Join(root, "d", "f"), []byte("x"))
	res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/d", Dst: "/d"}}, fastOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 1 || len(res.FailedFiles) != 1 || res.FailedFiles[0].Attempts != 1 || !fault.Final(res.FailedFiles[0].Err) {
		t.Fatalf("%+v: want one fatal failure without retries", res)
	}
}

// tripwire calls fn once after the destination has written n bytes. fn
// runs on a goroutine of its own, so the transfer may end well before it
// acts; with fail, the write that trips fails once its data is written:
// the transfer does not end well, wherever fn is.
type tripwire struct {
	storage.Driver
	n, written atomic.Int64
	fn         func()
	once       sync.Once
	fail       bool
}

func (w *tripwire) Create(ctx context.Context, name string, flag storage.OpenFlag) (storage.File, error) {
	f, err := w.Driver.Create(ctx, name, flag)
	if err != nil {
		return nil, err
	}
	return &tripFile{File: f, w: w}, nil
}

type tripFile struct {
	storage.File
	w *tripwire
}

func (f *tripFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	tripped := false
	if f.w.written.Add(int64(n)) >= f.w.n.Load() {
		f.w.once.Do(func() { tripped = true; go f.w.fn() })
	}
	if tripped && f.w.fail && err == nil {
		err = errors.New("tripwire: the destination dies")
	}
	return n, err
}

func TestDestinationKilledMidTransfer(t *testing.T) {
	src := startEndpoint(t, "", nil)
	trip := &tripwire{}
	dst := startEndpoint(t, "", func(d storage.Driver) storage.Driver { trip.Driver = d; return trip })
	data := random(32 << 20)
	writeFile(t, filepath.Join(src.root, "big"), data)
	trip.n.Store(int64(len(data) / 2))
	trip.fn = func() {
		addr := dst.Addr
		dst.srv.Close() // every session and data connection dies
		dst.start(t, addr)
	}
	o := fastOptions()
	o.ChunkSize, o.Concurrency, o.Verify = 2<<20, 2, true
	rep := &recorder{}
	res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/big", Dst: "/big"}}, o, rep)
	if err != nil || res.Transferred != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if res.Faults == 0 {
		t.Fatal("the destination was killed but no fault was counted")
	}
	if got, _ := os.ReadFile(filepath.Join(dst.root, "big")); !bytes.Equal(got, data) {
		t.Fatal("file differs after the destination restarted")
	}
	// Only chunks in flight at the kill are sent again, never the whole file.
	if limit := int64(len(data)) + int64(o.Concurrency*o.Concurrency)*o.ChunkSize; res.Bytes > limit {
		t.Fatalf("moved %d bytes for %d: more than the chunks in flight were re-sent", res.Bytes, len(data))
	}
	// The progress counts the file once: what failed attempts moved is
	// taken back.
	if got := rep.progress.Load(); got != int64(len(data)) {
		t.Errorf("progress %d bytes, want %d (moved %d)", got, len(data), res.Bytes)
	}
}

func TestCancel(t *testing.T) {
	src := startEndpoint(t, "", nil)
	trip := &tripwire{}
	dst := startEndpoint(t, "", func(d storage.Driver) storage.Driver { trip.Driver = d; return trip })
	writeFile(t, filepath.Join(src.root, "big"), random(64<<20))
	ctx, cancel := context.WithCancel(context.Background())
	trip.n.Store(1 << 20)
	trip.fn = cancel
	start := time.Now()
	_, err := engine.Copy(ctx, src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/big", Dst: "/big"}}, fastOptions(), nil)
	if err == nil {
		t.Fatal("a cancelled copy reported success")
	}
	if d := time.Since(start); d > 30*time.Second { // did not hang
		t.Fatalf("cancel took %v", d)
	}
}

// slowConn delays every write by its delay, and the banner too: a long
// round trip on loopback.
type slowConn struct {
	net.Conn
	delay  time.Duration
	banner *sync.Once
}

func newSlowConn(c net.Conn, delay time.Duration) slowConn {
	return slowConn{c, delay, new(sync.Once)}
}

func (c slowConn) Read(p []byte) (int, error) {
	c.banner.Do(func() { time.Sleep(c.delay) })
	return c.Conn.Read(p)
}

func (c slowConn) Write(p []byte) (int, error) {
	time.Sleep(c.delay)
	return c.Conn.Write(p)
}

// TestPredial: over a wide-area round trip a copy of a tree dials its
// session pairs while it plans; the transfers use them, and every session
// is closed when the copy ends, the pairs no transfer took included.
func TestPredial(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	for i := range 3 {
		writeFile(t, filepath.Join(src.root, "tree", fmt.Sprintf("f%d", i)), random(1000))
	}
	slow := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newSlowConn(c, 6*time.Millisecond), nil // a round trip past wideArea: a WAN to the engine
	}
	s, d := src.Endpoint, dst.Endpoint
	s.Dial, d.Dial = slow, slow
	src.cmds.take()
	o := fastOptions()
	o.InPlace = true // no finishers' pairs (to rename) among the logins counted
	res, err := engine.Copy(context.Background(), s, d, []engine.Item{{Src: "/tree", Dst: "/tree"}}, o, nil)
	if err != nil || res.Transferred != 3 || res.Settings.RTT < 5*time.Millisecond {
		t.Fatalf("%+v %v", res, err)
	}
	if logins := src.cmds.take()["PASS"]; logins != 1+8 {
		t.Errorf("%d logins at the source; want the planning pair's and 8 more dialed while planning", logins)
	}
	compareTrees(t, filepath.Join(src.root, "tree"), filepath.Join(dst.root, "tree"))
	deadline := time.Now().Add(5 * time.Second)
	for src.srv.Sessions() > 0 || dst.srv.Sessions() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sessions still open after the copy: %d at the source, %d at the destination", src.srv.Sessions(), dst.srv.Sessions())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stalling is a driver whose files, once, stop giving data from offset
// from on until released: the data path goes silent, but both sessions
// still answer.
type stalling struct {
	storage.Driver
	from    int64
	stalled atomic.Bool
	release chan struct{}
}

func (s *stalling) Open(ctx context.Context, name string) (storage.File, error) {
	f, err := s.Driver.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return &stallingFile{File: f, s: s}, nil
}

type stallingFile struct {
	storage.File
	s *stalling
}

func (f *stallingFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.s.from && f.s.stalled.CompareAndSwap(false, true) {
		<-f.s.release
	}
	return f.File.ReadAt(p, off)
}

// TestStalledTransferRetried: a transfer whose data stops moving while
// both servers answer (and would wait for an hour) is declared stalled
// after Options.StallTimeout, reported as a fault, and sent again from
// the ranges that arrived.
func TestStalledTransferRetried(t *testing.T) {
	data := random(8 << 20)
	stall := &stalling{from: int64(len(data) / 2), release: make(chan struct{})}
	src := &endpoint{root: t.TempDir(), fs: stall, dataTimeout: time.Hour}
	var err error
	if stall.Driver, err = posix.New(src.root); err != nil {
		t.Fatal(err)
	}
	src.start(t, "127.0.0.1:0")
	dst := &endpoint{root: t.TempDir(), dataTimeout: time.Hour}
	if dst.fs, err = posix.New(dst.root); err != nil {
		t.Fatal(err)
	}
	dst.start(t, "127.0.0.1:0")
	t.Cleanup(func() { close(stall.release) }) // before the servers close
	writeFile(t, filepath.Join(src.root, "big"), data)
	o := fastOptions()
	o.ChunkSize, o.Concurrency, o.Parallelism, o.StallTimeout = -1, 1, 1, time.Second
	rep := &recorder{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := engine.Copy(ctx, src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/big", Dst: "/big"}}, o, rep)
	if err != nil || res.Transferred != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dst.root, "big")); !bytes.Equal(got, data) {
		t.Fatal("file differs after the stall")
	}
	rep.mu.Lock()
	defer rep.mu.Unlock()
	stalled := false
	for _, f := range rep.faults {
		stalled = stalled || strings.Contains(f, client.ErrStalled.Error())
	}
	if !stalled {
		t.Fatalf("faults %q: none says the data channel stalled", rep.faults)
	}
}
