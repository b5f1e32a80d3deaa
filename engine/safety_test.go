package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"ferry/engine"
	"ferry/gridftp"
	"ferry/internal/partname"
	"ferry/internal/synclevel"
	"ferry/storage"
)

// TestSourceNeverDestroyed runs copies whose destination is, or overlaps,
// their own source: on one endpoint, on two servers of one root, on a
// server whose root lies inside the other's, through hard links and
// through symlinks in the destination's path. No source byte may change,
// and every such file fails with a clear error. Deleting extras, a
// destination that holds the source is refused: its other entries are
// the source's neighbours.
func TestSourceNeverDestroyed(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "proj"), 0o755)
	a := startEndpoint(t, root, nil)
	b := startEndpoint(t, root, nil)                            // a second server of the same root
	inner := startEndpoint(t, filepath.Join(root, "proj"), nil) // a root inside a's

	files := map[string][]byte{
		"proj/README.txt":  []byte("read me, do not truncate me"),
		"proj/data/x.bin":  random(300_000),
		"proj/data/y.bin":  random(1000),
		"proj/b/b/f.txt":   []byte("inner f"),
		"proj/b/f.txt":     []byte("outer f"),
		"loop/a.txt":       []byte("a"),
		"loop/sub/b.txt":   []byte("b"),
		"proj/hardlink.in": []byte("linked"),
		"proj/b/linked":    []byte("linked into the destination"),
	}
	reset := func(t *testing.T) {
		t.Helper()
		os.RemoveAll(filepath.Join(root, "loop"))
		entries, _ := os.ReadDir(filepath.Join(root, "proj")) // inner's root stays
		for _, e := range entries {
			os.RemoveAll(filepath.Join(root, "proj", e.Name()))
		}
		for rel, data := range files {
			writeFile(t, filepath.Join(root, rel), data)
		}
		if err := os.Link(filepath.Join(root, "proj/hardlink.in"), filepath.Join(root, "proj/hardlink.out")); err != nil {
			t.Fatal(err)
		}
		// A source file of /proj/b with another name where /proj/b's copy lands.
		if err := os.Link(filepath.Join(root, "proj/b/linked"), filepath.Join(root, "proj/linked")); err != nil {
			t.Fatal(err)
		}
		// Symlinks that lead into a source (relative, as the root confines them).
		for link, target := range map[string]string{"looplink": "loop/sub", "projlink": "proj", "deep/link": "../loop", "deep/twice": "../looplink"} {
			os.Remove(filepath.Join(root, link))
			os.MkdirAll(filepath.Dir(filepath.Join(root, link)), 0o755)
			if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
				t.Fatal(err)
			}
		}
	}
	intact := func(t *testing.T) {
		t.Helper()
		for rel, data := range files {
			got, err := os.ReadFile(filepath.Join(root, rel))
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("source %s changed: %d bytes, want %d (%v)", rel, len(got), len(data), err)
			}
		}
	}
	for _, tc := range []struct {
		name      string
		src, dst  *endpoint
		item      engine.Item
		level     synclevel.Level
		delete    bool     // Options.DeleteExtra
		wantFail  []string // source paths that must fail as "the same file"
		wantFiles int      // transferred
		wantErr   string   // the copy is refused as a whole
	}{
		{"same file, one endpoint", a, a, engine.Item{Src: "/proj/README.txt", Dst: "/proj/README.txt"}, synclevel.None,
			false, nil, 0, "destination /proj/README.txt: is the source /proj/README.txt itself"},
		{"same file, two servers of one root", a, b, engine.Item{Src: "/proj/README.txt", Dst: "/proj/README.txt"}, synclevel.None,
			false, nil, 0, "destination /proj/README.txt: is the source /proj/README.txt itself"},
		{"same file, a root inside the other", a, inner, engine.Item{Src: "/proj/README.txt", Dst: "/README.txt"}, synclevel.None,
			false, nil, 0, "destination /README.txt: is the source /proj/README.txt itself"},
		{"same file into its own directory", a, a, engine.Item{Src: "/proj/README.txt", Dst: "/proj/"}, synclevel.None,
			false, nil, 0, "destination /proj/README.txt: is the source /proj/README.txt itself"},
		{"hard link", a, a, engine.Item{Src: "/proj/hardlink.in", Dst: "/proj/hardlink.out"}, synclevel.None,
			false, nil, 0, "destination /proj/hardlink.out: is the source /proj/hardlink.in itself"},
		{"same tree, recursive", a, b, engine.Item{Src: "/proj/data", Dst: "/proj/data", Recursive: true}, synclevel.None,
			false, nil, 0, "destination /proj/data: is the source /proj/data itself"},
		{"same tree, size sync", a, inner, engine.Item{Src: "/proj/data", Dst: "/data", Recursive: true}, synclevel.Size,
			false, nil, 0, "destination /data: is the source /proj/data itself"},
		{"destination above the source", a, a, engine.Item{Src: "/proj/b", Dst: "/proj", Recursive: true}, synclevel.None,
			false, []string{"/proj/b/b/f.txt", "/proj/b/linked"}, 1, ""},
		{"destination above the source, with a slash", a, a, engine.Item{Src: "/proj/b", Dst: "/proj/", Recursive: true}, synclevel.None,
			false, []string{"/proj/b/b/f.txt", "/proj/b/linked"}, 1, ""},
		{"destination inside the source", a, a, engine.Item{Src: "/loop", Dst: "/loop/inner", Recursive: true}, synclevel.None,
			false, nil, 0, "destination /loop/inner: is inside the source /loop"},
		{"destination inside the source, on another server", a, inner, engine.Item{Src: "/proj/data", Dst: "/data/new", Recursive: true}, synclevel.None,
			false, nil, 0, "destination /data/new: is inside the source /proj/data"},
		{"destination inside the source through a symlink", a, a, engine.Item{Src: "/loop", Dst: "/looplink/x", Recursive: true}, synclevel.None,
			false, nil, 0, "destination /looplink/x: is inside the source /loop (through a symlink, it is /loop/sub/x)"},
		{"destination inside the source through a symlink, on another server", a, b, engine.Item{Src: "/loop", Dst: "/looplink/x/y", Recursive: true}, synclevel.None,
			false, nil, 0, "destination /looplink/x/y: is inside the source /loop (through a symlink, it is /loop/sub/x/y)"},
		{"destination a symlink into the source", a, a, engine.Item{Src: "/loop", Dst: "/looplink", Recursive: true}, synclevel.Size,
			false, nil, 0, "destination /looplink: is inside the source /loop (through a symlink, it is /loop/sub)"},
		{"destination the source through a symlink up", a, a, engine.Item{Src: "/loop", Dst: "/deep/link", Recursive: true}, synclevel.None,
			false, nil, 0, "destination /deep/link: is the source /loop itself (through a symlink, it is /loop)"},
		{"destination inside the source through two symlinks", a, a, engine.Item{Src: "/loop", Dst: "/deep/twice/x", Recursive: true}, synclevel.None,
			false, nil, 0, "destination /deep/twice/x: is inside the source /loop (through a symlink, it is /loop/sub/x)"},
		{"destination holds the source, deleting extras", a, a, engine.Item{Src: "/proj/b", Dst: "/proj", Recursive: true}, synclevel.None,
			true, nil, 0, "destination /proj: holds the source /proj/b: deleting its extra entries would delete what lies beside the source"},
		{"destination holds the source through a symlink, deleting extras", a, b, engine.Item{Src: "/proj/b/b", Dst: "/projlink/", Recursive: true}, synclevel.None,
			true, nil, 0, "destination /projlink/: holds the source /proj/b/b: deleting its extra entries would delete what lies beside the source (through a symlink, it is /proj)"},
		{"destination holds the source on another server, deleting extras", a, inner, engine.Item{Src: "/proj/b", Dst: "/", Recursive: true}, synclevel.None,
			true, nil, 0, "destination /: holds the source /proj/b: deleting its extra entries would delete what lies beside the source"},
		{"missing source", a, b, engine.Item{Src: "/proj/nothere", Dst: "/x"}, synclevel.None,
			false, nil, 0, "source /proj/nothere: no such file or directory"},
		{"a directory, not recursive", a, b, engine.Item{Src: "/proj/data", Dst: "/x"}, synclevel.None,
			false, nil, 0, "source /proj/data: is a directory: transfer it recursively"},
		{"a file where a directory is needed", a, b, engine.Item{Src: "/proj/data", Dst: "/proj/README.txt", Recursive: true}, synclevel.None,
			false, nil, 0, "destination /proj/README.txt: is a file; a directory is needed there"},
		{"a file above the destination", a, b, engine.Item{Src: "/loop/a.txt", Dst: "/proj/README.txt/a.txt"}, synclevel.None,
			false, nil, 0, "destination /proj/README.txt: is a file; a directory is needed there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reset(t)
			o := fastOptions()
			o.Recursive = false
			o.SyncLevel = tc.level
			o.DeleteExtra = tc.delete
			rep := &recorder{}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := engine.Copy(ctx, tc.src.Endpoint, tc.dst.Endpoint, []engine.Item{tc.item}, o, rep)
			intact(t)
			if tc.wantErr != "" {
				var ie *engine.ItemError
				if !errors.As(err, &ie) || err.Error() != tc.wantErr {
					t.Fatalf("copy: %v, want %q", err, tc.wantErr)
				}
				// What a submission checks says the same.
				if err := engine.Check(ctx, tc.src.Endpoint, tc.dst.Endpoint, []engine.Item{tc.item}, o); err == nil || err.Error() != tc.wantErr {
					t.Errorf("check: %v, want %q", err, tc.wantErr)
				}
				intact(t)
				return
			}
			if err := engine.Check(ctx, tc.src.Endpoint, tc.dst.Endpoint, []engine.Item{tc.item}, o); err != nil {
				t.Errorf("check: %v", err)
			}
			if err != nil {
				t.Fatalf("copy: %v (%+v)", err, res)
			}
			for _, p := range tc.wantFail {
				r, ok := rep.done[p]
				if !ok || r.Outcome != engine.Failed || !strings.Contains(r.Err.Error(), "the same file") {
					t.Errorf("%s: %+v, want a failure naming the same file", p, r)
				}
				if r.Attempts > 1 {
					t.Errorf("%s: %d attempts; the same file is not worth a retry", p, r.Attempts)
				}
			}
			if res.Transferred != tc.wantFiles || res.Failed != len(tc.wantFail) {
				t.Errorf("%d transferred, %d failed; want %d and %d (%+v)", res.Transferred, res.Failed, tc.wantFiles, len(tc.wantFail), res)
			}
		})
	}
}

