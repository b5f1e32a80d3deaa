package interop

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A striped endpoint of ferry's (a front end and its data movers, each a
// ferry gridftp process over one root) and one of GCT's (a front end with
// -r and data nodes with -dn), on loopback.

// waitListening waits until something accepts TCP connections at addr:
// a mover and a GCT data node send no banner to a stranger.
func waitListening(t *testing.T, p *proc, addr string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if p.exited() {
			t.Fatalf("%s: exited before serving: %v", addr, p.err)
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s", addr)
}

// ferryStriped is a ferry front end and its movers.
type ferryStriped struct {
	*ferryServer
	movers []*child
	addrs  []string
}

// startFerryStriped starts n ferry data movers and their front end over
// one fresh root.
func startFerryStriped(t *testing.T, n int) *ferryStriped {
	t.Helper()
	needFerry(t)
	root, dir := t.TempDir(), t.TempDir()
	key := filepath.Join(dir, "mover.key")
	secret := make([]byte, 32)
	rand.Read(secret)
	if err := os.WriteFile(key, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	fs := &ferryStriped{}
	for i := range n {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
		m := &child{t: t, name: fmt.Sprintf("ferry mover %d", i), log: &logBuffer{},
			args: []string{"gridftp", "--root", root, "--listen", addr, "--mover", "--mover-key", key}}
		t.Cleanup(func() { m.stop(10 * time.Second) })
		waitListening(t, m.launch(), addr)
		fs.movers, fs.addrs = append(fs.movers, m), append(fs.addrs, addr)
	}
	fs.ferryServer = startFerryConfig(t, ferryConfig{Root: root, Anonymous: true,
		Args: []string{"--movers", strings.Join(fs.addrs, ","), "--mover-key", key}})
	return fs
}

// startGCTStriped starts n GCT data nodes and a front end driving them;
// the front end's root is the tree (the nodes open its absolute paths).
func startGCTStriped(t *testing.T, n int) *gctServer {
	t.Helper()
	bin, err := toolPath("globus-gridftp-server")
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for range n {
		port := freePort(t)
		node := &gctServer{t: t, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			logFile: filepath.Join(t.TempDir(), "node.log"), out: &logBuffer{}}
		args := []string{"-dn", "-aa", "-p", strconv.Itoa(port),
			"-control-interface", "127.0.0.1", "-data-interface", "127.0.0.1", "-d", "ERROR", "-l", node.logFile}
		if os.Geteuid() == 0 {
			args = append(args, "-anonymous-user", "nobody")
		}
		p, err := startProc(bin, args, node.out)
		if err != nil {
			t.Fatalf("start a GCT data node: %v", err)
		}
		node.p = p
		t.Cleanup(node.stop)
		waitListening(t, p, node.addr)
		nodes = append(nodes, node.addr)
	}
	return startGCTServer(t, "-r", strings.Join(nodes, ","))
}

// TestStripedGUC: globus-url-copy -stripe puts into and gets from ferry
// striped endpoints of 1, 2 and 4 movers, with GCT's block and with
// another.
func TestStripedGUC(t *testing.T) {
	needTools(t)
	src := filepath.Join(t.TempDir(), "src")
	writeRandomFile(t, src, 9<<20+4321)
	for _, n := range []int{1, 2, 4} {
		fs := startFerryStriped(t, n)
		for _, opts := range [][]string{nil, {"-sbs", "262144", "-p", "2"}} {
			name := fmt.Sprintf("%d movers %v", n, opts)
			guc(t, append(append([]string{"-stripe"}, opts...), fileURL(src), fs.URL("up"))...)
			same(t, name+" put", src, fs.Path("up"))
			back := filepath.Join(t.TempDir(), "back")
			guc(t, append(append([]string{"-stripe"}, opts...), fs.URL("up"), fileURL(back))...)
			same(t, name+" get", src, back)
		}
	}
}

// TestStripedThirdParty: globus-url-copy -stripe between a ferry striped
// endpoint and GCT's, both ways, and between two of ferry's, in the
// Blocked layout (GCT's block and a smaller one, 2 streams a stripe) and
// the Partitioned one (-sbs 0).
func TestStripedThirdParty(t *testing.T) {
	needTools(t)
	f1, f2 := startFerryStriped(t, 2), startFerryStriped(t, 2)
	g := startGCTStriped(t, 2)
	writeRandomFile(t, f1.Path("src"), 7<<20+999)
	for _, opts := range [][]string{nil, {"-sbs", "262144", "-p", "2"}, {"-sbs", "0"}} {
		steps := []struct {
			name     string
			from, to string
			path     string
		}{
			{"ferry to GCT", f1.URL("src"), g.URL("g"), g.Path("g")},
			{"GCT to ferry", g.URL("g"), f2.URL("f"), f2.Path("f")},
			{"ferry to ferry", f2.URL("f"), f1.URL("back"), f1.Path("back")},
		}
		for _, s := range steps {
			os.Remove(s.path)
			guc(t, append(append([]string{"-stripe"}, opts...), s.from, s.to)...)
			same(t, fmt.Sprintf("%s %v", s.name, opts), f1.Path("src"), s.path)
		}
	}
}

// same fails the test unless got holds what want does.
func same(t *testing.T, what, want, got string) {
	t.Helper()
	if err := compareFiles(want, got); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
