//go:build interop

package interop

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"ferry/engine"
)

// TestEngineOverlapSymlinks copies, on one server (ferry gridftp and GCT),
// a tree into a symlink that leads inside it, and a directory onto its
// parent while deleting extras: both are refused before anything is
// written, by the engine's check as by its copy, and no file changes. GCT
// names a link's resolved path (UNIX.slink), ferry's server the link's own
// relative text; the engine follows either.
func TestEngineOverlapSymlinks(t *testing.T) {
	needTools(t)
	for _, start := range []starter{startFerry, startGCT} {
		srv := start(t)
		t.Run(srv.Name(), func(t *testing.T) {
			writeFile(t, srv.Path("src/sub/f.txt"), []byte("f"))
			writeFile(t, srv.Path("proj/b/c.txt"), []byte("c"))
			writeFile(t, srv.Path("proj/keep.txt"), []byte("keep"))
			if err := os.Symlink("src/sub", srv.Path("link")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("proj", srv.Path("projlink")); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name     string
				item     engine.Item
				delete   bool
				want     string // the reason, after "destination DST: "
				resolved string // where the destination really is, relative to the root
			}{
				{"into a symlink inside the source", engine.Item{Src: epPath(srv, "src"), Dst: epPath(srv, "link/x"), Recursive: true},
					false, "is inside the source " + epPath(srv, "src"), "src/sub/x"},
				{"onto the parent through a symlink, deleting extras", engine.Item{Src: epPath(srv, "proj/b"), Dst: epPath(srv, "projlink"), Recursive: true},
					true, "holds the source " + epPath(srv, "proj/b") + ": deleting its extra entries would delete what lies beside the source", "proj"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					o := engineOptions()
					o.DeleteExtra = tc.delete
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					want := "destination " + tc.item.Dst + ": " + tc.want + " (through a symlink, it is " + epPath(srv, tc.resolved) + ")"
					ep := endpointOf(srv)
					if err := engine.Check(ctx, ep, ep, []engine.Item{tc.item}, o); err == nil || err.Error() != want {
						t.Errorf("check: %v\nwant %s", err, want)
					}
					_, err := engine.Copy(ctx, ep, ep, []engine.Item{tc.item}, o, newEngineRecorder())
					if ie := (*engine.ItemError)(nil); !errors.As(err, &ie) || err.Error() != want {
						t.Errorf("copy: %v\nwant %s", err, want)
					}
					for rel, data := range map[string]string{"src/sub/f.txt": "f", "proj/b/c.txt": "c", "proj/keep.txt": "keep"} {
						if got, err := os.ReadFile(srv.Path(rel)); err != nil || string(got) != data {
							t.Errorf("%s: %q %v; want it unchanged", rel, got, err)
						}
					}
					if _, err := os.Stat(srv.Path("src/sub/x")); err == nil {
						t.Errorf("the refused copy wrote inside its source")
					}
					if _, err := os.Stat(filepath.Join(srv.Path("proj"), "c.txt")); err == nil {
						t.Errorf("the refused copy wrote beside its source")
					}
				})
			}
		})
	}
}

// TestCopyDeleteExtra runs the ferry binary's copy -r
// --delete-destination-extra -v between two ferry servers: every path
// deleted at the destination is named as it goes, the summary counts them,
// and a copy onto the source's own parent is refused, deleting nothing.
func TestCopyDeleteExtra(t *testing.T) {
	src, dst := startFerry(t), startFerry(t)
	writeFile(t, src.Path("s/a.txt"), []byte("a"))
	writeFile(t, src.Path("s/sub/b.txt"), []byte("b"))
	for _, rel := range []string{"s/old.txt", "s/olddir/x/y", "s/sub/gone", "s/a.txt"} {
		writeFile(t, dst.Path(rel), []byte("old"))
	}
	r := mustCopy(t, "-r", "-q", "-v", "--delete-destination-extra", src.URL("s"), dst.URL("s"))
	var deleted []string
	for _, l := range strings.Split(r.stderr, "\n") {
		if p, ok := strings.CutPrefix(l, "DELETED "); ok {
			deleted = append(deleted, p)
		}
	}
	if want := []string{"/s/old.txt", "/s/olddir/x/y", "/s/olddir/x/", "/s/olddir/", "/s/sub/gone"}; !slices.Equal(deleted, want) {
		t.Errorf("DELETED lines %q, want %q", deleted, want)
	}
	if !strings.Contains(r.stderr, "\ndeleted 5 paths at the destination that the source does not have\n") {
		t.Errorf("no count of the deletions in the summary:\n%s", r.stderr)
	}
	for rel, want := range map[string]string{"s/a.txt": "a", "s/sub/b.txt": "b"} {
		if got, err := os.ReadFile(dst.Path(rel)); err != nil || string(got) != want {
			t.Errorf("%s: %q %v", rel, got, err)
		}
	}
	for _, rel := range []string{"s/old.txt", "s/olddir", "s/sub/gone"} {
		if _, err := os.Stat(dst.Path(rel)); err == nil {
			t.Errorf("%s: not deleted", rel)
		}
	}

	r = ferryCopy(t, "-r", "-q", "--delete-destination-extra", src.URL("s/sub"), src.URL("s"))
	if want := "destination /s: holds the source /s/sub"; r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("a copy onto the source's parent, deleting extras:\n%s\nwant a failure saying %q", r, want)
	}
	if got, err := os.ReadFile(src.Path("s/a.txt")); err != nil || string(got) != "a" {
		t.Errorf("the source's neighbour s/a.txt: %q %v", got, err)
	}
}
