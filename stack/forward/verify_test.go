package forward

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"ferry/gridftp/server/servertest"
	"ferry/storage"
	"ferry/storage/posix"
)

// Each hop checks its children's copies (CKSM MD5 against the MD5 of what
// it sent), and gives them the directories their destinations need.

// startFlipping starts a node whose storage gets one byte of every file
// it writes wrong: the byte at offset at is flipped on its way to the
// disk, as a failing disk or controller might do.
func startFlipping(t *testing.T, at int64) *node {
	t.Helper()
	root, fs := servertest.Root(t)
	return serve(t, root, flipFS{FS: fs, at: at})
}

type flipFS struct {
	*posix.FS
	at int64
}

func (f flipFS) Create(ctx context.Context, name string, flag storage.OpenFlag) (storage.File, error) {
	fl, err := f.FS.Create(ctx, name, flag)
	if err != nil {
		return nil, err
	}
	return flipFile{File: fl, at: f.at}, nil
}

type flipFile struct {
	storage.File
	at int64
}

func (f flipFile) WriteAt(p []byte, off int64) (int, error) {
	if off <= f.at && f.at < off+int64(len(p)) {
		p = bytes.Clone(p)
		p[f.at-off] ^= 0x20
	}
	return f.File.WriteAt(p, off)
}

// TestCorruptCopy: a child whose storage gets a byte wrong is caught by
// its parent's checksum, wherever it is in the tree, and named alone: the
// copies below it are checked against what it forwarded, which was right.
func TestCorruptCopy(t *testing.T) {
	data := payload(size)
	const at = 5<<20 + 77
	for _, tt := range []struct {
		name string
		opts string
		// tree: the nodes after the first; bad is the flipping one's index
		// among them, want the indexes the report names.
		n, bad int
		want   []int
	}{
		{"child", "cc=2", 2, 0, []int{0}},
		{"child with a subtree", "cc=2", 4, 0, []int{0}}, // B(D,E) C: B flips
		{"grandchild", "cc=1", 3, 1, []int{1}},           // B -> C -> D: C flips
		{"child, 4 streams", "cc=2;P=4", 4, 1, []int{1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := start(t)
			nodes := make([]*node, tt.n)
			var urls []string
			for i := range nodes {
				if i == tt.bad {
					nodes[i] = startFlipping(t, at)
				} else {
					nodes[i] = start(t)
				}
				urls = append(urls, nodes[i].url("f", tt.opts))
			}
			var want []string
			for _, i := range tt.want {
				want = append(want, urls[i])
			}
			names(t, upload(t, a, mcStack(tt.opts, urls...), "f", bytes.NewReader(data), size), want...)
			for i, n := range nodes {
				if same := bytes.Equal(n.content(t, "f"), data); same == (i == tt.bad) {
					t.Errorf("node %d: identical %v", i, same)
				}
			}
		})
	}
}

// TestCorruptCopyBelowRelay: a relay-only hop checks its children too.
func TestCorruptCopyBelowRelay(t *testing.T) {
	data := payload(size)
	a, b, c := start(t), start(t), startFlipping(t, 1)
	urls := []string{b.url("f", "local_write=n"), c.url("f", "")}
	names(t, upload(t, a, mcStack("cc=1", urls...), "f", bytes.NewReader(data), size), urls[1])
}

// unreadableFS is a tree whose files can be written but never read back:
// a CKSM of them fails.
type unreadableFS struct{ *posix.FS }

func (f unreadableFS) Create(ctx context.Context, name string, flag storage.OpenFlag) (storage.File, error) {
	fl, err := f.FS.Create(ctx, name, flag)
	if err != nil {
		return nil, err
	}
	return unreadable{fl}, nil
}

func (f unreadableFS) Open(ctx context.Context, name string) (storage.File, error) {
	return nil, fmt.Errorf("open %s: %w", name, storage.ErrPermission)
}

type unreadable struct{ storage.File }

func (unreadable) ReadAt([]byte, int64) (int, error) { return 0, storage.ErrPermission }

// TestChecksumRefused: a child that cannot say the checksum of its copy
// did not deliver a good one, as far as anyone can tell.
func TestChecksumRefused(t *testing.T) {
	data := payload(3 << 20)
	a, c := start(t), start(t)
	root, fs := servertest.Root(t)
	b := serve(t, root, unreadableFS{fs})
	urls := []string{b.url("f", ""), c.url("f", "")}
	names(t, upload(t, a, mcStack("cc=2", urls...), "f", bytes.NewReader(data), int64(len(data))), urls[0])
	if !bytes.Equal(b.content(t, "f"), data) || !bytes.Equal(c.content(t, "f"), data) {
		t.Error("B or C differs")
	}
}

// TestChildMakesDirectories: a child is given the directories of its
// destination when they are missing (a tree copied to hosts only the
// first hop reaches); a relay-only hop is not; a destination under a file
// fails alone.
func TestChildMakesDirectories(t *testing.T) {
	data := payload(3 << 20)
	a, b, c, d, e := start(t), start(t), start(t), start(t), start(t)
	if err := os.WriteFile(filepath.Join(e.root, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// A's children: C (relaying to D), B and E.
	urls := []string{c.url("p/q/f", "local_write=n"), b.url("x/y/z/f", "P=2"), e.url("x/f", ""), d.url("p/q/f", "")}
	names(t, upload(t, a, mcStack("cc=3", urls...), "f", bytes.NewReader(data), int64(len(data))), urls[2])
	if !bytes.Equal(b.content(t, "x/y/z/f"), data) || !bytes.Equal(d.content(t, "p/q/f"), data) {
		t.Error("B or D differs")
	}
	if fileExists(filepath.Join(c.root, "p")) {
		t.Error("the relay-only hop made the directories")
	}
}

// TestRewriteThroughChild: a file a child stored as a leaf, and hashed
// while it did, then comes again through the child as a hop with children
// of its own: its checksum is of the new copy.
func TestRewriteThroughChild(t *testing.T) {
	a, b, c := start(t), start(t), start(t)
	for i, urls := range [][]string{{b.url("f", "")}, {b.url("f", ""), c.url("f", "")}} {
		data := payload(2 << 20)
		data[0] = byte(i) // the same size, another content
		if err := upload(t, a, mcStack("cc=1", urls...), "f", bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
		if !bytes.Equal(b.content(t, "f"), data) {
			t.Fatalf("upload %d: B differs", i)
		}
	}
}

// countingFS counts the files opened for reading.
type countingFS struct {
	*posix.FS
	opens *atomic.Int32
}

func (f countingFS) Open(ctx context.Context, name string) (storage.File, error) {
	f.opens.Add(1)
	return f.FS.Open(ctx, name)
}

// TestChecksumWithoutReadingBack: a ferry hop hashes the blocks it writes,
// as it forwards them, and a leaf as it writes them: asked for the
// checksum of its copy, neither reads the file again.
func TestChecksumWithoutReadingBack(t *testing.T) {
	data := payload(size)
	a := start(t)
	var urls []string
	var opens [3]atomic.Int32
	for i := range opens {
		root, fs := servertest.Root(t)
		urls = append(urls, serve(t, root, countingFS{fs, &opens[i]}).url("f", ""))
	}
	// A -> B -> {C, D}
	if err := upload(t, a, mcStack("cc=1", urls...), "f", bytes.NewReader(data), size); err != nil {
		t.Fatal(err)
	}
	for i := range opens {
		if n := opens[i].Load(); n != 0 {
			t.Errorf("node %d read its copy back %d times", i, n)
		}
	}
}