// TestListBeforeWriting copies a tree into itself on servers that give
// no Unique fact and cannot be told apart: the refusal cannot see it, so
// the listing must come first and the copy end with the tree as listed.
func TestListBeforeWriting(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "loop/a.txt"), []byte("a"))
	writeFile(t, filepath.Join(root, "loop/sub/b.txt"), []byte("b"))
	a := startEndpoint(t, root, func(d storage.Driver) storage.Driver { return noIDs{d} })
	b := startEndpoint(t, root, func(d storage.Driver) storage.Driver { return noIDs{d} })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := engine.Copy(ctx, a.Endpoint, b.Endpoint, []engine.Item{{Src: "/loop", Dst: "/loop/inner", Recursive: true}}, fastOptions(), nil)
	if err != nil || res.Transferred != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	for _, rel := range []string{"loop/inner/a.txt", "loop/inner/sub/b.txt"} {
		if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
			t.Errorf("%s: %v", rel, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "loop/inner/inner")); err == nil {
		t.Error("the copy into its own tree recursed")
	}
}

// noIDs is a driver that does not know its objects' identities.
type noIDs struct{ storage.Driver }

func (d noIDs) Stat(ctx context.Context, name string) (storage.Info, error) {
	i, err := d.Driver.Stat(ctx, name)
	i.ID = ""
	return i, err
}

