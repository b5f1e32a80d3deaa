package tarstream

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"ferry/stack"
	"ferry/storage"
	"ferry/storage/posix"
)

// tree is a posix tree in a temporary directory, root, beside a directory
// outside it that nothing may reach.
type tree struct {
	t       testing.TB
	root    string
	outside string
	fs      *posix.FS
}

func newTree(t testing.TB) *tree {
	t.Helper()
	parent := t.TempDir()
	tr := &tree{t: t, root: filepath.Join(parent, "root"), outside: filepath.Join(parent, "outside")}
	for _, d := range []string{tr.root, tr.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := posix.New(tr.root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tr.fs = f
	return tr
}

func (tr *tree) env() stack.Env { return stack.Env{FS: tr.fs} }

// write makes a file below the root, and its directories.
func (tr *tree) write(rel string, data []byte) {
	tr.t.Helper()
	p := filepath.Join(tr.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		tr.t.Fatal(err)
	}
}

// files lists the tree below the root's dir: file names with their
// content, directories with "/" after their names and no content.
func (tr *tree) files(dir string) map[string]string {
	tr.t.Helper()
	out := map[string]string{}
	base := filepath.Join(tr.root, filepath.FromSlash(dir))
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == base {
			return err
		}
		rel, _ := filepath.Rel(base, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			out[rel+"/"] = ""
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		tr.t.Fatal(err)
	}
	return out
}

// clean fails if anything is outside the root or a temporary file is left
// in it.
func (tr *tree) clean() {
	tr.t.Helper()
	if entries, err := os.ReadDir(tr.outside); err != nil || len(entries) != 0 {
		tr.t.Fatalf("outside the root: %v (%v)", entries, err)
	}
	for name := range tr.files("") {
		if strings.HasSuffix(name, ".part") {
			tr.t.Fatalf("a temporary file is left: %s", name)
		}
	}
}

// results gathers what a layer reports.
type results struct {
	mu  sync.Mutex
	got []stack.Result
}

func (r *results) add(res stack.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, res)
}

func terminal(t testing.TB, kind string, env stack.Env, opts ...stack.Option) stack.Terminal {
	t.Helper()
	term, err := Kinds()[kind].Terminal(stack.Entry{Name: kind, Opts: opts}, env)
	if err != nil {
		t.Fatal(err)
	}
	return term
}

// retrieve reads what a layer's Open makes of the directory name.
func retrieve(t testing.TB, term stack.Terminal, name string, members []string) ([]byte, []stack.Result) {
	t.Helper()
	var r results
	src, err := term.Open(context.Background(), &stack.Transfer{Name: name, Members: members, Report: r.add})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(src.(io.Reader))
	if err := stack.End(src, err); err != nil {
		t.Fatal(err)
	}
	return b, r.got
}

// store writes data to what a layer's Create makes of the directory name,
// in pieces of odd sizes, and returns the transfer's error.
func store(t testing.TB, term stack.Terminal, name string, flag storage.OpenFlag, data []byte) ([]stack.Result, error) {
	t.Helper()
	var r results
	sink, err := term.Create(context.Background(), &stack.Transfer{Name: name, Flag: flag, Report: r.add})
	if err != nil {
		return nil, err
	}
	w := sink.(io.Writer)
	for len(data) > 0 && err == nil {
		n := min(len(data), 7919)
		_, err = w.Write(data[:n])
		data = data[n:]
	}
	return r.got, stack.End(sink, err)
}

// entry is one member of an archive made by hand.
type entry struct {
	hdr  tar.Header
	data string
}

func reg(name, data string) entry {
	return entry{tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: 0o644}, data}
}

func archive(t testing.TB, ents ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range ents {
		if err := tw.WriteHeader(&e.hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.data); err != nil && !errors.Is(err, tar.ErrWriteTooLong) {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// members lists the names and sizes of the members of a tar stream.
func members(t testing.TB, b []byte) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h.Name)
	}
}

// exec runs a program and returns its output.
func exec(name string, args ...string) ([]byte, error) { return execIn(nil, name, args...) }

// execIn runs a program with in as its input.
func execIn(in []byte, name string, args ...string) ([]byte, error) {
	cmd := osexec.Command(name, args...)
	if in != nil {
		cmd.Stdin = bytes.NewReader(in)
	}
	return cmd.Output()
}
