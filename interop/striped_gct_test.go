//go:build interop

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
	"sync"
	"testing"
	"time"

	"ferry/engine"
	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/service/domain"
	"ferry/service/gridops"
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
// partitioned: SPAS gives one address per node, the markers the stripes
// send stay within the file (GCT may send none before the 226), and the
// copy is byte for byte the source.
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
		layout gridftp.Layout
	}{
		{"blocked", src, gridftp.Layout{BlockSize: 256 << 10}},
		{"partitioned", src, gridftp.Layout{Partitioned: true}},
		{"plain-source", plain, gridftp.Layout{BlockSize: 1 << 20}}, // only the destination stripes
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
			// final markers, and once none at all): what they say is a
			// lower bound, the 226 the word on the whole file.
			if most > int64(len(data)) {
				t.Errorf("perf markers add up to %d bytes, more than the %d of the file", most, len(data))
			}
			if most == 0 {
				t.Logf("no perf marker before the 226")
			}
			if markers == 0 {
				t.Logf("no range marker before the 226")
			}
			if have.End() > int64(len(data)) {
				t.Errorf("%d range markers, union %s; want them within 0-%d", markers, have, len(data))
			}
		})
	}
}

// wayNotes is an engine recorder that keeps what the copy says of its
// ways (engine.Ways).
type wayNotes struct {
	*engineRecorder
	mu    sync.Mutex
	notes []string
}

func (w *wayNotes) Way(way engine.Way, note string) {
	w.mu.Lock()
	w.notes = append(w.notes, way.String()+": "+note)
	w.mu.Unlock()
}

// TestEngineStripedGCT: the engine stripes large files to a GCT striped
// endpoint (from a striped one and from a plain one) and moves small
// ones plain; when the destination also lists a second server of its
// storage, it tries striping on one large file and spreading chunks on
// the next, and moves the rest the faster way. Every copy is compared
// byte for byte.
func TestEngineStripedGCT(t *testing.T) {
	const mib = 1 << 20
	src, dst := startStripedGCT(t, 2), startStripedGCT(t, 2)
	plainSrc := startGCTServer(t)
	plainDst := startGCTAt(t, dst.root) // a second server of the destination's storage
	files := map[string][]byte{"big1": nil, "big2": nil, "big3": nil, "small": nil}
	for name := range files {
		n := 20*mib + 4321
		if name == "small" {
			n = 100 << 10
		}
		files[name] = make([]byte, n)
		rand.Read(files[name])
		for _, s := range []*gctServer{src, plainSrc} {
			if err := os.WriteFile(s.Path("in/"+name), files[name], 0o666); err != nil {
				if err := os.MkdirAll(s.Path("in"), 0o777); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(s.Path("in/"+name), files[name], 0o666); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, tc := range []struct {
		name    string
		src     *gctServer
		servers []string
		way     engine.Way
		notes   []string // what the copy says of its ways, in order (prefixes)
	}{
		{"striped", src, nil, engine.WayStriped,
			[]string{"striped: striped for files of 16 MiB or more: stripes (SPAS): 2 at the destination, 2 at the source"}},
		{"plain source", plainSrc, nil, engine.WayStriped,
			[]string{"striped: striped for files of 16 MiB or more: stripes (SPAS): 2 at the destination, 1 at the source"}},
		{"choice", src, []string{plainDst.Addr()}, -1, []string{
			"striped: trying striped, then spread, for files of 16 MiB or more: stripes (SPAS): 2 at the destination, 2 at the source; servers: 1 at the source, 2 at the destination",
			"spread: trying spread on ", "", // the choice: either way
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &wayNotes{engineRecorder: newEngineRecorder()}
			opts := engineOptions()
			opts.Recursive, opts.StripeSize = true, 16*mib
			d := endpointOf(dst)
			d.Servers = tc.servers
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := engine.Copy(ctx, endpointOf(tc.src), d, []engine.Item{{Src: epPath(tc.src, "in"), Dst: epPath(dst, tc.name)}}, opts, rep)
			if err != nil || res.Transferred != len(files) {
				t.Fatalf("%+v %v\n%s", res, err, rep.faultLog())
			}
			t.Logf("settings %+v; ways: %q", res.Settings, rep.notes)
			for name, data := range files {
				got, err := os.ReadFile(dst.Path(tc.name + "/" + name))
				if err != nil || !bytes.Equal(got, data) {
					t.Errorf("%s differs (%v)", name, err)
				}
			}
			if len(rep.notes) != len(tc.notes) {
				t.Fatalf("the copy said %q of its ways, want %d notes", rep.notes, len(tc.notes))
			}
			for i, want := range tc.notes {
				if !strings.HasPrefix(rep.notes[i], want) {
					t.Errorf("note %d: %q, want %q...", i, rep.notes[i], want)
				}
			}
			if tc.way >= 0 && res.Settings.Way != tc.way {
				t.Errorf("way %s, want %s", res.Settings.Way, tc.way)
			}
			if res.Settings.Stripes != 2 {
				t.Errorf("Stripes = %d, want 2", res.Settings.Stripes)
			}
		})
	}
}

// TestServerStatesGCT: the service's probe of an endpoint's servers
// counts a GCT striped front end's stripes (SPAS; it has no SITE MOVERS)
// and says which server is down.
func TestServerStatesGCT(t *testing.T) {
	fe, plain := startStripedGCT(t, 2), startGCTServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "ftp://" + ln.Addr().String()
	ln.Close()
	ep := domain.Endpoint{Owner: "alice", Name: "striped", Auth: domain.AuthAnonymous,
		Servers: []string{"ftp://" + fe.Addr(), "ftp://" + plain.Addr(), down}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	states, err := (&gridops.Ops{}).ServerStates(ctx, ep, domain.Login{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		up      bool
		stripes int
	}{{true, 2}, {true, 1}, {false, 0}}
	for i, st := range states {
		if st.URI != ep.Servers[i] || st.Up != want[i].up || st.Stripes != want[i].stripes || len(st.Movers) != 0 {
			t.Errorf("server %d: %+v, want up %v with %d stripes", i, st, want[i].up, want[i].stripes)
		}
	}
	if len(states) != 3 || !strings.Contains(states[2].Error, "refused") {
		t.Errorf("states %+v", states)
	}
}