func (d noIDs) ReadDir(ctx context.Context, name string) ([]storage.Info, error) {
	is, err := d.Driver.ReadDir(ctx, name)
	for k := range is {
		is[k].ID = ""
	}
	return is, err
}

// partials is a recorder that also keeps what Partial said last of each file.
type partials struct {
	recorder
	last map[string]engine.Partial
}

func (p *partials) Partial(src string, pt engine.Partial) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last = map[string]engine.Partial{}
	}
	p.last[src] = pt
}

// TestResume copies again after an interrupted run: a whole copy at the
// destination is compared by checksum, not sent; a partial one, under its
// temporary name, restarts from the ranges the earlier run reported,
// chunked or not; a report of a source that changed since is not trusted.
func TestResume(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	whole, torn, fresh := random(300_000), random(200_000), random(1000)
	big := random(8 << 20)
	writeFile(t, filepath.Join(src.root, "d/whole"), whole)
	writeFile(t, filepath.Join(src.root, "d/torn"), torn)
	writeFile(t, filepath.Join(src.root, "d/fresh"), fresh)
	writeFile(t, filepath.Join(src.root, "d/big"), big)
	writeFile(t, filepath.Join(src.root, "d/changed"), big[:1<<20])
	st, _ := os.Stat(filepath.Join(src.root, "d/big"))
	ch, _ := os.Stat(filepath.Join(src.root, "d/changed"))
	for _, chunk := range []int64{-1, 1 << 20} {
		t.Run(fmt.Sprintf("chunks %d", chunk), func(t *testing.T) {
			os.RemoveAll(filepath.Join(dst.root, "d"))
			writeFile(t, filepath.Join(dst.root, "d/whole"), whole)
			bad := append([]byte(nil), torn...)
			bad[150_000] ^= 1
			writeFile(t, filepath.Join(dst.root, "d/torn"), bad) // same size, one byte wrong
			half := append(append([]byte(nil), big[:4<<20]...), make([]byte, 4<<20)...)
			writeFile(t, filepath.Join(dst.root, partname.For("d/big")), half) // the first half arrived
			writeFile(t, filepath.Join(dst.root, partname.For("d/changed")), make([]byte, 1<<20))
			var have gridftp.Ranges
			have.Add(0, 4<<20)
			o := fastOptions()
			o.ChunkSize, o.Resume = chunk, true
			o.Restart = func(p string) (engine.Partial, bool) {
				switch p {
				case "/d/big":
					return engine.Partial{Size: st.Size(), Modify: st.ModTime().UTC().Truncate(time.Second), Have: have}, true
				case "/d/changed": // reported of an older version of the file
					return engine.Partial{Size: ch.Size(), Modify: ch.ModTime().Add(-time.Hour).UTC().Truncate(time.Second), Have: have}, true
				}
				return engine.Partial{}, false
			}
			src.cmds.take()
			rep := &partials{}
			res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/d", Dst: "/d", Recursive: true}}, o, rep)
			if err != nil || res.Transferred != 5 || res.Failed != 0 {
				t.Fatalf("%+v %v", res, err)
			}
			compareTrees(t, filepath.Join(src.root, "d"), filepath.Join(dst.root, "d"))
			if r := rep.done["/d/whole"]; r.Outcome != engine.Transferred || r.Checksum == "" {
				t.Errorf("whole copy: %+v, want transferred with its checksum", r)
			}
			if want := int64(len(torn)+len(fresh)+4<<20) + int64(len(big[:1<<20])); res.Bytes != want {
				t.Errorf("moved %d bytes, want %d: the whole copy and the half that arrived go again", res.Bytes, want)
			}
			if got := rep.progress.Load(); got != res.Bytes {
				t.Errorf("progress %d, moved %d", got, res.Bytes)
			}
			if n := src.cmds.take(); n["RETR"]+n["ERET"] == 0 {
				t.Error("nothing retrieved")
			}
		})
	}
}

