package tarstream

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ferry/stack"
	"ferry/storage"
)

func TestOptions(t *testing.T) {
	for _, tt := range []struct {
		kind string
		opts []stack.Option
		want string // in the refusal; "" for none
	}{
		{TarLayer, nil, ""},
		{TarLayer, []stack.Option{{Key: "cksm", Value: "sha256"}}, ""},
		{TarLayer, []stack.Option{{Key: "cksm", Value: "CRC32C"}}, ""},
		{TarLayer, []stack.Option{{Key: "cksm", Value: "md4"}}, "unknown checksum algorithm"},
		{TarLayer, []stack.Option{{Key: "cksm", Value: ""}}, "unknown checksum algorithm"},
		{TarLayer, []stack.Option{{Key: "alg", Value: "md5"}}, "unknown option"},
		{CksumLayer, nil, ""},
		{CksumLayer, []stack.Option{{Key: "alg", Value: "xxh128"}}, ""},
		{CksumLayer, []stack.Option{{Key: "alg", Value: "nope"}}, "unknown checksum algorithm"},
		{CksumLayer, []stack.Option{{Key: "cksm", Value: "md5"}}, "unknown option"},
	} {
		_, err := Kinds()[tt.kind].Terminal(stack.Entry{Name: tt.kind, Opts: tt.opts}, stack.Env{})
		var r *stack.Refusal
		if tt.want == "" && err != nil || tt.want != "" && (!errors.As(err, &r) || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s %v: %v, want %q", tt.kind, tt.opts, err, tt.want)
		}
	}
}

// TestUnpackFlag: a plain STOR replaces files; without storage.Truncate
// an existing file is kept and its member refused.
func TestUnpackFlag(t *testing.T) {
	for _, tt := range []struct {
		flag storage.OpenFlag
		want string
		err  error
	}{
		{storage.Truncate, "new", nil},
		{storage.Keep, "old", storage.ErrExist},
	} {
		tr := newTree(t)
		tr.write("d/f", []byte("old"))
		res, err := store(t, terminal(t, TarLayer, tr.env()), "/d", tt.flag, archive(t, reg("f", "new"), reg("g", "g")))
		if err != nil {
			t.Fatal(err)
		}
		if got := tr.files("d"); got["f"] != tt.want || got["g"] != "g" || !errors.Is(res[0].Err, tt.err) || res[1].Err != nil {
			t.Errorf("flag %d: %v %+v", tt.flag, got, res)
		}
	}
}

func TestUnpackRefused(t *testing.T) {
	tr := newTree(t)
	tr.write("file", []byte("x"))
	env := tr.env()
	env.ReadOnly = true
	if _, err := terminal(t, TarLayer, env).Create(context.Background(), &stack.Transfer{Name: "/d"}); !errors.Is(err, storage.ErrPermission) {
		t.Errorf("read-only: %v", err)
	}
	if _, err := terminal(t, TarLayer, tr.env()).Create(context.Background(), &stack.Transfer{Name: "/file/d"}); !errors.Is(err, storage.ErrNotDir) {
		t.Errorf("below a file: %v", err)
	}
	if _, err := terminal(t, TarLayer, tr.env()).Open(context.Background(), &stack.Transfer{Name: "/file"}); !errors.Is(err, storage.ErrNotDir) {
		t.Errorf("packing a file: %v", err)
	}
	if _, err := terminal(t, CksumLayer, tr.env()).Create(context.Background(), &stack.Transfer{Name: "/d"}); !errors.Is(err, storage.ErrPermission) || !strings.Contains(err.Error(), "cannot store") {
		t.Errorf("storing through cksum: %v", err)
	}
}

// TestUnpackAbort: an aborted transfer leaves no temporary file, and
// neither the member it was writing.
func TestUnpackAbort(t *testing.T) {
	tr := newTree(t)
	data := archive(t, reg("done", "done"), reg("partial", strings.Repeat("p", 100000)))
	var r results
	sink, err := terminal(t, TarLayer, tr.env()).Create(context.Background(), &stack.Transfer{Name: "/d", Flag: storage.Truncate, Report: r.add})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.(io.Writer).Write(data[:50000]); err != nil {
		t.Fatal(err)
	}
	stack.End(sink, errors.New("the peer went away"))
	tr.clean()
	if got := tr.files("d"); len(got) != 1 || got["done"] != "done" || len(r.got) != 1 {
		t.Fatalf("after the abort: %v %+v", got, r.got)
	}
}

