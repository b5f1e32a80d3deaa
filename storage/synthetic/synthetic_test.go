package synthetic

import (
	"bytes"
	"errors"
	"io"
	"path"
	"slices"
	"testing"

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

// TestPathRoundTrip: every file's path resolves to that file, the paths
// are distinct, and every directory on them exists.
func TestPathRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		depth int
		paths map[int64]string
	}{
		{"files=7,per-dir=10,fan=3", 0, map[int64]string{0: "/f0", 6: "/f6"}},
		{"files=25,per-dir=4,fan=3", 2, map[int64]string{0: "/d0/d0/f0", 5: "/d0/d1/f1", 24: "/d2/d0/f0"}},
		{"files=1000000,per-dir=1000,fan=1000", 1, map[int64]string{0: "/d000/f000", 999_999: "/d999/f999"}},
		{"files=100000000", 2, map[int64]string{1_234_567: "/d001/d234/f567", 99_999_999: "/d099/d999/f999"}},
		{"files=12,per-dir=1,fan=10", 2, map[int64]string{11: "/d1/d1/f0"}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			f := mustParse(t, tc.spec)
			if f.depth != tc.depth {
				t.Errorf("depth %d, want %d", f.depth, tc.depth)
			}
			for i, want := range tc.paths {
				if got := f.Path(i); got != want {
					t.Errorf("Path(%d) = %q, want %q", i, got, want)
				}
			}
			n := min(f.t.Files, 5000)
			seen := map[string]bool{}
			for i := range n {
				i = i * (f.t.Files / n) // spread over big trees
				p := f.Path(i)
				if seen[p] {
					t.Fatalf("Path(%d) = %q twice", i, p)
				}
				seen[p] = true
				e, err := f.resolve("stat", p)
				if err != nil || e.file != i {
					t.Fatalf("resolve(Path(%d) = %q) = file %d, %v", i, p, e.file, err)
				}
				for d := path.Dir(p); d != "/"; d = path.Dir(d) {
					if info, err := f.Stat(t.Context(), d); err != nil || !info.IsDir() {
						t.Fatalf("Stat(%q) = %+v, %v: want a directory", d, info, err)
					}
				}
			}
		})
	}
}

// TestNotExist: names outside the tree, of the wrong form or past its end.
func TestNotExist(t *testing.T) {
	f := mustParse(t, "files=25,per-dir=4,fan=3") // 7 leaves: /d0/d0../d2/d0
	for _, name := range []string{"/x", "/d3", "/d0/d0/f4", "/d2/d1", "/d2/d0/f1", "/d00", "/d0/d0/f0/x", "/d0/f0", "/d0/d0/f", "/d0/d0/f+"} {
		if _, err := f.Stat(t.Context(), name); !errors.Is(err, storage.ErrNotExist) {
			t.Errorf("Stat(%q): %v, want ErrNotExist", name, err)
		}
	}
}

// TestListDir: a directory lists exactly the entries whose paths are in
// it, in name order, and ReadDir agrees.
func TestListDir(t *testing.T) {
	for _, spec := range []string{"files=25,per-dir=4,fan=3", "files=7,per-dir=10,fan=3", "files=0", "files=3001,per-dir=1000,fan=2"} {
		t.Run(spec, func(t *testing.T) {
			f := mustParse(t, spec)
			// Walk the tree by listing; it must yield Path(0..Files-1) in order.
			var got []string
			var walk func(dir string)
			walk = func(dir string) {
				var names []string
				err := f.ListDir(t.Context(), dir, func(i storage.Info) error {
					p := path.Join(dir, i.Name)
					if i.IsDir() {
						names = append(names, i.Name)
						walk(p)
						return nil
					}
					if i.Size != f.t.Size || !i.ModTime.Equal(ModTime) {
						t.Errorf("%s: %+v", p, i)
					}
					names = append(names, i.Name)
					got = append(got, p)
					return nil
				})
				if err != nil {
					t.Fatalf("ListDir(%q): %v", dir, err)
				}
				if !slices.IsSorted(names) {
					t.Errorf("ListDir(%q) not in name order: %q", dir, names)
				}
				infos, err := f.ReadDir(t.Context(), dir)
				if err != nil || len(infos) != len(names) {
					t.Fatalf("ReadDir(%q) = %d entries, %v; ListDir %d", dir, len(infos), err, len(names))
				}
			}
			walk("/")
			if int64(len(got)) != f.t.Files {
				t.Fatalf("listed %d files, want %d", len(got), f.t.Files)
			}
			for i, p := range got {
				if want := f.Path(int64(i)); p != want {
					t.Fatalf("file %d listed as %q, want %q", i, p, want)
				}
			}
		})
	}
}

