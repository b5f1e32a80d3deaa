package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ferry/gridftp"
	"ferry/gridftp/client"
)

// TestRemoveAll removes files and trees with RemoveTree, which names each
// path it deleted as it goes, a directory after what it held.
func TestRemoveAll(t *testing.T) {
	addr, root := startServer(t)
	c := dial(t, addr, 1)
	keep := filepath.Join(root, "keep")
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T)
		path    string
		fails   bool
		gone    string   // relative to root
		removed []string // what RemoveTree names, in any order but each directory after what it held
	}{
		{name: "file", path: "/f", gone: "f", removed: []string{"/f"}, setup: func(t *testing.T) {
			os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644)
		}},
		{name: "tree", path: "/t", gone: "t", removed: []string{"/t/a/b/empty", "/t/a/b/f", "/t/a/b", "/t/a", "/t/g", "/t"}, setup: func(t *testing.T) {
			os.MkdirAll(filepath.Join(root, "t", "a", "b", "empty"), 0o755)
			os.WriteFile(filepath.Join(root, "t", "a", "b", "f"), []byte("x"), 0o644)
			os.WriteFile(filepath.Join(root, "t", "g"), nil, 0o644)
		}},
		{name: "links are removed, never followed", path: "/l", gone: "l", removed: []string{"/l/file-in", "/l/in", "/l/out", "/l"}, setup: func(t *testing.T) {
			os.MkdirAll(filepath.Join(root, "l"), 0o755)
			os.Symlink("../keep", filepath.Join(root, "l", "in"))        // inside the root
			os.Symlink("/etc", filepath.Join(root, "l", "out"))          // leads out
			os.Symlink("../keep/k", filepath.Join(root, "l", "file-in")) // a file inside
		}},
		{name: "missing", path: "/nope", fails: true},
		{name: "hostile path is confined", path: "/../../nope", fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.MkdirAll(keep, 0o755)
			os.WriteFile(filepath.Join(keep, "k"), []byte("keep"), 0o644)
			if tc.setup != nil {
				tc.setup(t)
			}
			var removed []string
			err := c.RemoveTree(context.Background(), tc.path, func(p string, _ gridftp.Entry) { removed = append(removed, p) })
			if (err != nil) != tc.fails {
				t.Fatalf("RemoveTree(%s) = %v, want failure %v", tc.path, err, tc.fails)
			}
			// The server lists in its directories' order.
			if !slices.Equal(slices.Sorted(slices.Values(removed)), slices.Sorted(slices.Values(tc.removed))) {
				t.Errorf("removed %q, want %q", removed, tc.removed)
			}
			for i, p := range removed {
				for _, q := range removed[i+1:] {
					if strings.HasPrefix(q, p+"/") {
						t.Errorf("removed %q: %s before %s, which it held", removed, p, q)
					}
				}
			}
			if tc.gone != "" {
				if _, err := os.Lstat(filepath.Join(root, tc.gone)); !os.IsNotExist(err) {
					t.Errorf("%s still there (%v)", tc.gone, err)
				}
			}
			if b, err := os.ReadFile(filepath.Join(keep, "k")); err != nil || string(b) != "keep" {
				t.Fatalf("a file outside the removed tree was touched: %q %v", b, err)
			}
		})
	}
}

// TestRemoveTreeSpills empties directories with more entries than it
// holds in memory: their listings go to a temporary file first, and every
// entry is still removed once, a directory after what it held.
func TestRemoveTreeSpills(t *testing.T) {
	defer client.SetRemoveWindow(10)()
	addr, root := startServer(t)
	c := dial(t, addr, 1)
	var want []string
	for i := range 25 {
		name := fmt.Sprintf("f%02d", i)
		os.MkdirAll(filepath.Join(root, "big", "sub"), 0o755)
		os.WriteFile(filepath.Join(root, "big", name), []byte("x"), 0o644)
		os.WriteFile(filepath.Join(root, "big", "sub", name), nil, 0o644)
		want = append(want, "/big/"+name, "/big/sub/"+name)
	}
	os.Symlink("/etc", filepath.Join(root, "big", "out"))
	want = append(want, "/big/out", "/big/sub", "/big")
	var removed []string
	if err := c.RemoveTree(context.Background(), "/big", func(p string, _ gridftp.Entry) { removed = append(removed, p) }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(slices.Sorted(slices.Values(removed)), slices.Sorted(slices.Values(want))) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	if i, j := slices.Index(removed, "/big/sub/f00"), slices.Index(removed, "/big/sub"); i > j || removed[len(removed)-1] != "/big" {
		t.Errorf("a directory removed before what it held: %q", removed)
	}
	if _, err := os.Lstat(filepath.Join(root, "big")); !os.IsNotExist(err) {
		t.Errorf("/big is still there: %v", err)
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Errorf("the link was followed: %v", err)
	}
}