// TestPartialsReported: a chunked copy reports each finished chunk.
func TestPartialsReported(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	writeFile(t, filepath.Join(src.root, "big"), random(8<<20))
	o := fastOptions()
	o.ChunkSize, o.Concurrency = 1<<20, 1
	rep := &partials{}
	if _, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/big", Dst: "/big"}}, o, rep); err != nil {
		t.Fatal(err)
	}
	if p := rep.last["/big"]; p.Size != 8<<20 || p.Have.Total() != 7<<20 {
		t.Errorf("last partial %+v (%d bytes); want 7 of the 8 chunks", p, p.Have.Total())
	}
}

// quota is a destination driver that holds at most limit bytes: writes
// beyond it fail as a full disk does.
type quota struct {
	storage.Driver
	limit, used atomic.Int64
}

func (q *quota) Create(ctx context.Context, name string, flag storage.OpenFlag) (storage.File, error) {
	f, err := q.Driver.Create(ctx, name, flag)
	if err != nil {
		return nil, err
	}
	return &quotaFile{File: f, q: q}, nil
}

type quotaFile struct {
	storage.File
	q *quota
}

func (f *quotaFile) WriteAt(p []byte, off int64) (int, error) {
	if f.q.used.Add(int64(len(p))) > f.q.limit.Load() {
		f.q.used.Add(-int64(len(p)))
		return 0, syscall.ENOSPC
	}
	return f.File.WriteAt(p, off)
}

