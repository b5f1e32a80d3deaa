package tarstream

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ferry/internal/partname"
	"ferry/stack"
	"ferry/storage"
)

func md5hex(s string) string {
	h := md5.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

func fill(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// TestRoundTrip packs a tree and unpacks it elsewhere: nested and empty
// directories, empty files, a 5 MB file, names with spaces, unicode and %,
// an executable; a symbolic link is reported and left out.
func TestRoundTrip(t *testing.T) {
	src, dst := newTree(t), newTree(t)
	want := map[string]string{
		"a/":                       "",
		"a/b/":                     "",
		"a/b/c/":                   "",
		"a/b/c/deep.txt":           "deep",
		"a/empty":                  "",
		"big.bin":                  string(fill(5 << 20)),
		"edge.bin":                 string(fill(bufSize)),
		"empty dir/":               "",
		"name with spaces":         "spaces",
		"ünïcødé ✓.txt":            "unicode",
		"100%/%41%%":               "percent",
		"100%/":                    "",
		"run.sh":                   "#!/bin/sh\n",
		strings.Repeat("long", 40): "a name longer than ustar's 100 bytes",
	}
	for name, data := range want {
		if strings.HasSuffix(name, "/") {
			os.MkdirAll(filepath.Join(src.root, "tree", name), 0o755)
			continue
		}
		src.write("tree/"+name, []byte(data))
	}
	os.Chmod(filepath.Join(src.root, "tree/run.sh"), 0o700)
	os.Symlink("a/empty", filepath.Join(src.root, "tree/link"))

	stream, sent := retrieve(t, terminal(t, TarLayer, src.env(), stack.Option{Key: "cksm", Value: "md5"}), "/tree", nil)
	if len(sent) != len(want)+1 {
		t.Errorf("%d results for %d members and a link", len(sent), len(want))
	}
	var names []string
	for _, res := range sent {
		names = append(names, res.Name)
		data, ok := want[res.Name]
		switch {
		case res.Name == "link":
			if res.Err == nil || !errors.Is(res.Err, storage.ErrPermission) || !strings.Contains(res.Err.Error(), "symbolic link") {
				t.Errorf("the link: %v", res.Err)
			}
		case !ok && !strings.HasSuffix(res.Name, "/"):
			if _, ok = want[res.Name+"/"]; !ok || res.Err != nil {
				t.Errorf("result %+v", res)
			}
		case res.Err != nil || res.Size != int64(len(data)) || res.Sum != md5hex(data):
			t.Errorf("result %s: %d %s %v", res.Name, res.Size, res.Sum, res.Err)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("members not in walk order: %q", names)
	}

	got, err := store(t, terminal(t, TarLayer, dst.env(), stack.Option{Key: "cksm", Value: "md5"}), "/copy/here", storage.Truncate, stream)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("%d results unpacking %d members", len(got), len(want))
	}
	for _, res := range got {
		if data, ok := want[res.Name]; res.Err != nil || ok && (res.Size != int64(len(data)) || res.Sum != md5hex(data)) {
			t.Errorf("unpacked %s: %d %s %v", res.Name, res.Size, res.Sum, res.Err)
		}
	}
	files := dst.files("copy/here")
	for name, data := range want {
		if files[name] != data {
			t.Errorf("%s: %d bytes, want %d", name, len(files[name]), len(data))
		}
	}
	if len(files) != len(want) {
		t.Errorf("unpacked %d entries, want %d", len(files), len(want))
	}
	if fi, err := os.Stat(filepath.Join(dst.root, "copy/here/run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh: %v %v", fi.Mode(), err)
	}
	a, _ := os.Stat(filepath.Join(src.root, "tree/a/b/c/deep.txt"))
	b, _ := os.Stat(filepath.Join(dst.root, "copy/here/a/b/c/deep.txt"))
	if !a.ModTime().Truncate(1e9).Equal(b.ModTime()) {
		t.Errorf("mtime %v, want %v", b.ModTime(), a.ModTime())
	}
	dst.clean()
}

// TestMembers: the members named go out in their order, those that
// cannot be read are reported and left out.
func TestMembers(t *testing.T) {
	src := newTree(t)
	src.write("d/one", []byte("1"))
	src.write("d/sub/two", []byte("22"))
	src.write("d/three", fill(600<<10))
	src.write("other", []byte("outside the directory"))
	os.Symlink("one", filepath.Join(src.root, "d/ln"))
	names := []string{"sub/two", "missing", "three", "sub", "/etc/passwd", "../other", "ln", "./one"}
	stream, res := retrieve(t, terminal(t, TarLayer, src.env()), "/d", names)
	if got, want := members(t, stream), []string{"sub/two", "three", "one"}; !slices.Equal(got, want) {
		t.Errorf("members %q, want %q", got, want)
	}
	wantErr := []error{nil, storage.ErrNotExist, nil, storage.ErrIsDir, storage.ErrPermission, storage.ErrPermission, storage.ErrPermission, nil}
	if len(res) != len(names) {
		t.Fatalf("%d results for %d members: %+v", len(res), len(names), res)
	}
	for i, r := range res {
		if r.Name != names[i] || !errors.Is(r.Err, wantErr[i]) || (wantErr[i] == nil) != (r.Err == nil) {
			t.Errorf("result %d: %s %v, want %s %v", i, r.Name, r.Err, names[i], wantErr[i])
		}
	}
	if res[2].Size != 600<<10 || res[2].Sum != "" {
		t.Errorf("three: %+v", res[2])
	}
}

// lyingFS lists some files with sizes they do not have, as if they
// changed between the listing and the reading.
type lyingFS struct {
	storage.Driver
	sizes map[string]int64
}

func (l lyingFS) ReadDir(ctx context.Context, name string) ([]storage.Info, error) {
	infos, err := l.Driver.ReadDir(ctx, name)
	for i := range infos {
		if n, ok := l.sizes[infos[i].Name]; ok {
			infos[i].Size = n
		}
	}
	return infos, err
}

// TestChangedWhileRead: a file that shrinks is padded with zeros, one that
// grows cut at its listed size; both are reported failed and the stream
// stays a valid archive whose other members are intact. A file that fits
// one buffer goes out as read.
func TestChangedWhileRead(t *testing.T) {
	src := newTree(t)
	big := fill(700 << 10)
	src.write("d/1shrank", big)
	src.write("d/2grew", big)
	src.write("d/3small", []byte("small, listed larger"))
	src.write("d/4ok", []byte("ok"))
	env := src.env()
	env.FS = lyingFS{src.fs, map[string]int64{"1shrank": 900 << 10, "2grew": 500 << 10, "3small": 1 << 10}}
	stream, res := retrieve(t, terminal(t, TarLayer, env, stack.Option{Key: "cksm", Value: "adler32"}), "/d", nil)
	tr := tar.NewReader(bytes.NewReader(stream))
	want := map[string][]byte{
		"1shrank": append(slices.Clone(big), make([]byte, 200<<10)...),
		"2grew":   big[:500<<10],
		"3small":  []byte("small, listed larger"),
		"4ok":     []byte("ok"),
	}
	for range 4 {
		h, err := tr.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil || !bytes.Equal(b, want[h.Name]) {
			t.Errorf("%s: %d bytes, want %d (%v)", h.Name, len(b), len(want[h.Name]), err)
		}
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Fatalf("after the members: %v", err)
	}
	for i, r := range res {
		failed := i < 2
		if failed != errors.Is(r.Err, ErrChanged) || failed == (r.Sum != "") {
			t.Errorf("%s: %+v", r.Name, r)
		}
	}
	if res[0].Size != 700<<10 || res[1].Size != 500<<10 {
		t.Errorf("sizes %d %d", res[0].Size, res[1].Size)
	}
}

// TestUnpackHostile: archives made to escape, or that are not archives.
// Nothing lands outside the directory, the member is reported failed (or
// the stream fails), no temporary file is left, other members arrive.
func TestUnpackHostile(t *testing.T) {
	big := strings.Repeat("x", 5000)
	link := func(typ byte, name, target string) entry {
		return entry{hdr: tar.Header{Typeflag: typ, Name: name, Linkname: target, Mode: 0o644}}
	}
	for _, tt := range []struct {
		name    string
		ents    []entry
		raw     []byte            // in place of ents
		bad     string            // the member reported failed
		corrupt string            // the stream's error, when it fails
		extra   map[string]string // what else is in the directory, if not just the links
	}{
		{name: "absolute", ents: []entry{reg("/abs", "x")}, bad: "/abs"},
		{name: "dotdot", ents: []entry{reg("../x", "x")}, bad: "../x"},
		{name: "dotdot inside", ents: []entry{reg("a/../../x", "x")}, bad: "a/../../x"},
		{name: "symlink then through it", ents: []entry{link(tar.TypeSymlink, "ln", "/"), reg("ln/x", "x")}, bad: "ln", extra: map[string]string{"ln/": "", "ln/x": "x"}},
		{name: "hard link", ents: []entry{link(tar.TypeLink, "pw", "/etc/passwd")}, bad: "pw"},
		{name: "char device", ents: []entry{{hdr: tar.Header{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3}}}, bad: "null"},
		{name: "block device", ents: []entry{{hdr: tar.Header{Typeflag: tar.TypeBlock, Name: "sda", Devmajor: 8}}}, bad: "sda"},
		{name: "fifo", ents: []entry{{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: "fifo"}}}, bad: "fifo"},
		{name: "past MaxFile", ents: []entry{reg("huge", big)}, bad: "huge"},
		{name: "through a link out", ents: []entry{reg("evil/x", "x")}, bad: "evil/x"},
		{name: "through a link in the tree", ents: []entry{reg("rel/y", "y")}, bad: "rel/y"},
		{name: "a file over a link", ents: []entry{reg("evil", "replaces the link, not its target")}, extra: map[string]string{"evil": "replaces the link, not its target"}},
		{name: "truncated in a member", raw: archive(t, reg("ok1", "first"), reg("cut", big[:3000]))[:2500], corrupt: "truncated"},
		{name: "truncated between members", raw: archive(t, reg("ok1", "first"), reg("cut", big))[:1024], corrupt: "end-of-archive marker"},
		{name: "garbage", raw: []byte(strings.Repeat("garbage!", 200)), corrupt: "not a tar stream"},
		{name: "garbage after a member", raw: append(archive(t, reg("ok1", "first"))[:1024], strings.Repeat("garbage!", 200)...), corrupt: "not a tar stream"},
		{name: "empty", raw: []byte{}, corrupt: "end-of-archive marker"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, plain := range []bool{false, true} {
				t.Run(fmt.Sprintf("plain=%v", plain), func(t *testing.T) {
					tr := newTree(t)
					os.MkdirAll(filepath.Join(tr.root, "dst"), 0o755)
					os.MkdirAll(filepath.Join(tr.root, "other"), 0o755)
					os.Symlink(tr.outside, filepath.Join(tr.root, "dst/evil"))
					os.Symlink("../other", filepath.Join(tr.root, "dst/rel"))
					data := tt.raw
					if data == nil {
						ents := append([]entry{reg("ok1", "first")}, tt.ents...)
						data = archive(t, append(ents, reg("ok2", "second"))...)
					}
					env := tr.env()
					env.MaxFile = 4096
					if plain {
						env.FS = plainFS{tr.fs}
					}
					res, err := store(t, terminal(t, TarLayer, env), "/dst", storage.Truncate, data)
					tr.clean()
					if entries, _ := os.ReadDir(filepath.Join(tr.root, "other")); len(entries) != 0 {
						t.Fatalf("written through a link in the tree: %v", entries)
					}
					files := tr.files("dst")
					if tt.corrupt != "" {
						if err == nil || !strings.Contains(err.Error(), tt.corrupt) {
							t.Fatalf("stream error %v, want %q", err, tt.corrupt)
						}
						if strings.HasPrefix(tt.name, "truncated") && (files["ok1"] != "first" || len(res) != 1) {
							t.Fatalf("the member before the cut: %q %+v", files["ok1"], res)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					if files["ok1"] != "first" || files["ok2"] != "second" {
						t.Fatalf("good members: %v", files)
					}
					delete(files, "ok1")
					delete(files, "ok2")
					want := map[string]string{"evil": "-> " + tr.outside, "rel": "-> ../other"}
					for k, v := range tt.extra {
						want[k] = v
					}
					if fmt.Sprint(files) != fmt.Sprint(want) {
						t.Fatalf("unpacked %v, want %v", files, want)
					}
					var failed []string
					for _, r := range res {
						if r.Err != nil {
							failed = append(failed, r.Name)
						}
					}
					if tt.bad == "" && len(failed) > 0 || tt.bad != "" && !slices.Contains(failed, tt.bad) {
						t.Fatalf("failed %q, want %q: %+v", failed, tt.bad, res)
					}
				})
			}
		})
	}
}

// plainFS hides the DirOpener of the driver it holds: the unpacker falls
// back on path names.
type plainFS struct{ storage.Driver }

// TestLeftoverReplaced: a killed server leaves a member's temporary
// file; the member's next transfer replaces it, and nothing of it is left.
func TestLeftoverReplaced(t *testing.T) {
	tr := newTree(t)
	tr.write(partname.For("d/b"), []byte("stale, from a server killed in the middle of b"))
	full := archive(t, reg("a", "first"), reg("d/b", strings.Repeat("x", 100000)))
	if res, err := store(t, terminal(t, TarLayer, tr.env()), "/", storage.Truncate, full); err != nil || len(res) != 2 || res[1].Err != nil {
		t.Fatalf("store: %v, %+v", err, res)
	}
	if got := tr.files("d"); len(got) != 1 || got["b"] != strings.Repeat("x", 100000) {
		t.Errorf("d after the stream: %v entries", slices.Sorted(maps.Keys(got)))
	}
}
