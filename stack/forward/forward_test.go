package forward

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/stack"
)

// node is one in-process ferry server offering the multicast layer.
type node struct {
	root string
	addr string
	srv  *server.Server
}

func start(t *testing.T) *node {
	t.Helper()
	root, fs := servertest.Root(t)
	reg := stack.Kinds()
	maps.Copy(reg, Kinds())
	srv := &server.Server{FS: fs, Anonymous: true, Layers: reg, DataTimeout: 10 * time.Second}
	return &node{root: root, addr: servertest.Serve(t, srv), srv: srv}
}

func (n *node) url(name, opts string) string { return "ftp://" + n.addr + "/" + name + "?" + opts }

func (n *node) content(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.root, name))
	if err != nil {
		t.Fatalf("%s: %v", n.addr, err)
	}
	return b
}

// mcStack is the stack globus-url-copy -MC sends the first hop.
func mcStack(opts string, urls ...string) string {
	var b strings.Builder
	b.WriteString(opts)
	b.WriteString(";urls=")
	for _, u := range urls {
		b.WriteString("#" + encode(u))
	}
	return "file," + Name + ":" + encode(b.String())
}

func payload(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{7})
	r.Read(b)
	return b
}

// upload stores src at name on first through spec with 4 streams.
func upload(t *testing.T, first *node, spec, name string, src io.ReaderAt, size int64) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, first.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(ctx, "anonymous", "x@"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetDiskStack(ctx, spec); err != nil {
		t.Fatal(err)
	}
	c.SetOptions(client.Options{Parallel: 4, BlockSize: 256 << 10})
	_, err = c.Put(ctx, "/"+name, src, 0, size)
	return err
}

const size = 20 << 20

func TestChainAndTree(t *testing.T) {
	data := payload(size)
	for _, tt := range []struct {
		name  string
		nodes int
		opts  string
	}{
		{"chain", 4, "cc=1"},
		{"tree", 5, "cc=2"},
		{"tree P=3", 5, "P=3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			nodes := make([]*node, tt.nodes)
			var urls []string
			for i := range nodes {
				nodes[i] = start(t)
				if i > 0 {
					urls = append(urls, nodes[i].url("f", tt.opts))
				}
			}
			if err := upload(t, nodes[0], mcStack(tt.opts, urls...), "f", bytes.NewReader(data), size); err != nil {
				t.Fatal(err)
			}
			for i, n := range nodes {
				if got := n.content(t, "f"); !bytes.Equal(got, data) {
					t.Errorf("node %d: %d bytes, differ from the source", i, len(got))
				}
			}
		})
	}
}

func TestNoLocalWrite(t *testing.T) {
	data := payload(3 << 20)
	a, b, c := start(t), start(t), start(t)
	// A forwards to B, which relays to C without a copy of its own.
	spec := mcStack("cc=1", b.url("f", "local_write=n"), c.url("f", ""))
	if err := upload(t, a, spec, "f", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.content(t, "f"), data) || !bytes.Equal(c.content(t, "f"), data) {
		t.Error("A or C differs")
	}
	if _, err := os.Stat(filepath.Join(b.root, "f")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("B has a file: %v", err)
	}
}

