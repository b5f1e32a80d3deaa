package tarstream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"ferry/stack"
	"ferry/storage"
	"ferry/storage/posix"
)

// streamOnly is a posix driver that refuses to read a directory whole
// (ReadDir, a slice of every entry): a layer that may meet a directory of
// millions of entries must list it as a stream (ListDir).
type streamOnly struct{ *posix.FS }

func (streamOnly) ReadDir(_ context.Context, name string) ([]storage.Info, error) {
	return nil, fmt.Errorf("readdir %s: a whole directory read at once: %w", name, storage.ErrPermission)
}

// TestWalkListsAsStream: a tree whose directories hold more entries than
// a window, subdirectories among them, is packed from listings read as
// streams, every member once and each directory before what it holds,
// and unpacks whole; the checksum list of it names every file once.
func TestWalkListsAsStream(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 files")
	}
	src, dst := newTree(t), newTree(t)
	want := map[string]string{}
	add := func(name, data string) {
		src.write("tree/"+name, []byte(data))
		want[name] = data
	}
	for i := range 5000 {
		add(fmt.Sprintf("big/f%04d", i), fmt.Sprint("file ", i))
	}
	for i := range 3 {
		add(fmt.Sprintf("big/s%d/inner/x", i), fmt.Sprint("inner ", i))
	}
	add("top", "top")
	if err := os.Symlink("top", filepath.Join(src.root, "tree/big/link")); err != nil {
		t.Fatal(err)
	}
	env := stack.Env{FS: streamOnly{src.fs}}

	stream, sent := retrieve(t, terminal(t, TarLayer, env, stack.Option{Key: "cksm", Value: "md5"}), "/tree", nil)
	seen := map[string]bool{}
	for _, res := range sent {
		if seen[res.Name] {
			t.Errorf("%s reported twice", res.Name)
		}
		seen[res.Name] = true
		data, isFile := want[res.Name]
		switch {
		case res.Name == "big/link":
			if res.Err == nil {
				t.Errorf("the link packed: %+v", res)
			}
		case !isFile:
			if res.Err != nil || !strings.HasPrefix(res.Name, "big") {
				t.Errorf("result %+v", res)
			}
		case res.Err != nil || res.Size != int64(len(data)) || res.Sum != md5hex(data):
			t.Errorf("result %s: %d %s %v", res.Name, res.Size, res.Sum, res.Err)
		}
	}
	missing := 0
	for name := range want {
		if !seen[name] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d files not reported", missing, len(want))
	}
	dirs := map[string]bool{".": true}
	for _, m := range members(t, stream) {
		if !dirs[path.Dir(strings.TrimSuffix(m, "/"))] {
			t.Errorf("%s before its directory", m)
		}
		if strings.HasSuffix(m, "/") {
			dirs[strings.TrimSuffix(m, "/")] = true
		}
	}

	if _, err := store(t, terminal(t, TarLayer, dst.env()), "/copy", storage.Truncate, stream); err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, data := range dst.files("copy") {
		if strings.HasSuffix(name, "/") {
			continue
		}
		n++
		if want[name] != data {
			t.Errorf("%s: %q, want %q", name, data, want[name])
		}
	}
	if n != len(want) {
		t.Errorf("unpacked %d files, want %d", n, len(want))
	}

	list, _ := retrieve(t, terminal(t, CksumLayer, env), "/tree", nil)
	lines := strings.Split(strings.TrimSuffix(string(list), "\n"), "\n")
	if len(lines) != len(want) {
		t.Errorf("checksum list of %d lines, want %d", len(lines), len(want))
	}
	for _, l := range lines {
		sum, name, _ := strings.Cut(l, "  ")
		if data, ok := want[name]; !ok || sum != md5hex(data) {
			t.Errorf("checksum list line %q", l)
		}
	}
}

// breaking is a posix driver whose listing of the directory broken fails
// after yielding after entries.
type breaking struct {
	*posix.FS
	broken string
	after  int
}

var errBroke = errors.New("the listing broke")

func (b breaking) ListDir(ctx context.Context, name string, fn func(storage.Info) error) error {
	n := 0
	return b.FS.ListDir(ctx, name, func(in storage.Info) error {
		if name == b.broken && n == b.after {
			return errBroke
		}
		n++
		return fn(in)
	})
}

// TestWalkListingBreaks: a directory whose listing breaks part way is
// packed as far as it was listed and then reported failed, and the walk
// goes on with the rest of the tree.
func TestWalkListingBreaks(t *testing.T) {
	src, dst := newTree(t), newTree(t)
	for i := range 10 {
		src.write(fmt.Sprintf("tree/a/f%d", i), []byte("a"))
	}
	src.write("tree/b/x", []byte("x"))
	src.write("tree/c", []byte("c"))
	env := stack.Env{FS: breaking{FS: src.fs, broken: "/tree/a", after: 3}}

	stream, sent := retrieve(t, terminal(t, TarLayer, env), "/tree", nil)
	var files, failed []string
	for _, res := range sent {
		switch {
		case res.Err != nil:
			failed = append(failed, res.Name)
			if !errors.Is(res.Err, errBroke) {
				t.Errorf("%s: %v", res.Name, res.Err)
			}
		case strings.HasPrefix(res.Name, "a/") || res.Name == "b/x" || res.Name == "c":
			files = append(files, res.Name)
		}
	}
	if len(files) != 5 || len(failed) != 1 || failed[0] != "a" {
		t.Errorf("files %q, failed %q; want 3 of a, b/x and c, and a failed", files, failed)
	}
	if _, err := store(t, terminal(t, TarLayer, dst.env()), "/copy", storage.Truncate, stream); err != nil {
		t.Fatal(err)
	}
	n := 0
	for name := range dst.files("copy") {
		if !strings.HasSuffix(name, "/") {
			n++
		}
	}
	if n != 5 {
		t.Errorf("unpacked %d files, want 5", n)
	}
}
