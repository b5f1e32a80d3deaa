package sink

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"ferry/checksum"
	"ferry/storage"
)

func mustParse(t *testing.T, spec string) *FS {
	t.Helper()
	f, err := Parse(spec)
	if err != nil {
		t.Fatalf("Parse(%q): %v", spec, err)
	}
	return f
}

// write is one WriteAt: through handle h (of those the case opens), data
// [from, to) of the file.
type write struct{ h, from, to int }

// TestChecksum: the sums of data written in order, out of order and
// through several handles are those of the data; data written over
// itself, or past the pending bound, leaves them unknown.
func TestChecksum(t *testing.T) {
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, tc := range []struct {
		name    string
		spec    string
		handles int
		writes  []write
		known   bool
	}{
		{"in order", "", 1, []write{{0, 0, 400}, {0, 400, 1000}}, true},
		{"empty", "", 1, nil, true},
		{"ahead of a gap", "", 1, []write{{0, 500, 1000}, {0, 100, 500}, {0, 0, 100}}, true},
		{"two streams", "", 2, []write{{0, 0, 100}, {1, 300, 600}, {0, 100, 300}, {1, 600, 1000}}, true},
		{"written over", "", 1, []write{{0, 0, 500}, {0, 200, 300}, {0, 500, 1000}}, false},
		{"block ahead twice", "", 1, []write{{0, 500, 1000}, {0, 500, 1000}, {0, 0, 500}}, false},
		{"past the pending bound", "max-pending=300", 1, []write{{0, 500, 1000}, {0, 0, 500}}, false},
		{"gap never filled", "", 1, []write{{0, 0, 100}, {0, 200, 1000}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			f := mustParse(t, "sums=xxh128+MD5,"+tc.spec)
			var hs []storage.File
			for range tc.handles {
				h, err := f.Create(ctx, "/a.part", storage.Keep)
				if err != nil {
					t.Fatal(err)
				}
				hs = append(hs, h)
			}
			end := 0
			for _, w := range tc.writes {
				if n, err := hs[w.h].WriteAt(data[w.from:w.to], int64(w.from)); n != w.to-w.from || err != nil {
					t.Fatalf("WriteAt: %d, %v", n, err)
				}
				end = max(end, w.to)
			}
			for _, h := range hs {
				if err := h.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if info, err := f.Stat(ctx, "/a.part"); err != nil || info.Size != int64(end) {
				t.Errorf("Stat: %+v, %v; want size %d", info, err, end)
			}
			for _, alg := range []string{"XXH128", "md5"} {
				got, err := f.Checksum(ctx, "/a.part", alg)
				if !tc.known {
					if !errors.Is(err, errors.ErrUnsupported) {
						t.Errorf("Checksum %s = %q, %v; want ErrUnsupported", alg, got, err)
					}
					continue
				}
				want, _ := checksum.Sum(ctx, bytes.NewReader(data[:end]), 0, -1, alg)
				if got != want || err != nil {
					t.Errorf("Checksum %s = %q, %v; want %q", alg, got, err, want)
				}
			}
			if _, err := f.Checksum(ctx, "/a.part", "SHA1"); !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("Checksum SHA1 (not hashed): %v, want ErrUnsupported", err)
			}
			if f.pending != 0 {
				t.Errorf("%d bytes still pending once the file is closed", f.pending)
			}
		})
	}
}

// TestRemember: the sink remembers the most recently touched files, as
// many as it is told, and forgets the rest.
func TestRemember(t *testing.T) {
	for _, tc := range []struct {
		remember, files int
	}{{1, 5}, {3, 5}, {100, 50}, {1000, 10000}} {
		t.Run(fmt.Sprintf("%d of %d", tc.remember, tc.files), func(t *testing.T) {
			ctx := t.Context()
			f := mustParse(t, fmt.Sprintf("remember=%d", tc.remember))
			for i := range tc.files {
				h, err := f.Create(ctx, fmt.Sprintf("/f%d", i), storage.Truncate)
				if err != nil {
					t.Fatal(err)
				}
				h.WriteAt([]byte("0123456789"), 0)
				h.Close()
				// Touch the first file each time: it stays.
				f.Stat(ctx, "/f0")
			}
			if got, want := f.lru.Len(), min(tc.remember, tc.files); got != want || len(f.files) != want {
				t.Fatalf("remembers %d files (map %d), want %d", got, len(f.files), want)
			}
			if _, err := f.Stat(ctx, "/f0"); tc.remember > 1 && err != nil {
				t.Errorf("the file touched last is forgotten: %v", err)
			}
			last := fmt.Sprintf("/f%d", tc.files-1)
			if _, err := f.Checksum(ctx, last, "XXH128"); err != nil {
				t.Errorf("the file written last: %v", err)
			}
			if tc.files > tc.remember {
				if _, err := f.Stat(ctx, "/f1"); tc.remember > 1 && !errors.Is(err, storage.ErrNotExist) {
					t.Errorf("/f1 is remembered (%v), want forgotten", err)
				}
			}
			infos, err := f.ReadDir(ctx, "/")
			if err != nil || len(infos) != f.lru.Len() {
				t.Errorf("ReadDir lists %d, %v; the sink remembers %d", len(infos), err, f.lru.Len())
			}
		})
	}
}

