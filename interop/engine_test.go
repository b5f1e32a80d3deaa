//go:build interop

package interop

// The transfer engine (ferry/engine) driven in-process against real servers:
// ferry gridftp and globus-gridftp-server, in every source/destination
// combination, third-party (data flows server to server). Every copy is
// compared byte for byte with its source.

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ferry/engine"
	"ferry/gridftp/client"
	"ferry/internal/synclevel"
)

const engineMiB = 1 << 20

// shmFerry starts an anonymous ferry server whose root is in /dev/shm (when
// usable), so that large copies stay off the disk.
func shmFerry(t *testing.T) server {
	t.Helper()
	return startFerryConfig(t, ferryConfig{Root: bigTempDir(t), Anonymous: true})
}

// enginePairs are the source/destination combinations the engine must handle.
var enginePairs = []struct {
	name     string
	src, dst starter
}{
	{"ferry-to-ferry", shmFerry, shmFerry},
	{"gct-to-ferry", startGCT, shmFerry},
	{"ferry-to-gct", shmFerry, startGCT},
	{"gct-to-gct", startGCT, startGCT},
}

// epPath is the path the engine names rel by on srv: GCT takes absolute
// file names (its root + rel), ferry paths under its root starting with "/".
func epPath(srv server, rel string) string {
	rel = strings.TrimPrefix(rel, "/")
	if g, ok := srv.(*gctServer); ok {
		return path.Join(filepath.ToSlash(g.root), rel)
	}
	return "/" + rel
}

func endpointOf(srv server) engine.Endpoint { return engine.Endpoint{Addr: srv.Addr()} }

// engineOptions are options with quick retries, for tests.
func engineOptions() engine.Options {
	return engine.Options{Backoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
}

// engineRecorder is an engine.Reporter that keeps every outcome.
type engineRecorder struct {
	mu       sync.Mutex
	results  map[string]engine.FileResult // by destination path
	faults   []string
	planned  int
	progress atomic.Int64
}

func newEngineRecorder() *engineRecorder {
	return &engineRecorder{results: map[string]engine.FileResult{}}
}

func (r *engineRecorder) Planned(files int, _ int64) {
	r.mu.Lock()
	r.planned += files
	r.mu.Unlock()
}

func (r *engineRecorder) Progress(d int64) { r.progress.Add(d) }

func (r *engineRecorder) Fault(p string, err error, retry time.Duration) {
	r.mu.Lock()
	r.faults = append(r.faults, fmt.Sprintf("%s (retry in %v): %v", p, retry.Round(time.Millisecond), err))
	r.mu.Unlock()
}

func (r *engineRecorder) Done(f engine.FileResult) {
	r.mu.Lock()
	r.results[f.Dst] = f
	r.mu.Unlock()
}

// result returns the outcome recorded for a destination path.
func (r *engineRecorder) result(dst string) (engine.FileResult, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.results[dst]
	return f, ok
}

// outcomes lists the destination paths (relative to base) that ended with o.
func (r *engineRecorder) outcomes(base string, o engine.Outcome) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for dst, f := range r.results {
		if f.Outcome == o {
			out = append(out, strings.TrimPrefix(strings.TrimPrefix(dst, base), "/"))
		}
	}
	slices.Sort(out)
	return out
}

func (r *engineRecorder) faultLog() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.faults, "\n")
}

// copyResult is what engine.Copy returned.
type copyResult struct {
	res engine.Result
	err error
}

// copyInBackground runs engine.Copy between two servers; what it returns
// comes on the channel.
func copyInBackground(src, dst server, items []engine.Item, o engine.Options, rep engine.Reporter) <-chan copyResult {
	done := make(chan copyResult, 1)
	go func() {
		res, err := engine.Copy(context.Background(), endpointOf(src), endpointOf(dst), items, o, rep)
		done <- copyResult{res, err}
	}()
	return done
}

