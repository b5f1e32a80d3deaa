package tarstream

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ferry/storage"
)

// FuzzUnpack: whatever the stream, nothing is written outside the
// directory nor through the links in it, and no temporary file is left.
func FuzzUnpack(f *testing.F) {
	link := func(typ byte, name, target string) entry {
		return entry{hdr: tar.Header{Typeflag: typ, Name: name, Linkname: target}}
	}
	for _, ents := range [][]entry{
		{reg("ok", "fine"), {hdr: tar.Header{Typeflag: tar.TypeDir, Name: "d/"}}, reg("d/f", "x")},
		{reg("/abs", "x")},
		{reg("../x", "x")},
		{reg("a/../../x", "x")},
		{link(tar.TypeSymlink, "ln", "/"), reg("ln/x", "x")},
		{link(tar.TypeLink, "pw", "/etc/passwd")},
		{{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3}}},
		{{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: "fifo"}}},
		{reg("huge", strings.Repeat("h", 3000))},
		{reg("evil/x", "x"), reg("rel/y", "y"), reg("evil", "over the link")},
	} {
		f.Add(archive(f, ents...))
	}
	f.Add(archive(f, reg("cut", strings.Repeat("c", 3000)))[:2000])
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := newTree(t)
		os.MkdirAll(filepath.Join(tr.root, "dst"), 0o755)
		os.MkdirAll(filepath.Join(tr.root, "other"), 0o755)
		os.Symlink(tr.outside, filepath.Join(tr.root, "dst/evil"))
		os.Symlink("../other", filepath.Join(tr.root, "dst/rel"))
		env := tr.env()
		env.MaxFile = 2048
		store(t, terminal(t, TarLayer, env), "/dst", storage.Truncate, data)
		tr.clean()
		entries, _ := os.ReadDir(tr.root)
		if len(entries) != 2 {
			t.Fatalf("the root holds %v", entries)
		}
		if entries, _ := os.ReadDir(filepath.Join(tr.root, "other")); len(entries) != 0 {
			t.Fatalf("written through a link in the tree: %v", entries)
		}
	})
}
