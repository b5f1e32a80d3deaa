package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"ferry/engine"
	"ferry/internal/synclevel"
)

// tree lists the files and directories below root, "dir/" for directories.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	slices.Sort(out)
	return out
}

func TestFiltersSkipAndDeleteExtra(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	for _, f := range []string{"a.txt", "b.tmp", "keep.tmp", "cache/c.txt", "sub/d.txt", "sub/e.tmp", "sub/cache/f"} {
		writeFile(t, filepath.Join(src.root, "s", f), []byte(f))
	}
	for _, tc := range []struct {
		name     string
		opts     func(*engine.Options)
		dstFiles []string // present at the destination before the copy
		want     []string // the destination tree after
		sent     int      // files reported done
		skipped  []string // source paths Skip was asked about and claimed
		deleted  []string // reported deleted, in order, "dir/" for directories
		fails    bool
	}{
		{
			name: "exclude files by glob; first match wins",
			opts: func(o *engine.Options) {
				o.Filters = []engine.Filter{{Name: "keep*"}, {Exclude: true, Name: "*.tmp", Type: "file"}}
			},
			want: []string{"a.txt", "cache/", "cache/c.txt", "keep.tmp", "sub/", "sub/cache/", "sub/cache/f", "sub/d.txt"},
			sent: 5,
		},
		{
			name: "an excluded directory is not walked; a file rule does not touch directories",
			opts: func(o *engine.Options) {
				o.Filters = []engine.Filter{{Exclude: true, Name: "cache", Type: "dir"}, {Exclude: true, Name: "sub", Type: "file"}}
			},
			want: []string{"a.txt", "b.tmp", "keep.tmp", "sub/", "sub/d.txt", "sub/e.tmp"},
			sent: 5,
		},
		{
			name: "skip leaves files and directories out entirely",
			opts: func(o *engine.Options) {
				o.Skip = func(src, dst string) bool {
					return src == "/s/a.txt" && dst == "/s/a.txt" || src == "/s/sub"
				}
			},
			want:    []string{"b.tmp", "cache/", "cache/c.txt", "keep.tmp"},
			sent:    3,
			skipped: []string{"/s/a.txt", "/s/sub"},
		},
		{
			name:     "delete extra keeps excluded and skipped names",
			dstFiles: []string{"old.txt", "olddir/x/y", "sub/old", "junk.tmp", "a.txt"},
			opts: func(o *engine.Options) {
				o.DeleteExtra = true
				o.Filters = []engine.Filter{{Exclude: true, Name: "*.tmp"}}
				o.Skip = func(src, _ string) bool { return src == "/s/a.txt" }
			},
			want:    []string{"a.txt", "cache/", "cache/c.txt", "junk.tmp", "sub/", "sub/cache/", "sub/cache/f", "sub/d.txt"},
			sent:    3,
			skipped: []string{"/s/a.txt"},
			deleted: []string{"/s/old.txt", "/s/olddir/x/y", "/s/olddir/x/", "/s/olddir/", "/s/sub/old"},
		},
		{
			name:     "delete extra without filters",
			dstFiles: []string{"gone/deep/er", "sub/cache/old"},
			opts:     func(o *engine.Options) { o.DeleteExtra, o.SyncLevel = true, synclevel.Size },
			want: []string{"a.txt", "b.tmp", "cache/", "cache/c.txt", "keep.tmp", "sub/", "sub/cache/", "sub/cache/f",
				"sub/d.txt", "sub/e.tmp"},
			sent:    7,
			deleted: []string{"/s/gone/deep/er", "/s/gone/deep/", "/s/gone/", "/s/sub/cache/old"},
		},
		{
			name:  "a bad pattern fails the copy",
			opts:  func(o *engine.Options) { o.Filters = []engine.Filter{{Name: "[", Exclude: true}} },
			fails: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.RemoveAll(filepath.Join(dst.root, "s"))
			os.MkdirAll(filepath.Join(dst.root, "s"), 0o755)
			for _, f := range tc.dstFiles {
				writeFile(t, filepath.Join(dst.root, "s", f), []byte("old"))
			}
			o := fastOptions()
			tc.opts(&o)
			var mu sync.Mutex
			var claimed []string
			if skip := o.Skip; skip != nil {
				o.Skip = func(src, dst string) bool {
					ok := skip(src, dst)
					if ok {
						mu.Lock()
						claimed = append(claimed, src)
						mu.Unlock()
					}
					return ok
				}
			}
			rep := &recorder{}
			res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, []engine.Item{{Src: "/s", Dst: "/s"}}, o, rep)
			if tc.fails {
				if err == nil {
					t.Fatal("copy succeeded")
				}
				return
			}
			if err != nil || res.Failed != 0 {
				t.Fatalf("%+v %v", res, err)
			}
			if got := tree(t, filepath.Join(dst.root, "s")); !slices.Equal(got, tc.want) {
				t.Errorf("destination\n%v\nwant\n%v", got, tc.want)
			}
			for _, p := range tc.want {
				if strings.HasSuffix(p, "/") || slices.Contains(tc.dstFiles, p) {
					continue
				}
				if b, _ := os.ReadFile(filepath.Join(dst.root, "s", p)); string(b) != p {
					t.Errorf("%s holds %q", p, b)
				}
			}
			if len(rep.done) != tc.sent || res.Files != tc.sent || rep.planned+res.Skipped != tc.sent {
				t.Errorf("reported %d files, result %d, planned %d: want %d", len(rep.done), res.Files, rep.planned, tc.sent)
			}
			if !slices.Equal(rep.deleted, tc.deleted) || res.Deleted != len(tc.deleted) {
				t.Errorf("reported deleted %q (result %d), want %q", rep.deleted, res.Deleted, tc.deleted)
			}
			slices.Sort(claimed)
			if !slices.Equal(claimed, tc.skipped) {
				t.Errorf("skip claimed %v, want %v", claimed, tc.skipped)
			}
			for _, p := range claimed {
				if _, ok := rep.done[p]; ok {
					t.Errorf("skipped %s was reported", p)
				}
			}
		})
	}
}

func TestItemRecursive(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	writeFile(t, filepath.Join(src.root, "d", "f"), []byte("x"))
	writeFile(t, filepath.Join(src.root, "g"), []byte("y"))
	o := fastOptions()
	o.Recursive = false
	for _, tc := range []struct {
		items []engine.Item
		fails bool
	}{
		{items: []engine.Item{{Src: "/d", Dst: "/d", Recursive: true}, {Src: "/g", Dst: "/g"}}},
		{items: []engine.Item{{Src: "/d", Dst: "/d2"}}, fails: true},
	} {
		res, err := engine.Copy(context.Background(), src.Endpoint, dst.Endpoint, tc.items, o, nil)
		if (err != nil) != tc.fails {
			t.Fatalf("%v: %+v %v", tc.items, res, err)
		}
		if !tc.fails && res.Transferred != 2 {
			t.Fatalf("%v: %+v", tc.items, res)
		}
	}
}