// runEngine runs engine.Copy between two servers with a time limit.
func runEngine(t *testing.T, src, dst server, items []engine.Item, o engine.Options, rep engine.Reporter) (engine.Result, error) {
	t.Helper()
	// Every copy here takes well under a second or two: a copy still running
	// at the limit has hung.
	const limit = 20 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	start := time.Now()
	res, err := engine.Copy(ctx, endpointOf(src), endpointOf(dst), items, o, rep)
	if time.Since(start) >= limit {
		t.Errorf("engine.Copy returned only when its context expired after %v (err %v): it hung", limit, err)
	}
	t.Logf("%s -> %s: %d files, %d transferred, %d skipped, %d failed, %d MiB moved, %d faults in %v (settings %+v)",
		src.Name(), dst.Name(), res.Files, res.Transferred, res.Skipped, res.Failed, res.Bytes>>20, res.Faults,
		time.Since(start).Round(time.Millisecond), res.Settings)
	return res, err
}

// checkClean fails unless the copy ended without error, fault or failure,
// having transferred want files.
func checkClean(t *testing.T, res engine.Result, err error, rec *engineRecorder, want int) {
	t.Helper()
	if err != nil {
		t.Fatalf("engine.Copy: %v\nfaults:\n%s", err, rec.faultLog())
	}
	for _, f := range res.FailedFiles {
		t.Errorf("failed: %s -> %s after %d attempts: %v", f.Src, f.Dst, f.Attempts, f.Err)
	}
	if res.Transferred != want || res.Failed != 0 || res.Faults != 0 || res.Files != want {
		t.Errorf("result: files %d, transferred %d, failed %d, faults %d; want %d, %d, 0, 0\nfaults:\n%s",
			res.Files, res.Transferred, res.Failed, res.Faults, want, want, rec.faultLog())
	}
}

// engineTreeFiles is the tree every engine pair copies, besides 200 small
// files in "many": empty files, eight levels of directories, names with
// spaces, files around block sizes.
var engineTreeFiles = []struct {
	rel  string
	size int64
}{
	{"empty.dat", 0},
	{"top.dat", 100 << 10},
	{"one MiB and a bit.dat", 1*engineMiB + 3},
	{"dir with space/file with space.dat", 256 << 10},
	{"dir with space/empty file.dat", 0},
	{"d1/d2/d3/d4/d5/d6/d7/d8/deep.dat", 65537},
	{"d1/d2/d3/d4/d5/d6/d7/d8/empty deep.dat", 0},
	{"d1/d2/d3/mid.dat", 1},
}

// unicodeTreeFiles have names beyond ASCII. GCT 13.24 drops every byte
// above 0x7f from the paths it reads on the control channel (globus-url-copy
// to GCT stores "naïve.txt" as "nave.txt" too), so with GCT at either end
// they get a test of their own (testEngineUnicode).
var unicodeTreeFiles = []struct {
	rel  string
	size int64
}{
	{"naïve ünï 文件.txt", 4321},
	{"ünï dir/文件 with space.txt", 777},
	{"ünï dir/empty ünï.txt", 0},
	{"ünï dir/plain.dat", 100},
}

// engineTreeEmptyDirs are directories with nothing in them.
var engineTreeEmptyDirs = []string{"empty dir", "d1/d2/d3/d4/d5/d6/d7/d8/d9 empty"}

const engineTreeSmall = 200

