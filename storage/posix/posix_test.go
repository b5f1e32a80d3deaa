package posix_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"ferry/storage"
	"ferry/storage/posix"
	"ferry/storage/storagetest"
)

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) (storage.Driver, string) {
		dir := t.TempDir()
		fs, err := posix.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fs.Close() })
		return fs, dir
	})
}

func newFS(t *testing.T) (*posix.FS, string) {
	t.Helper()
	dir := t.TempDir()
	fs, err := posix.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs, dir
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dir  string
		want error
	}{
		{filepath.Join(dir, "missing"), storage.ErrNotExist},
		{file, storage.ErrNotDir},
	}
	for _, tt := range tests {
		fs, err := posix.New(tt.dir)
		if err == nil {
			fs.Close()
		}
		if !errors.Is(err, tt.want) {
			t.Errorf("New(%s) = %v, want %v", tt.dir, err, tt.want)
		}
	}
}

// The server type-asserts *os.File to use sendfile and splice.
func TestFilesAreOSFiles(t *testing.T) {
	fsys, _ := newFS(t)
	ctx := t.Context()
	w, err := fsys.Create(ctx, "/f", storage.Truncate)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := w.(*os.File); !ok {
		t.Errorf("Create returned %T, want *os.File", w)
	}
	w.Close()
	r, err := fsys.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.(*os.File); !ok {
		t.Errorf("Open returned %T, want *os.File", r)
	}
	r.Close()
}

// A FIFO planted in the tree must not hang a session.
func TestFIFO(t *testing.T) {
	fsys, dir := newFS(t)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o666); err != nil {
		t.Skip("mkfifo:", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		info, err := fsys.Stat(ctx, "/fifo")
		if err != nil || info.Mode&fs.ModeNamedPipe == 0 {
			t.Errorf("Stat = %+v, %v; want a named pipe", info, err)
		}
		if _, err := fsys.Open(ctx, "/fifo"); !errors.Is(err, storage.ErrPermission) {
			t.Errorf("Open = %v, want ErrPermission", err)
		}
		for _, flag := range []storage.OpenFlag{storage.Keep, storage.Truncate} {
			if _, err := fsys.Create(ctx, "/fifo", flag); !errors.Is(err, storage.ErrPermission) {
				t.Errorf("Create(%d) = %v, want ErrPermission", flag, err)
			}
		}
		if err := fsys.Truncate(ctx, "/fifo", 0); !errors.Is(err, storage.ErrPermission) {
			t.Errorf("Truncate = %v, want ErrPermission", err)
		}
		if _, err := fsys.ReadDir(ctx, "/fifo"); !errors.Is(err, storage.ErrNotDir) {
			t.Errorf("ReadDir = %v, want ErrNotDir", err)
		}
		if _, err := fsys.OpenDir(ctx, "/fifo"); !errors.Is(err, storage.ErrNotDir) {
			t.Errorf("OpenDir = %v, want ErrNotDir", err)
		}
		if d, err := fsys.OpenDir(ctx, "/"); err != nil {
			t.Errorf("OpenDir(/) = %v", err)
		} else {
			if _, err := d.Create(ctx, "fifo"); !errors.Is(err, storage.ErrExist) {
				t.Errorf("Dir.Create = %v, want ErrExist", err)
			}
			if _, err := d.Open(ctx, "fifo"); !errors.Is(err, storage.ErrPermission) {
				t.Errorf("Dir.Open = %v, want ErrPermission", err)
			}
			d.Close()
		}
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("blocked on a FIFO")
	}
}

