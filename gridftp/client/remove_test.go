package client_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestRemoveAll(t *testing.T) {
	addr, root := startServer(t)
	c := dial(t, addr, 1)
	keep := filepath.Join(root, "keep")
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T)
		path  string
		fails bool
		gone  string // relative to root
	}{
		{name: "file", path: "/f", gone: "f", setup: func(t *testing.T) {
			os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644)
		}},
		{name: "tree", path: "/t", gone: "t", setup: func(t *testing.T) {
			os.MkdirAll(filepath.Join(root, "t", "a", "b", "empty"), 0o755)
			os.WriteFile(filepath.Join(root, "t", "a", "b", "f"), []byte("x"), 0o644)
			os.WriteFile(filepath.Join(root, "t", "g"), nil, 0o644)
		}},
		{name: "links are removed, never followed", path: "/l", gone: "l", setup: func(t *testing.T) {
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
			err := c.RemoveAll(context.Background(), tc.path)
			if (err != nil) != tc.fails {
				t.Fatalf("RemoveAll(%s) = %v, want failure %v", tc.path, err, tc.fails)
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