// TestUnpackForeign: an archive of GNU tar, with "./" names, long names
// and a record padded with zeros, unpacks.
func TestUnpackForeign(t *testing.T) {
	src, dst := newTree(t), newTree(t)
	long := strings.Repeat("n", 150)
	src.write("t/"+long, []byte("long"))
	src.write("t/sub/f", []byte("f"))
	stream, err := exec("tar", "-C", filepath.Join(src.root, "t"), "-cf", "-", ".")
	if err != nil {
		t.Skip("no tar:", err)
	}
	res, err := store(t, terminal(t, TarLayer, dst.env()), "/x", storage.Truncate, stream)
	if err != nil {
		t.Fatal(err)
	}
	if got := dst.files("x"); got[long] != "long" || got["sub/f"] != "f" || len(res) != 3 {
		t.Fatalf("%v %+v", got, res)
	}
}

func TestCksum(t *testing.T) {
	tr := newTree(t)
	files := map[string]string{
		"a":          "alpha",
		"sub/b c":    "beta",
		"back\\sl":   "gamma",
		"new\nline":  "delta",
		"sub/deep/e": strings.Repeat("e", 1<<20+3),
		"empty":      "",
	}
	for name, data := range files {
		tr.write("d/"+name, []byte(data))
	}
	os.Symlink("a", filepath.Join(tr.root, "d/ln"))
	out, res := retrieve(t, terminal(t, CksumLayer, tr.env()), "/d", nil)
	want := md5hex("alpha") + "  a\n" +
		"\\" + md5hex("gamma") + "  back\\\\sl\n" +
		md5hex("") + "  empty\n" +
		"\\" + md5hex("delta") + "  new\\nline\n" +
		md5hex("beta") + "  sub/b c\n" +
		md5hex(files["sub/deep/e"]) + "  sub/deep/e\n"
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	if len(res) != 7 || res[3].Name != "ln" || !errors.Is(res[3].Err, storage.ErrPermission) || res[6].Size != 1<<20+3 {
		t.Errorf("results %+v", res)
	}

	out, res = retrieve(t, terminal(t, CksumLayer, tr.env(), stack.Option{Key: "alg", Value: "sha256"}), "/d", []string{"sub/b c", "nope", "sub", "a"})
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	if want := sum("beta") + "  sub/b c\n" + sum("alpha") + "  a\n"; string(out) != want {
		t.Errorf("members: got\n%s\nwant\n%s", out, want)
	}
	var failed []string
	for _, r := range res {
		if r.Err != nil {
			failed = append(failed, r.Name)
		}
	}
	if !slices.Equal(failed, []string{"nope", "sub"}) || res[0].Sum != sum("beta") {
		t.Errorf("results %+v", res)
	}
}

// TestPackReadable: GNU tar reads the stream and finds the tree.
func TestPackReadable(t *testing.T) {
	src := newTree(t)
	src.write("t/ünï code/"+strings.Repeat("l", 120), []byte("x"))
	stream, _ := retrieve(t, terminal(t, TarLayer, src.env()), "/t", nil)
	out := t.TempDir()
	if _, err := execIn(stream, "tar", "-C", out, "-xf", "-"); err != nil {
		t.Skip("tar:", err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "ünï code", strings.Repeat("l", 120))); err != nil || string(b) != "x" {
		t.Fatal(b, err)
	}
	var hdrs []string
	r := tar.NewReader(strings.NewReader(string(stream)))
	for h, err := r.Next(); err == nil; h, err = r.Next() {
		hdrs = append(hdrs, h.Name)
	}
	if len(hdrs) != 2 || hdrs[0] != "ünï code/" {
		t.Fatalf("%q", hdrs)
	}
}