// makeEngineTree fills dir with the engine tree, with the non-ASCII names
// when unicode is set, and returns its file count.
func makeEngineTree(t testing.TB, dir string, unicode bool) int {
	t.Helper()
	for _, d := range engineTreeEmptyDirs {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, f := range engineTreeFiles {
		writeRandomFile(t, filepath.Join(dir, filepath.FromSlash(f.rel)), f.size)
		n++
	}
	if unicode {
		for _, f := range unicodeTreeFiles {
			writeRandomFile(t, filepath.Join(dir, filepath.FromSlash(f.rel)), f.size)
			n++
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "many"), 0o777); err != nil {
		t.Fatal(err)
	}
	makeManySmall(t, filepath.Join(dir, "many"), engineTreeSmall)
	return n + engineTreeSmall
}

// involvesGCT reports whether either server is GCT.
func involvesGCT(src, dst server) bool { return src.Name() == "gct" || dst.Name() == "gct" }

// TestEnginePairs copies a tree and a chunked, verified 64 MiB file
// between every combination of ferry and GCT servers.
func TestEnginePairs(t *testing.T) {
	needTools(t)
	for _, p := range enginePairs {
		t.Run(p.name, func(t *testing.T) {
			src, dst := p.src(t), p.dst(t)
			t.Run("tree", func(t *testing.T) { testEngineTree(t, src, dst) })
			t.Run("unicode-names", func(t *testing.T) { testEngineUnicode(t, src, dst) })
			t.Run("chunked-verified", func(t *testing.T) { testEngineChunked(t, src, dst) })
		})
	}
}

// testEngineTree: a recursive copy of the engine tree, unverified (so that
// only the transfer itself keeps the bytes intact).
func testEngineTree(t *testing.T, src, dst server) {
	n := makeEngineTree(t, src.Path("tree"), !involvesGCT(src, dst))
	rec := newEngineRecorder()
	o := engineOptions()
	o.Recursive = true
	res, err := runEngine(t, src, dst, []engine.Item{{Src: epPath(src, "tree"), Dst: epPath(dst, "copied/tree")}}, o, rec)
	checkClean(t, res, err, rec, n)
	if err := compareTrees(src.Path("tree"), dst.Path("copied/tree")); err != nil {
		t.Fatal(err)
	}
}

// testEngineUnicode: a tree with non-ASCII names next to ASCII ones. Between
// ferry servers everything arrives. A server that cannot reach such a path
// (GCT) must cost only those files: the run goes on, the other files
// arrive, and a file counts as transferred only if it is at the destination
// under its own name with its own bytes; the others are reported failed
// (the file, or the directory that could not be listed).
func testEngineUnicode(t *testing.T, src, dst server) {
	for _, f := range unicodeTreeFiles {
		writeRandomFile(t, src.Path("uni/"+f.rel), f.size)
	}
	writeRandomFile(t, src.Path("uni/ascii.dat"), 5000)
	writeRandomFile(t, src.Path("uni/ascii dir/inner.dat"), 6000)
	all := []string{"ascii.dat", "ascii dir/inner.dat"}
	for _, f := range unicodeTreeFiles {
		all = append(all, f.rel)
	}
	rec := newEngineRecorder()
	o := engineOptions()
	o.Recursive = true
	base := epPath(dst, "uni")
	res, err := runEngine(t, src, dst, []engine.Item{{Src: epPath(src, "uni"), Dst: base}}, o, rec)
	if err != nil {
		t.Fatalf("engine.Copy: %v (a path one server cannot reach should fail alone, not the run)", err)
	}
	if !involvesGCT(src, dst) {
		checkClean(t, res, err, rec, len(all))
		if err := compareTrees(src.Path("uni"), dst.Path("uni")); err != nil {
			t.Fatal(err)
		}
		return
	}
	failed := func(rel string) bool {
		for _, f := range res.FailedFiles {
			fs := strings.TrimPrefix(strings.TrimPrefix(f.Src, epPath(src, "uni")), "/")
			if fs == rel || strings.HasPrefix(rel, fs+"/") {
				return true
			}
		}
		return false
	}
	for _, rel := range all {
		arrived := compareFiles(src.Path("uni/"+rel), dst.Path("uni/"+rel)) == nil
		r, reported := rec.result(path.Join(base, rel))
		switch {
		case strings.HasPrefix(rel, "ascii") && !arrived:
			t.Errorf("%s (ASCII name) did not arrive: %v", rel, compareFiles(src.Path("uni/"+rel), dst.Path("uni/"+rel)))
		case reported && r.Outcome == engine.Transferred && !arrived:
			t.Errorf("%s reported transferred, but it is not at the destination under that name", rel)
		case !arrived && !failed(rel):
			t.Errorf("%s neither arrived nor was reported failed", rel)
		}
	}
	if got, _ := listTree(dst.Path("uni")); len(got) > 0 {
		t.Logf("destination holds %q", sortedKeys(got))
	}
}

// testEngineChunked: one 64 MiB file in 8 MiB chunks (ERET P / ESTO A),
// each chunk verified with a ranged CKSM at both ends. With GCT at either
// end the algorithm must be one GCT computes (MD5 comes first); between
// two ferry servers the fast XXH128. Then the same over a longer copy.
func testEngineChunked(t *testing.T, src, dst server) {
	const size, chunk = 64 * engineMiB, 8 * engineMiB
	writeRandomFile(t, src.Path("big.dat"), size)
	rec := newEngineRecorder()
	o := engineOptions()
	o.ChunkSize, o.Verify = chunk, true
	dstPath := epPath(dst, "big copy.dat")
	res, err := runEngine(t, src, dst, []engine.Item{{Src: epPath(src, "big.dat"), Dst: dstPath}}, o, rec)
	checkClean(t, res, err, rec, 1)
	if err := compareFiles(src.Path("big.dat"), dst.Path("big copy.dat")); err != nil {
		t.Fatal(err)
	}
	wantAlg := "XXH128"
	if involvesGCT(src, dst) {
		wantAlg = "MD5"
	}
	if res.Settings.Algorithm != wantAlg {
		t.Errorf("checksum algorithm %q, want %q", res.Settings.Algorithm, wantAlg)
	}
	if res.Settings.ChunkSize != chunk {
		t.Errorf("chunk size %d, want %d", res.Settings.ChunkSize, chunk)
	}
	f, ok := rec.result(dstPath)
	switch {
	case !ok:
		t.Errorf("no outcome reported for %s", dstPath)
	case f.Checksum != wantAlg+":chunks":
		t.Errorf("file checksum %q, want %q (every chunk verified)", f.Checksum, wantAlg+":chunks")
	}
	if res.Bytes != size {
		t.Errorf("moved %d bytes, want exactly %d (no re-sends)", res.Bytes, size)
	}

	// Again over a longer copy: chunks never shorten a file, so the engine
	// must cut it (SITE TRNC, which GCT has).
	appendToFile(t, dst.Path("big copy.dat"), make([]byte, 3*engineMiB+5))
	rec = newEngineRecorder()
	res, err = runEngine(t, src, dst, []engine.Item{{Src: epPath(src, "big.dat"), Dst: dstPath}}, o, rec)
	checkClean(t, res, err, rec, 1)
	if err := compareFiles(src.Path("big.dat"), dst.Path("big copy.dat")); err != nil {
		t.Fatalf("over a longer file: %v", err)
	}
}

// TestEngineSyncLevelsToGCT: with GCT as the destination, each sync level
// re-sends exactly the files it should and leaves the others untouched.
// TestGCTPipelinedLogin: GCT reads commands from a queue, so the client's
// login (USER, PASS, TYPE I and FEAT sent at once) works there, and a
// refused one still says so.
func TestGCTPipelinedLogin(t *testing.T) {
	needTools(t)
	srv := startGCT(t)
	ctx := context.Background()
	for _, tc := range []struct {
		user, bad string
	}{
		{"anonymous", ""},
		{"alice", "login: 530 Login incorrect."},
	} {
		t.Run(tc.user, func(t *testing.T) {
			c, err := client.Dial(ctx, srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = c.Login(ctx, tc.user, "wrong@")
			if tc.bad != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.bad) {
					t.Fatalf("login error %v, want one starting %q", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(c.Checksums(), "MD5") {
				t.Errorf("FEAT not read: checksums %v", c.Checksums())
			}
			if _, err := c.Stat(ctx, epPath(srv, "")); err != nil {
				t.Errorf("a command after the login: %v", err)
			}
		})
	}
}

func TestEngineSyncLevelsToGCT(t *testing.T) {
	needTools(t)
	src, dst := shmFerry(t), startGCT(t)
	// same: identical. gone: deleted at the destination. grown: longer at
	// the destination. flipped: same size, one byte differs. stale:
	// identical bytes, but older at the destination. No level skips a file
	// of another size than its source's (grown).
	names := []string{"flipped.dat", "gone.dat", "grown.dat", "same.dat", "stale.dat"}
	t0 := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, n := range names {
		writeRandomFile(t, src.Path("sync/"+n), 64<<10+int64(len(n)))
	}
	setTreeMtime(t, src.Path("sync"), t0)

	levels := []struct {
		level synclevel.Level
		name  string
		sent  []string
	}{
		{synclevel.Exists, "exists", []string{"gone.dat", "grown.dat"}},
		{synclevel.Size, "size", []string{"gone.dat", "grown.dat"}},
		{synclevel.Mtime, "mtime", []string{"gone.dat", "grown.dat", "stale.dat"}},
		{synclevel.Checksum, "checksum", []string{"flipped.dat", "gone.dat", "grown.dat"}},
	}
	for _, l := range levels {
		t.Run(l.name, func(t *testing.T) {
			item := []engine.Item{{Src: epPath(src, "sync"), Dst: epPath(dst, l.name)}}
			o := engineOptions()
			o.Recursive = true
			rec := newEngineRecorder()
			res, err := runEngine(t, src, dst, item, o, rec)
			checkClean(t, res, err, rec, len(names))

			// Files written by GCT belong to its user (nobody): change them in
			// place so that they stay its own.
			d := func(n string) string { return dst.Path(l.name + "/" + n) }
			if err := os.Remove(d("gone.dat")); err != nil {
				t.Fatal(err)
			}
			appendToFile(t, d("grown.dat"), []byte("more"))
			flipByte(t, d("flipped.dat"), 1000)
			for _, n := range names {
				if n != "gone.dat" {
					setFileMtime(t, d(n), t0)
				}
			}
			setFileMtime(t, d("stale.dat"), t0.Add(-time.Hour))

			o.SyncLevel = l.level
			rec = newEngineRecorder()
			res, err = runEngine(t, src, dst, item, o, rec)
			if err != nil {
				t.Fatalf("sync: %v", err)
			}
			if res.Files != len(names) || res.Transferred != len(l.sent) || res.Skipped != len(names)-len(l.sent) ||
				res.Failed != 0 || res.Faults != 0 {
				t.Errorf("sync result: files %d, transferred %d, skipped %d, failed %d, faults %d; want %d, %d, %d, 0, 0",
					res.Files, res.Transferred, res.Skipped, res.Failed, res.Faults, len(names), len(l.sent), len(names)-len(l.sent))
			}
			base := epPath(dst, l.name)
			if got := rec.outcomes(base, engine.Transferred); !slices.Equal(got, l.sent) {
				t.Errorf("re-sent %q, want %q", got, l.sent)
			}
			for _, n := range names {
				sent := slices.Contains(l.sent, n)
				err := compareFiles(src.Path("sync/"+n), d(n))
				switch {
				case sent && err != nil:
					t.Errorf("%s was re-sent but differs: %v", n, err)
				case !sent && (n == "grown.dat" || n == "flipped.dat") && err == nil:
					t.Errorf("%s was skipped but no longer holds the destination's own bytes", n)
				case !sent && (n == "same.dat" || n == "stale.dat") && err != nil:
					t.Errorf("%s: %v", n, err)
				}
				st, err := os.Stat(d(n))
				if err != nil {
					t.Fatal(err)
				}
				if rewritten := !st.ModTime().Before(t0.Add(time.Second)); rewritten != sent {
					t.Errorf("%s: rewritten=%v (mtime %v), want %v", n, rewritten, st.ModTime(), sent)
				}
			}
		})
	}
}

func appendToFile(t testing.TB, p string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// flipByte inverts the byte at off in place (the file keeps its owner).
func flipByte(t testing.TB, p string, off int64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func setFileMtime(t testing.TB, p string, mt time.Time) {
	t.Helper()
	if err := os.Chtimes(p, mt, mt); err != nil {
		t.Fatal(err)
	}
}

// TestEnginePreserveMtime: PreserveMtime gives copies (whole and chunked)
// the source's modification time, with GCT and with ferry as destination.
func TestEnginePreserveMtime(t *testing.T) {
	needTools(t)
	pairs := []struct {
		name     string
		src, dst starter
	}{
		{"ferry-to-gct", shmFerry, startGCT},
		{"gct-to-ferry", startGCT, shmFerry},
	}
	files := []struct {
		rel   string
		size  int64
		mtime time.Time
	}{
		{"small.dat", 10 << 10, time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)},
		{"empty.dat", 0, time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC)},
		{"sub dir/inner file.dat", 3 << 10, time.Date(2010, 6, 7, 8, 9, 10, 0, time.UTC)},
		{"chunked.dat", 20 * engineMiB, time.Date(2015, 1, 1, 0, 0, 1, 0, time.UTC)},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			src, dst := p.src(t), p.dst(t)
			for _, f := range files {
				writeRandomFile(t, src.Path("m/"+f.rel), f.size)
				setFileMtime(t, src.Path("m/"+f.rel), f.mtime)
			}
			o := engineOptions()
			o.Recursive, o.PreserveMtime, o.ChunkSize = true, true, 4*engineMiB
			rec := newEngineRecorder()
			res, err := runEngine(t, src, dst, []engine.Item{{Src: epPath(src, "m"), Dst: epPath(dst, "m")}}, o, rec)
			checkClean(t, res, err, rec, len(files))
			if err := compareTrees(src.Path("m"), dst.Path("m")); err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				st, err := os.Stat(dst.Path("m/" + f.rel))
				if err != nil {
					t.Fatal(err)
				}
				if !st.ModTime().Equal(f.mtime) {
					t.Errorf("%s: mtime %v, want %v", f.rel, st.ModTime().UTC(), f.mtime)
				}
			}
		})
	}
}