// TestNoLocalWriteKeepsFile: a hop that only relays never touches a file
// of that name it already holds.
func TestNoLocalWriteKeepsFile(t *testing.T) {
	data := payload(3 << 20)
	a, b, c := start(t), start(t), start(t)
	old := []byte("B's own file, not part of this transfer\n")
	if err := os.WriteFile(filepath.Join(b.root, "f"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	spec := mcStack("cc=1", b.url("f", "local_write=n"), c.url("f", ""))
	if err := upload(t, a, spec, "f", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(b.root, "f")); err != nil || !bytes.Equal(got, old) {
		t.Errorf("B's file: %q, %v; want it as it was", got, err)
	}
	if !bytes.Equal(c.content(t, "f"), data) {
		t.Error("C differs")
	}
}

// closedPort is an address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// shown is the lines of the reply err carries.
func shown(t *testing.T, err error) string {
	t.Helper()
	var ge *gridftp.Error
	if !errors.As(err, &ge) {
		t.Fatalf("err %v", err)
	}
	t.Logf("reply:\n%s", ge.Reply.Text())
	return ge.Reply.Text()
}

func TestUnreachableChild(t *testing.T) {
	data := payload(size)
	a, c, d := start(t), start(t), start(t)
	dead := "ftp://" + closedPort(t) + "/f?"
	// A's children: dead (with D below it) and C.
	spec := mcStack("cc=2", dead, c.url("f", ""), d.url("f", ""))
	begin := time.Now()
	err := upload(t, a, spec, "f", bytes.NewReader(data), size)
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("took %v", took)
	}
	text := shown(t, err)
	for _, want := range []string{Show(dead), Show(d.url("f", ""))} {
		if !strings.Contains(text, want) {
			t.Errorf("reply does not name %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, c.addr) {
		t.Errorf("reply names C, which got the file:\n%s", text)
	}
	if !bytes.Equal(a.content(t, "f"), data) || !bytes.Equal(c.content(t, "f"), data) {
		t.Error("A or C differs")
	}
}

// killAt is a source that closes a server once a read reaches an offset.
type killAt struct {
	io.ReaderAt
	at   int64
	once sync.Once
	kill func()
}

func (k *killAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= k.at {
		k.once.Do(k.kill)
	}
	return k.ReaderAt.ReadAt(p, off)
}

func TestChildKilled(t *testing.T) {
	data := payload(size)
	t.Run("direct child", func(t *testing.T) {
		a, b, c := start(t), start(t), start(t)
		spec := mcStack("cc=2", b.url("f", ""), c.url("f", ""))
		src := &killAt{ReaderAt: bytes.NewReader(data), at: size / 2, kill: func() { b.srv.Close() }}
		begin := time.Now()
		err := upload(t, a, spec, "f", src, size)
		if took := time.Since(begin); took > 10*time.Second {
			t.Errorf("took %v", took)
		}
		text := shown(t, err)
		if !strings.Contains(text, b.addr) || strings.Contains(text, c.addr) {
			t.Errorf("reply should name B only:\n%s", text)
		}
		if !bytes.Equal(a.content(t, "f"), data) || !bytes.Equal(c.content(t, "f"), data) {
			t.Error("A or C differs")
		}
	})
	t.Run("grandchild", func(t *testing.T) {
		// A -> B -> C; C dies: B reports it, and A passes on B's report.
		a, b, c := start(t), start(t), start(t)
		spec := mcStack("cc=1", b.url("f", ""), c.url("f", ""))
		src := &killAt{ReaderAt: bytes.NewReader(data), at: size / 2, kill: func() { c.srv.Close() }}
		text := shown(t, upload(t, a, spec, "f", src, size))
		if !strings.Contains(text, c.addr) || strings.Contains(text, b.addr) {
			t.Errorf("reply should name C only:\n%s", text)
		}
		if !bytes.Equal(a.content(t, "f"), data) || !bytes.Equal(b.content(t, "f"), data) {
			t.Error("A or B differs")
		}
	})
}

// TestChildOutsideTargetPolicy: a client cannot make a server connect
// where its target policy forbids (an FTP bounce by another road): the
// child is never reached, and the reply names it.
func TestChildOutsideTargetPolicy(t *testing.T) {
	data := payload(1 << 20)
	a := start(t)
	a.srv.TargetPolicy.Allow = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")} // not loopback
	// The child listens on another address than the client's own (which a
	// server may always connect to).
	root, fs := servertest.Root(t)
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skip("no 127.0.0.2 here:", err)
	}
	b := &node{root: root, addr: ln.Addr().String(), srv: &server.Server{FS: fs, Anonymous: true, AnonymousWrite: true}}
	go b.srv.Serve(ln)
	t.Cleanup(func() { b.srv.Close() })
	spec := mcStack("cc=1", b.url("f", ""))
	text := shown(t, upload(t, a, spec, "f", bytes.NewReader(data), int64(len(data))))
	if !strings.Contains(text, Show(b.url("f", ""))) {
		t.Errorf("reply does not name the refused child:\n%s", text)
	}
	if b.srv.Sessions() != 0 || fileExists(filepath.Join(b.root, "f")) {
		t.Error("the refused child was reached")
	}
	if !bytes.Equal(a.content(t, "f"), data) {
		t.Error("the first hop's own copy differs")
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
