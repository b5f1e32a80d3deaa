package forward

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/gridftp/multicast"
	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/stack"
	"ferry/storage"
)

// node is one in-process ferry server offering the multicast layer.
type node struct {
	root string
	addr string
	srv  *server.Server
}

// start serves a fresh tree with the multicast layer; configure adjusts
// the server before it serves.
func start(t *testing.T, configure ...func(*server.Server)) *node {
	t.Helper()
	root, fs := servertest.Root(t)
	return serve(t, root, fs, configure...)
}

// serve serves fs, the tree at root, with the multicast layer.
func serve(t *testing.T, root string, fs storage.Driver, configure ...func(*server.Server)) *node {
	t.Helper()
	reg := stack.Kinds()
	maps.Copy(reg, Kinds())
	srv := &server.Server{FS: fs, Anonymous: true, Layers: reg, DataTimeout: 10 * time.Second}
	for _, f := range configure {
		f(srv)
	}
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
		b.WriteString("#" + multicast.Encode(u))
	}
	return "file," + multicast.Name + ":" + multicast.Encode(b.String())
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
	return uploadP(t, first, spec, name, src, size, 4)
}

// bound is how long an upload may take: every test ends in bounded time,
// however a child fails (GCT's forwarder hangs when one does).
const bound = time.Minute

// uploadP stores src at name on first through spec with p streams, in
// blocks small enough that streams bring them in any order.
func uploadP(t *testing.T, first *node, spec, name string, src io.ReaderAt, size int64, p int) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
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
	c.SetOptions(client.Options{Parallel: p, BlockSize: 64 << 10})
	_, err = c.Put(ctx, "/"+name, src, 0, size)
	if ctx.Err() != nil {
		t.Fatalf("the upload did not end within %v: %v", bound, err)
	}
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

// names fails the test unless err is the failure report of exactly the
// destinations want (each "url?opts").
func names(t *testing.T, err error, want ...string) {
	t.Helper()
	text := shown(t, err)
	var got []string
	_, list, ok := strings.Cut(text, multicast.Marker)
	if !ok {
		t.Fatalf("no failure report in the reply:\n%s", text)
	}
	for _, l := range strings.Split(list, "\n")[1:] {
		if l != "End." {
			got = append(got, l)
		}
	}
	for i, u := range want {
		want[i] = multicast.Show(u)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the report names %q, want %q", got, want)
	}
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
	err := upload(t, a, spec, "f", bytes.NewReader(data), size)
	names(t, err, dead, d.url("f", ""))
	if !bytes.Equal(a.content(t, "f"), data) || !bytes.Equal(c.content(t, "f"), data) {
		t.Error("A or C differs")
	}
}

// TestChildAtOwnDataPort: a child at the hop's own passive data port (a
// free port the kernel then gave the hop's PASV, as the port of
// "unreachable" once was in interop TestFerryMulticastGCTHeadFerryChildren)
// is not connected to. Such a connection joined the hop's own transfer as
// a data stream and waited there for a banner, while the hop waited for
// the child to take its blocks; when the child gave up (SetupTimeout) and
// closed it, the hop's transfer failed as cut short, and a GCT parent,
// which hangs when a child fails (reference/grid-extensions.md, bug 1),
// hung the whole tree. The hop drops the child at once and names it; its
// own copy is whole.
func TestChildAtOwnDataPort(t *testing.T) {
	port := netip.MustParseAddrPort(closedPort(t))
	a := start(t, func(s *server.Server) { s.PortLow, s.PortHigh = int(port.Port()), int(port.Port()) })
	data := payload(size)
	child := "ftp://" + port.String() + "/f?"
	err := uploadP(t, a, mcStack("cc=1", child), "f", bytes.NewReader(data), size, 1)
	names(t, err, child)
	if !bytes.Equal(a.content(t, "f"), data) {
		t.Error("the hop's own copy differs")
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
		names(t, upload(t, a, spec, "f", src, size), b.url("f", ""))
		if !bytes.Equal(a.content(t, "f"), data) || !bytes.Equal(c.content(t, "f"), data) {
			t.Error("A or C differs")
		}
	})
	t.Run("grandchild", func(t *testing.T) {
		// A -> B -> C; C dies: B reports it, and A passes on B's report.
		a, b, c := start(t), start(t), start(t)
		spec := mcStack("cc=1", b.url("f", ""), c.url("f", ""))
		src := &killAt{ReaderAt: bytes.NewReader(data), at: size / 2, kill: func() { c.srv.Close() }}
		names(t, upload(t, a, spec, "f", src, size), c.url("f", ""))
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
	if !strings.Contains(text, multicast.Show(b.url("f", ""))) {
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

// TestTrees: every destination of trees of 1 to 8 destinations, at
// fan-outs 1, 2 and 4, with 1 and 4 streams to each child and into the
// first hop (whose blocks then come in any order), holds the file byte
// for byte, and each hop checked its children's copies.
func TestTrees(t *testing.T) {
	data := payload(3<<20 + 12345)
	for _, n := range []int{1, 2, 4, 8} {
		for _, cc := range []int{1, 2, 4} {
			for _, p := range []int{1, 4} {
				for _, in := range []int{1, 4} {
					if n == 1 && (cc > 1 || p > 1) {
						continue // no children: nothing of theirs to vary
					}
					opts := fmt.Sprintf("cc=%d;P=%d", cc, p)
					t.Run(fmt.Sprintf("n=%d/%s/p=%d", n, opts, in), func(t *testing.T) {
						nodes := make([]*node, n)
						var urls []string
						for i := range nodes {
							nodes[i] = start(t)
							if i > 0 {
								urls = append(urls, nodes[i].url("f", opts))
							}
						}
						if err := uploadP(t, nodes[0], mcStack(opts, urls...), "f", bytes.NewReader(data), int64(len(data)), in); err != nil {
							t.Fatal(err)
						}
						for i, nd := range nodes {
							if got := nd.content(t, "f"); !bytes.Equal(got, data) {
								t.Errorf("destination %d: %d bytes, differ from the source", i, len(got))
							}
						}
					})
				}
			}
		}
	}
}

// TestChildWithSubtreeKilled: a child that dies mid-transfer takes its
// subtree with it; its sibling and the first hop still get the file, and
// the report names exactly the dead child and its subtree.
func TestChildWithSubtreeKilled(t *testing.T) {
	data := payload(size)
	for _, p := range []string{"P=1", "P=4"} {
		t.Run(p, func(t *testing.T) {
			// A's children: B (with D, E and F below it) and C (with G),
			// as GCT plans front-first.
			a, b, c, d, e, f, g := start(t), start(t), start(t), start(t), start(t), start(t), start(t)
			urls := []string{b.url("f", p), c.url("f", p), d.url("f", p), e.url("f", p), f.url("f", p), g.url("f", p)}
			src := &killAt{ReaderAt: bytes.NewReader(data), at: size / 2, kill: func() { b.srv.Close() }}
			names(t, upload(t, a, mcStack("cc=2;"+p, urls...), "f", src, size), urls[0], urls[2], urls[3], urls[4])
			for _, n := range []*node{a, c, g} {
				if !bytes.Equal(n.content(t, "f"), data) {
					t.Errorf("%s differs", n.addr)
				}
			}
		})
	}
}