// TestEnginePreserveMtimeGCTForeignFile: GCT serves anonymous sessions as
// nobody, which may overwrite a world-writable file another user owns but
// may not set its times (utime: EPERM, "550 ... Operation not permitted").
// Written under a temporary name (nobody's own), whose mtime is set before
// it is renamed over the foreign file, the file arrives with its mtime.
// Written in place (InPlace), the data must still arrive intact, the file
// must be reported failed with the reason (the mtime was asked for and not
// set), and the engine must not re-send it over and over.
func TestEnginePreserveMtimeGCTForeignFile(t *testing.T) {
	needTools(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: GCT then runs as nobody and the test's files belong to root")
	}
	src, dst := shmFerry(t), startGCT(t)
	mt := time.Date(2003, 4, 5, 6, 7, 8, 0, time.UTC)
	writeRandomFile(t, src.Path("f.dat"), 100<<10)
	setFileMtime(t, src.Path("f.dat"), mt)
	for _, inPlace := range []bool{false, true} {
		t.Run(fmt.Sprint("in place ", inPlace), func(t *testing.T) {
			os.Remove(dst.Path("f.dat"))                                              // nobody's after a rename
			writeFile(t, dst.Path("f.dat"), []byte("owned by root, writable by all")) // 0666
			o := engineOptions()
			o.PreserveMtime, o.InPlace = true, inPlace
			rec := newEngineRecorder()
			res, err := runEngine(t, src, dst, []engine.Item{{Src: epPath(src, "f.dat"), Dst: epPath(dst, "f.dat")}}, o, rec)
			if err != nil {
				t.Fatal(err)
			}
			if err := compareFiles(src.Path("f.dat"), dst.Path("f.dat")); err != nil {
				t.Errorf("data: %v", err)
			}
			if !inPlace {
				if st, err := os.Stat(dst.Path("f.dat")); res.Transferred != 1 || err != nil || !st.ModTime().Equal(mt) {
					t.Fatalf("transferred %d, failed %d (%v); want the file transferred with its mtime", res.Transferred, res.Failed, err)
				}
				return
			}
			if res.Failed != 1 || res.Transferred != 0 {
				t.Fatalf("transferred %d, failed %d; want the file failed (its mtime could not be set)", res.Transferred, res.Failed)
			}
			f := res.FailedFiles[0]
			if f.Err == nil || !strings.Contains(f.Err.Error(), "mtime") {
				t.Errorf("error %v, want one naming the mtime", f.Err)
			}
			if f.Attempts != 1 || res.Bytes != 100<<10 {
				t.Errorf("%d attempts, %d bytes moved: want 1 and %d (a permission error is not retried)", f.Attempts, res.Bytes, 100<<10)
			}
		})
	}
}