// TestOpenDir: a Dir works on the entries of its directory only, by their
// base names; it follows a symlink inside the root, never one out of it;
// Create makes new files only.
func TestOpenDir(t *testing.T) {
	fsys, dir := newFS(t)
	ctx := t.Context()
	outside := t.TempDir()
	for _, d := range []string{"a", "a/b"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "a/old"), []byte("old"), 0o644)
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	os.Symlink("a", filepath.Join(dir, "in"))
	os.Symlink(outside, filepath.Join(dir, "out"))
	os.Symlink(outside, filepath.Join(dir, "a/out"))

	for name, want := range map[string]error{"/file": storage.ErrNotDir, "/nothing": storage.ErrNotExist, "/out": storage.ErrPermission} {
		if _, err := fsys.OpenDir(ctx, name); !errors.Is(err, want) {
			t.Errorf("OpenDir(%s) = %v, want %v", name, err, want)
		}
	}
	d, err := fsys.OpenDir(ctx, "/in")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, name := range []string{"", ".", "..", "b/x", "../x", "x\x00"} {
		if _, err := d.Create(ctx, name); !errors.Is(err, storage.ErrPermission) {
			t.Errorf("Create(%q) = %v, want ErrPermission", name, err)
		}
	}
	for _, name := range []string{"old", "b", "out"} {
		if _, err := d.Create(ctx, name); !errors.Is(err, storage.ErrExist) {
			t.Errorf("Create(%s) = %v, want ErrExist", name, err)
		}
	}
	f, err := d.Create(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("new"), 0)
	f.Close()
	mtime := time.Unix(1e9, 0)
	if err := d.Chtimes(ctx, "new", mtime); err != nil {
		t.Fatal(err)
	}
	if err := d.Chmod(ctx, "new", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename(ctx, "new", "old"); err != nil {
		t.Fatal(err)
	}
	info, err := d.Stat(ctx, "old")
	if err != nil || info.Size != 3 || !info.ModTime.Equal(mtime) || info.Mode.Perm() != 0o700 {
		t.Fatalf("Stat = %+v, %v", info, err)
	}
	// The time set through the open file, after its data: to the nanosecond.
	f, err = d.Create(ctx, "timed")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("timed"), 0)
	ntime := time.Unix(1e9, 123456789)
	if ok, err := d.(storage.FileTimer).SetModTime(f, ntime); !ok || err != nil {
		t.Fatalf("SetModTime = %v, %v", ok, err)
	}
	f.Close()
	if info, err := d.Stat(ctx, "timed"); err != nil || !info.ModTime.Equal(ntime) {
		t.Fatalf("after SetModTime: Stat = %+v, %v; want time %v", info, err, ntime)
	}
	if ok, _ := d.(storage.FileTimer).SetModTime(struct{ storage.File }{f}, ntime); ok {
		t.Error("SetModTime of a file that is not its own: true")
	}
	f, err = d.Open(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8)
	n, _ := f.ReadAt(b, 0)
	f.Close()
	if string(b[:n]) != "new" {
		t.Fatalf("a/old holds %q", b[:n])
	}
	if _, err := d.Open(ctx, "b"); !errors.Is(err, storage.ErrIsDir) {
		t.Errorf("Open(b) = %v, want ErrIsDir", err)
	}
	if _, err := d.Open(ctx, "out"); err == nil {
		t.Error("Open(out) opened a file outside the root")
	}
	if info, err := d.Stat(ctx, "out"); err != nil || info.Mode&fs.ModeSymlink == 0 {
		t.Fatalf("Stat(out) = %+v, %v; want the link itself", info, err)
	}
	if err := d.Remove(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Stat(ctx, "old"); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("Stat after Remove = %v", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("written outside: %v", entries)
	}
}

func TestNames(t *testing.T) {
	fsys, dir := newFS(t)
	ctx := t.Context()
	if err := os.Mkdir(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "b"), []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	// An absolute symlink is refused even when it names a file inside.
	if err := os.Symlink(filepath.Join(dir, "a", "b"), filepath.Join(dir, "abs")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		want error // nil: readable
	}{
		{"/a/b", nil},
		{"a/b", nil},
		{"//a//b/", nil},
		{"/./a/./b", nil},
		{"/a/../a/b", storage.ErrPermission}, // not clean: refused, though inside
		{"/a/b/..", storage.ErrPermission},
		{"/abs", storage.ErrPermission},
		{"/a/b\x00", fs.ErrInvalid},
	}
	for _, tt := range tests {
		f, err := fsys.Open(ctx, tt.name)
		if err == nil {
			f.Close()
		}
		if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("Open(%q) = %v, want %v", tt.name, err, tt.want)
		}
	}
	info, err := fsys.Stat(ctx, "/")
	if err != nil || info.Name != "/" || !info.IsDir() {
		t.Errorf("Stat(/) = %+v, %v", info, err)
	}
}

// Errors name files by their name in the tree, never by the path on disk.
func TestErrorsHideDir(t *testing.T) {
	fsys, dir := newFS(t)
	ctx := t.Context()
	_, err := fsys.Stat(ctx, "/missing")
	if !errors.Is(err, storage.ErrNotExist) || strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "/missing") {
		t.Errorf("Stat(/missing) = %v", err)
	}
	_, err = fsys.Open(ctx, "/missing")
	if err == nil || strings.Contains(err.Error(), dir) {
		t.Errorf("Open(/missing) = %v", err)
	}
}

func TestCanceled(t *testing.T) {
	fsys, _ := newFS(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := fsys.Stat(ctx, "/"); !errors.Is(err, context.Canceled) {
		t.Errorf("Stat = %v, want context.Canceled", err)
	}
	if _, err := fsys.ReadDir(ctx, "/"); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadDir = %v, want context.Canceled", err)
	}
	if err := fsys.Mkdir(ctx, "/d"); !errors.Is(err, context.Canceled) {
		t.Errorf("Mkdir = %v, want context.Canceled", err)
	}
}

