package server_test

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"ferry/gridftp/server"
	"ferry/storage"
	"ferry/storage/posix"
)

// rdelFS is the posix driver of a test server as SITE RDEL meets it: with
// wholeRefused, reading a directory whole (ReadDir, a slice of every
// entry) fails, so a command that could meet a directory of millions of
// entries must list it as a stream (ListDir); while adds is not 0, each
// file removed from the directory dir is replaced by a new file in it, as
// if someone else were filling it (adds < 0: forever); with chase, a
// listing yields what is added while it runs, as some file systems' do.
type rdelFS struct {
	*posix.FS
	root         string // on disk
	dir          string // as the server names it
	wholeRefused bool
	chase        bool
	adds         atomic.Int64
	added        atomic.Int64
}

func (f *rdelFS) ListDir(ctx context.Context, name string, fn func(storage.Info) error) error {
	if !f.chase {
		return f.FS.ListDir(ctx, name, fn)
	}
	listed := map[string]bool{}
	for {
		fresh := 0
		err := f.FS.ListDir(ctx, name, func(in storage.Info) error {
			if listed[in.Name] {
				return nil
			}
			listed[in.Name] = true
			fresh++
			return fn(in)
		})
		if err != nil || fresh == 0 {
			return err
		}
	}
}

func (f *rdelFS) ReadDir(ctx context.Context, name string) ([]storage.Info, error) {
	if f.wholeRefused {
		return nil, fmt.Errorf("readdir %s: a whole directory read at once: %w", name, storage.ErrPermission)
	}
	return f.FS.ReadDir(ctx, name)
}

func (f *rdelFS) Remove(ctx context.Context, name string) error {
	err := f.FS.Remove(ctx, name)
	if err != nil || path.Dir(name) != f.dir || f.adds.Load() == 0 {
		return err
	}
	f.adds.Add(-1)
	n := f.added.Add(1)
	if werr := os.WriteFile(filepath.Join(f.root, filepath.FromSlash(f.dir), fmt.Sprintf("new%d", n)), nil, 0o644); werr != nil {
		return werr
	}
	return nil
}

// TestRDEL: SITE RDEL deletes a tree as it lists it, never reading a
// directory whole, and deletes what is added while it runs; a directory
// that someone keeps filling fails clearly after a few passes.
func TestRDEL(t *testing.T) {
	tests := []struct {
		name         string
		files        int   // in tree/big, beside tree/big/sub/{1,2,3}/x and tree/big/link
		wholeRefused bool  // ReadDir fails
		chase        bool  // a listing yields what is added while it runs
		adds         int64 // files added to tree/big while it is deleted; -1: forever
		want         string
	}{
		{"many entries, listed as a stream", 5000, true, false, 0, "250 RDEL command successful."},
		{"filled while deleted", 100, false, false, 150, "250 RDEL command successful."},
		{"filled while deleted, listed at once", 100, false, true, 150, "250 RDEL command successful."},
		{"filled forever", 20, false, false, -1, "550"},
		{"filled forever, listed at once", 20, false, true, -1, "550"},
	}
	server.SetRDELWindow(t, 64)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fsys *rdelFS
			env := startServer(t, func(s *server.Server) {
				fsys = &rdelFS{FS: s.FS.(*posix.FS), dir: "/tree/big", wholeRefused: tt.wholeRefused, chase: tt.chase}
				s.FS = fsys
			})
			fsys.root = env.root
			env.file("outside/kept", []byte("kept"))
			env.file("tree/top", []byte("top"))
			for i := range 3 {
				env.file(fmt.Sprintf("tree/big/sub/%d/x", i), []byte("x"))
			}
			for i := range tt.files {
				env.file(fmt.Sprintf("tree/big/f%05d", i), []byte("f"))
			}
			if err := os.Symlink("../../outside", filepath.Join(env.root, "tree/big/link")); err != nil {
				t.Fatal(err)
			}
			fsys.adds.Store(tt.adds)
			c := env.login()
			c.send("SITE RDEL tree")
			r := c.read()
			if r.String() != tt.want && fmt.Sprint(r.Code) != tt.want {
				t.Fatalf("SITE RDEL tree: %q, want %q", r.String(), tt.want)
			}
			_, err := os.Lstat(filepath.Join(env.root, "tree"))
			switch {
			case r.Code < 300 && !os.IsNotExist(err):
				t.Errorf("tree after SITE RDEL: %v", err)
			case r.Code >= 300 && !strings.Contains(r.String(), "still being filled"):
				t.Errorf("SITE RDEL of a directory filled forever: %q, want it to say it stopped", r.String())
			case r.Code < 300 && tt.adds > 0 && fsys.added.Load() != tt.adds:
				t.Errorf("%d files added while deleting, want %d", fsys.added.Load(), tt.adds)
			}
			if b := env.content("outside/kept"); string(b) != "kept" {
				t.Errorf("the link's target: %q", b)
			}
		})
	}
}
