package interop

// A striped GCT endpoint on loopback: a front end (globus-gridftp-server
// -r) driving data nodes (-dn), all over one root, and the client's
// striped third-party transfer between two of them.

import (
	"bytes"
	"context"
	"crypto/rand"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
)

// startStripedGCT starts nodes GCT data nodes and a front end that drives
// them, anonymous and on 127.0.0.1, over one fresh root; the front end is
// returned (its Root and URL are the endpoint's). Everything stops at
// cleanup. -aa runs the front end's IPC to its nodes without GSI.
func startStripedGCT(t *testing.T, nodes int) *gctServer {
	t.Helper()
	needTools(t)
	bin, err := toolPath("globus-gridftp-server")
	if err != nil {
		t.Fatal(err)
	}
	root := gctRoot(t, "ferry-interop-striped-")
	var remotes []string
	for i := range nodes {
		port := freePort(t)
		args := []string{"-aa", "-dn", "-p", strconv.Itoa(port),
			"-control-interface", "127.0.0.1", "-data-interface", "127.0.0.1",
			"-home-dir", root, "-d", "ERROR", "-l", t.TempDir() + "/node.log"}
		if os.Geteuid() == 0 {
			args = append(args, "-anonymous-user", "nobody")
		}
		dn := &child{t: t, name: "gct data node " + strconv.Itoa(i), bin: bin, args: args, log: &logBuffer{}}
		p := dn.launch()
		t.Cleanup(func() { p.signalGroup(9); p.wait(5 * time.Second) })
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err := waitListening(p, addr, 10*time.Second); err != nil {
			t.Fatalf("gct data node on %s: %v\n%s", addr, err, dn.log)
		}
		remotes = append(remotes, addr)
	}
	return startGCTAt(t, root, "-r", strings.Join(remotes, ","))
}

// waitListening waits until addr accepts a TCP connection (a data node
// speaks no FTP: there is no banner to wait for).
func waitListening(p *proc, addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		if p.exited() {
			return p.err
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dialGCT logs in anonymously to a GCT server.
func dialGCT(t *testing.T, s *gctServer) *client.Conn {
	t.Helper()
	c, err := client.Dial(context.Background(), s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Login(context.Background(), "anonymous", "ferry@"); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStripedGCTPair: the client's striped third-party transfer between
// two GCT striped endpoints of two data nodes each, blocked and
// partitioned: SPAS gives one address per node, every stripe reports its
// own markers, and the copy is byte for byte the source.
func TestStripedGCTPair(t *testing.T) {
	src, dst := startStripedGCT(t, 2), startStripedGCT(t, 2)
	plain := startGCTServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range []struct {
		srv  *gctServer
		want int
	}{{src, 2}, {plain, 1}} {
		if n, err := dialGCT(t, s.srv).Stripes(ctx); err != nil || n != s.want {
			t.Fatalf("%s: Stripes() = %d, %v; want %d", s.srv.Addr(), n, err, s.want)
		}
	}
	data := make([]byte, 5<<20+12345)
	rand.Read(data)
	for _, s := range []*gctServer{src, plain} {
		if err := os.WriteFile(s.Path("f"), data, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		src    *gctServer
		layout client.Layout
	}{
		{"blocked", src, client.Layout{BlockSize: 256 << 10}},
		{"partitioned", src, client.Layout{}},
		{"plain-source", plain, client.Layout{BlockSize: 1 << 20}}, // only the destination stripes
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src
			p := &client.Pair{Src: dialGCT(t, src), Dst: dialGCT(t, dst), Striping: &tc.layout}
			defer p.Close()
			if err := p.Setup(ctx, 2); err != nil {
				t.Fatal(err)
			}
			if p.Stripes() != 2 {
				t.Fatalf("Stripes() = %d, want 2", p.Stripes())
			}
			part := client.Part{SrcPath: epPath(src, "f"), DstPath: epPath(dst, tc.name), Length: -1}
			if err := p.Start(part); err != nil {
				t.Fatal(err)
			}
			var have gridftp.Ranges
			var most int64
			markers := 0
			err := p.Finish(ctx, part, client.Markers{
				Bytes:  func(n int64) { most = max(most, n) },
				Ranges: func(rs gridftp.Ranges) { have.AddAll(rs); markers++ },
			})
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(dst.Path(tc.name))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("the copy differs (%v, %d bytes of %d)", err, len(got), len(data))
			}
			// GCT's stripes each report their own markers, but not always
			// every stripe before the 226 (seen: only the last stripe's
			// final markers): what they say is a lower bound, the 226 the
			// word on the whole file.
			if most == 0 || most > int64(len(data)) {
				t.Errorf("perf markers add up to %d bytes, want 1 to %d", most, len(data))
			}
			if markers == 0 || have.End() > int64(len(data)) {
				t.Errorf("%d range markers, union %s; want some, within 0-%d", markers, have, len(data))
			}
		})
	}
}