// TestEngineRestart: a 512 MiB file copied in 32 MiB verified chunks; the
// destination (ferry) is killed with SIGKILL once half of it has arrived and
// started again on the same port and tree. The copy must end correct,
// having seen faults, and must not have sent the file again: chunks that
// arrived are kept, so fewer than four chunks' worth may go twice (those
// in flight at the kill).
func TestEngineRestart(t *testing.T) {
	needTools(t)
	t.Run("ferry-to-ferry", func(t *testing.T) {
		src := startFerryConfig(t, ferryConfig{Root: bigTempDir(t), Anonymous: true})
		dst := startFerryConfig(t, ferryConfig{Root: bigTempDir(t), Anonymous: true})
		testEngineRestart(t, src, dst)
	})
	t.Run("gct-to-ferry", func(t *testing.T) {
		src := startGCTServer(t)
		dst := startFerryConfig(t, ferryConfig{Root: bigTempDir(t), Anonymous: true})
		testEngineRestart(t, src, dst)
	})
}

func testEngineRestart(t *testing.T, src server, dst restartable) {
	const size, chunk = 512 * engineMiB, 32 * engineMiB
	writeRandomFile(t, src.Path("big.dat"), size)
	o := engineOptions()
	o.ChunkSize, o.Verify = chunk, true
	o.Deadline = time.Now().Add(30 * time.Second) // retry until then (the copy takes a few seconds)
	rec := newEngineRecorder()

	start := time.Now()
	done := copyInBackground(src, dst, []engine.Item{{Src: epPath(src, "big.dat"), Dst: epPath(dst, "big.dat")}}, o, rec)

	root := dst.Path("")
	deadline := time.Now().Add(60 * time.Second)
	for dirAllocated(root) < size/2 {
		select {
		case r := <-done:
			t.Fatalf("copy ended before the destination could be killed (restart not exercised): %+v, %v", r.res, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d MiB arrived in %s within 60s", dirAllocated(root)>>20, root)
		}
		time.Sleep(2 * time.Millisecond)
	}
	dst.kill9()
	t.Logf("killed %s after %v with %d MiB written", dst.Name(), time.Since(start).Round(time.Millisecond), dirAllocated(root)>>20)
	time.Sleep(200 * time.Millisecond) // let the engine notice and retry against a dead port
	dst.restart()

	var r copyResult
	select {
	case r = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("copy did not end within 90s of the restart")
	}
	res := r.res
	t.Logf("copy ended after %v: transferred %d, failed %d, faults %d, %d MiB moved, settings %+v",
		time.Since(start).Round(time.Millisecond), res.Transferred, res.Failed, res.Faults, res.Bytes>>20, res.Settings)
	defer func() {
		if t.Failed() {
			t.Logf("faults:\n%s", rec.faultLog())
		}
	}()
	if r.err != nil {
		t.Fatalf("engine.Copy: %v", r.err)
	}
	for _, f := range res.FailedFiles {
		t.Errorf("failed: %s after %d attempts: %v", f.Src, f.Attempts, f.Err)
	}
	if res.Transferred != 1 || res.Failed != 0 {
		t.Errorf("transferred %d, failed %d; want 1, 0", res.Transferred, res.Failed)
	}
	if res.Faults == 0 {
		t.Errorf("no faults counted although the destination was killed")
	}
	if res.Bytes >= size+4*chunk {
		t.Errorf("moved %d MiB for a %d MiB file: more than the chunks in flight were sent again", res.Bytes>>20, size>>20)
	}
	if err := compareFiles(src.Path("big.dat"), dst.Path("big.dat")); err != nil {
		t.Fatal(err)
	}
	f, _ := rec.result(epPath(dst, "big.dat"))
	if want := res.Settings.Algorithm + ":chunks"; f.Checksum != want {
		t.Errorf("file checksum %q, want %q (every chunk verified)", f.Checksum, want)
	}
}