// TestDestinationFull: a copy into a destination that fills up stops at
// once with ErrNoSpace, instead of retrying every file, and leaves no
// partial file behind: each file there is whole.
func TestDestinationFull(t *testing.T) {
	src := startEndpoint(t, "", nil)
	q := &quota{}
	q.limit.Store(5 << 20)
	dst := startEndpoint(t, "", func(d storage.Driver) storage.Driver { q.Driver = d; return q })
	for i := range 20 {
		writeFile(t, filepath.Join(src.root, fmt.Sprintf("d/f%02d", i)), random(1<<20))
	}
	o := fastOptions()
	o.Concurrency, o.Pipelining, o.Deadline = 1, 1, time.Now().Add(time.Minute) // one file at a time; retries until the deadline, were it a fault
	rep := &recorder{}
	start := time.Now()
	res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/d", Dst: "/d", Recursive: true}}, o, rep)
	if !errors.Is(err, engine.ErrNoSpace) || !strings.Contains(err.Error(), "No space left") {
		t.Fatalf("copy: %v (%+v), want ErrNoSpace", err, res)
	}
	if took := time.Since(start); took > 30*time.Second { // half the deadline it would retry until
		t.Errorf("the copy went on %v into a full destination", took)
	}
	if len(rep.faults) > 0 {
		t.Errorf("faults %v: a full destination is not one to retry", rep.faults)
	}
	entries, _ := os.ReadDir(filepath.Join(dst.root, "d"))
	whole := 0
	for _, e := range entries {
		got, _ := os.ReadFile(filepath.Join(dst.root, "d", e.Name()))
		want, _ := os.ReadFile(filepath.Join(src.root, "d", e.Name()))
		if !bytes.Equal(got, want) {
			t.Errorf("%s is partial at the destination (%d of %d bytes)", e.Name(), len(got), len(want))
		}
		whole++
	}
	if whole == 0 || whole >= 20 {
		t.Errorf("%d whole files at the destination; want some, not all", whole)
	}
}

// TestResumeFromTemporary: what an interrupted run left under a file's
// temporary name, with no record of what arrived, is compared with the
// source block by block: a file with a hole, even of full size, is sent
// again only where it differs, chunked or not; a temporary file longer
// than its source (of another version) is written again.
func TestResumeFromTemporary(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	const size, hole = 64 << 20, 6 << 20
	big := random(size)
	writeFile(t, filepath.Join(src.root, "d/big"), big)
	writeFile(t, filepath.Join(src.root, "d/other"), big[:1<<20])
	for _, tc := range []struct {
		name  string
		chunk int64
		left  []byte // at big's temporary name
	}{
		{"full size with a hole", -1, append(append(append([]byte(nil), big[:20<<20]...), make([]byte, hole)...), big[20<<20+hole:]...)},
		{"short, chunked", 8 << 20, big[:40<<20]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.RemoveAll(filepath.Join(dst.root, "d"))
			writeFile(t, filepath.Join(dst.root, partname.For("d/big")), tc.left)
			writeFile(t, filepath.Join(dst.root, partname.For("d/other")), big[:2<<20])
			o := fastOptions()
			o.ChunkSize = tc.chunk
			rep := &recorder{}
			res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/d", Dst: "/d"}}, o, rep)
			if err != nil || res.Transferred != 2 || res.Failed != 0 {
				t.Fatalf("%+v %v", res, err)
			}
			compareTrees(t, filepath.Join(src.root, "d"), filepath.Join(dst.root, "d"))
			missing := int64(size - len(tc.left))
			if tc.chunk < 0 {
				missing = hole
			}
			// What is missing, at most two blocks more (a hole across
			// blocks' edges), and other whole.
			if low, high := missing+1<<20, missing+2*max(size/64, 4<<20)+1<<20; res.Bytes < low || res.Bytes > high {
				t.Errorf("moved %d MiB, want %d to %d MiB", res.Bytes>>20, low>>20, high>>20)
			}
			if got := rep.progress.Load(); got != res.Bytes {
				t.Errorf("progress %d, moved %d", got, res.Bytes)
			}
		})
	}
}