// TestLikeACopy: what ferry copy does to a destination file works: a
// temporary name, its time, its sum, a rename over an older file.
func TestLikeACopy(t *testing.T) {
	ctx := t.Context()
	f := mustParse(t, "")
	if err := f.Mkdir(ctx, "/d/e"); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("Mkdir without its parent: %v", err)
	}
	for _, d := range []string{"/d", "/d/e"} {
		if err := f.Mkdir(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Mkdir(ctx, "/d"); !errors.Is(err, storage.ErrExist) {
		t.Errorf("Mkdir twice: %v", err)
	}
	put := func(name, data string) {
		h, err := f.Create(ctx, name, storage.Truncate)
		if err != nil {
			t.Fatal(err)
		}
		h.WriteAt([]byte(data), 0)
		if _, err := h.ReadAt(make([]byte, 1), 0); !errors.Is(err, storage.ErrPermission) {
			t.Errorf("ReadAt: %v, want ErrPermission", err)
		}
		h.Close()
	}
	put("/d/e/f", "old")
	put("/d/e/.ferry-1.part", "new data")
	mtime := time.Date(2021, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := f.Chtimes(ctx, "/d/e/.ferry-1.part", mtime); err != nil {
		t.Fatal(err)
	}
	sum, err := f.Checksum(ctx, "/d/e/.ferry-1.part", "XXH128")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Rename(ctx, "/d/e/.ferry-1.part", "/d/e/f"); err != nil {
		t.Fatal(err)
	}
	info, err := f.Stat(ctx, "/d/e/f")
	if err != nil || info.Size != 8 || !info.ModTime.Equal(mtime) || info.IsDir() {
		t.Errorf("Stat after rename: %+v, %v", info, err)
	}
	if got, err := f.Checksum(ctx, "/d/e/f", "XXH128"); got != sum || err != nil {
		t.Errorf("Checksum after rename: %q, %v; want %q", got, err, sum)
	}
	if _, err := f.Stat(ctx, "/d/e/.ferry-1.part"); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("the temporary name is still there: %v", err)
	}
	if _, err := f.Open(ctx, "/d/e/f"); !errors.Is(err, storage.ErrPermission) {
		t.Errorf("Open: %v, want ErrPermission", err)
	}
	if err := f.Remove(ctx, "/d"); !errors.Is(err, storage.ErrNotEmpty) {
		t.Errorf("Remove of a directory with a directory in it: %v", err)
	}
	if err := f.Remove(ctx, "/d/e"); !errors.Is(err, storage.ErrNotEmpty) {
		t.Errorf("Remove of a directory with a file in it: %v", err)
	}
	if err := f.Rename(ctx, "/d", "/g"); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Checksum(ctx, "/g/e/f", "XXH128"); got != sum || err != nil {
		t.Errorf("Checksum after its directory's rename: %q, %v", got, err)
	}
	for _, name := range []string{"/g/e/f", "/g/e", "/g"} {
		if err := f.Remove(ctx, name); err != nil {
			t.Errorf("Remove(%q): %v", name, err)
		}
	}
	if infos, err := f.ReadDir(ctx, "/"); len(infos) != 0 || err != nil {
		t.Errorf("ReadDir(/) after removing all: %+v, %v", infos, err)
	}
	if _, err := f.Create(ctx, "/nodir/f", storage.Truncate); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("Create without its directory: %v", err)
	}
	if err := f.Truncate(ctx, "/nofile", 0); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("Truncate of nothing: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, spec := range []string{"sums=NOPE", "remember=0", "remember=x", "max-pending=-1", "color=red"} {
		if _, err := Parse(spec); err == nil {
			t.Errorf("Parse(%q) accepted", spec)
		}
	}
}

// TestConcurrent: files written at once, each by two handles, one half
// each, get the sums of their data (run with -race).
func TestConcurrent(t *testing.T) {
	ctx := t.Context()
	f := mustParse(t, "remember=100000")
	data := bytes.Repeat([]byte("0123456789abcdef"), 64)
	want, _ := checksum.Sum(ctx, bytes.NewReader(data), 0, -1, checksum.XXH128)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				name := fmt.Sprintf("/g%d-%d.part", g, i)
				a, err := f.Create(ctx, name, storage.Truncate)
				if err != nil {
					errs <- err
					return
				}
				b, _ := f.Create(ctx, name, storage.Keep)
				var halves sync.WaitGroup
				halves.Go(func() { b.WriteAt(data[512:], 512); b.Close() })
				a.WriteAt(data[:512], 0)
				a.Close()
				halves.Wait()
				if err := f.Rename(ctx, name, strings.TrimSuffix(name, ".part")); err != nil {
					errs <- err
					return
				}
				if got, err := f.Checksum(ctx, strings.TrimSuffix(name, ".part"), "XXH128"); got != want || err != nil {
					errs <- fmt.Errorf("%s: %q, %v; want %q", name, got, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if f.lru.Len() != 800 || f.pending != 0 {
		t.Errorf("%d files, %d bytes pending; want 800 and 0", f.lru.Len(), f.pending)
	}
}