// TestContent: a file reads as Read says, whatever the offsets of the
// reads; files differ; reads end at the size with io.EOF.
func TestContent(t *testing.T) {
	f := mustParse(t, "files=100,size=1000,per-dir=10,fan=10")
	ctx := t.Context()
	whole := func(i int64) []byte {
		r, err := f.Open(ctx, f.Path(i))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		b, err := io.ReadAll(io.NewSectionReader(r, 0, 2000))
		if err != nil || len(b) != 1000 {
			t.Fatalf("file %d: read %d bytes, %v", i, len(b), err)
		}
		return b
	}
	a, b := whole(3), whole(4)
	if bytes.Equal(a, b) {
		t.Fatal("files 3 and 4 have the same content")
	}
	if !bytes.Equal(a, whole(3)) {
		t.Fatal("file 3 reads differently twice")
	}
	for _, tc := range []struct {
		off, n int64
		want   int
		eof    bool
	}{
		{0, 10, 10, false}, {3, 13, 13, false}, {995, 5, 5, false}, {995, 10, 5, true}, {1000, 1, 0, true}, {7, 993, 993, false},
	} {
		r, _ := f.Open(ctx, f.Path(3))
		p := make([]byte, tc.n)
		n, err := r.ReadAt(p, tc.off)
		if n != tc.want || (err == io.EOF) != tc.eof || err != nil && err != io.EOF {
			t.Errorf("ReadAt(%d bytes at %d) = %d, %v", tc.n, tc.off, n, err)
		}
		if !bytes.Equal(p[:n], a[tc.off:tc.off+int64(n)]) {
			t.Errorf("ReadAt(%d bytes at %d) reads other bytes than the whole file has there", tc.n, tc.off)
		}
	}
}

// TestReadOnly: every change is refused with ErrPermission.
func TestReadOnly(t *testing.T) {
	f := mustParse(t, "files=10")
	ctx := t.Context()
	r, err := f.Open(ctx, "/f000")
	if err != nil {
		t.Fatal(err)
	}
	_, werr := r.WriteAt([]byte("x"), 0)
	_, cerr := f.Create(ctx, "/new", storage.Truncate)
	for i, err := range []error{werr, cerr, f.Mkdir(ctx, "/d"), f.Remove(ctx, "/f000"), f.Rename(ctx, "/f000", "/f001"),
		f.Chmod(ctx, "/f000", 0o600), f.Chtimes(ctx, "/f000", ModTime), f.Truncate(ctx, "/f000", 0)} {
		if !errors.Is(err, storage.ErrPermission) {
			t.Errorf("change %d: %v, want ErrPermission", i, err)
		}
	}
	if _, err := f.Open(ctx, "/"); !errors.Is(err, storage.ErrIsDir) {
		t.Errorf("Open(/): %v, want ErrIsDir", err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, spec := range []string{"files=x", "color=red", "per-dir=0", "fan=1", "files=-1", "files=9000000000000000000,per-dir=1,fan=2"} {
		if _, err := Parse(spec); err == nil {
			t.Errorf("Parse(%q) accepted", spec)
		}
	}
}