// TestDirDirectCalls: the calls a Dir makes straight on its descriptor
// keep the os.Root rules: a symlink inside the root is followed by Open
// and Chtimes, never one out of it; Rename does not replace a directory; the files
// are *os.File (the server splices them).
func TestDirDirectCalls(t *testing.T) {
	fsys, dir := newFS(t)
	ctx := t.Context()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "file"), []byte("data"), 0o644)
	os.Symlink("file", filepath.Join(dir, "in"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "out"))
	d, err := fsys.OpenDir(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	for _, tt := range []struct {
		name string
		want string // what Open reads; "" for an error
	}{
		{"file", "data"},
		{"in", "data"},
		{"out", ""},
	} {
		f, err := d.Open(ctx, tt.name)
		if tt.want == "" {
			if err == nil {
				f.Close()
				t.Errorf("Open(%s) opened a file outside the root", tt.name)
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%s) = %v", tt.name, err)
			continue
		}
		if _, ok := f.(*os.File); !ok {
			t.Errorf("Open(%s) returned %T, want *os.File", tt.name, f)
		}
		b := make([]byte, 16)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		if string(b[:n]) != tt.want {
			t.Errorf("Open(%s) reads %q, want %q", tt.name, b[:n], tt.want)
		}
	}

	mtime := time.Unix(1e9, 0)
	for _, tt := range []struct {
		name, target string // target: the file whose time it sets
	}{
		{"file", "file"},
		{"in", "file"},
		{"sub", "sub"},
	} {
		if err := d.Chtimes(ctx, tt.name, mtime); err != nil {
			t.Errorf("Chtimes(%s) = %v", tt.name, err)
		} else if fi, err := os.Stat(filepath.Join(dir, tt.target)); err != nil || !fi.ModTime().Equal(mtime) {
			t.Errorf("Chtimes(%s): %s has %v, %v; want %v", tt.name, tt.target, fi.ModTime(), err, mtime)
		}
		mtime = mtime.Add(time.Hour)
	}
	d.Chtimes(ctx, "out", mtime)
	if fi, _ := os.Stat(filepath.Join(outside, "secret")); fi.ModTime().Equal(mtime) {
		t.Error("Chtimes(out) set the time of a file outside the root")
	}

	f, err := d.Create(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(*os.File); !ok {
		t.Errorf("Create returned %T, want *os.File", f)
	}
	f.Close()
	if err := d.Rename(ctx, "new", "sub"); err == nil {
		t.Error("Rename replaced a directory")
	}
	if fi, err := os.Lstat(filepath.Join(dir, "sub")); err != nil || !fi.IsDir() {
		t.Errorf("sub after Rename: %v, %v", fi, err)
	}
	if err := d.Rename(ctx, "new", "file"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "file")); err != nil || len(b) != 0 {
		t.Errorf("file after Rename = %q, %v; want the new empty file", b, err)
	}
}

// TestOpenStat: a regular file is opened and described from the open file;
// anything else is described as Stat describes it and not opened, a
// symlink never followed.
func TestOpenStat(t *testing.T) {
	fsys, dir := newFS(t)
	ctx := t.Context()
	os.WriteFile(filepath.Join(dir, "file"), []byte("data"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Symlink("file", filepath.Join(dir, "link"))
	os.Symlink("/etc/passwd", filepath.Join(dir, "out"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := fsys.OpenDir(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range []struct {
		name   string
		opened bool
		target string
		mode   fs.FileMode // type bits
		err    error
	}{
		{name: "file", opened: true},
		{name: "sub", mode: fs.ModeDir},
		{name: "link", target: "file"},
		{name: "out", target: "/etc/passwd", mode: fs.ModeSymlink},
		{name: "fifo", mode: fs.ModeNamedPipe},
		{name: "gone", err: storage.ErrNotExist},
		{name: "../file", err: storage.ErrPermission},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, in, err := d.(storage.StatOpener).OpenStat(ctx, c.name)
			if !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
				t.Fatalf("OpenStat = %v, want %v", err, c.err)
			}
			if (f != nil) != c.opened {
				t.Fatalf("opened %v, want %v", f != nil, c.opened)
			}
			if err != nil {
				return
			}
			want, err := d.Stat(ctx, c.name)
			if err != nil {
				t.Fatal(err)
			}
			if in.Name != want.Name || in.Mode != want.Mode || in.Size != want.Size || !in.ModTime.Equal(want.ModTime) || in.Target != want.Target || in.ID != want.ID {
				t.Errorf("OpenStat described %+v, Stat %+v", in, want)
			}
			if in.Target != c.target || in.Mode.Type() != c.mode {
				t.Errorf("target %q type %v, want %q %v", in.Target, in.Mode.Type(), c.target, c.mode)
			}
			if f != nil {
				b := make([]byte, 4)
				if n, err := f.ReadAt(b, 0); n != 4 || string(b) != "data" {
					t.Errorf("read %q, %v", b[:n], err)
				}
				f.Close()
			}
		})
	}
}
