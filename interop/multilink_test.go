//go:build interop

package interop

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// overlay is a head node in front of a private network: namespace head
// on 10.203.1.2 (joined to this one, 10.203.1.1), and namespace internal
// on 10.203.2.2, joined only to head (10.203.2.1). Head does not route,
// and here the private network's route is "unreachable": from here,
// internal cannot be reached at all.
type overlay struct{ head, internal string }

func newOverlay(t *testing.T) *overlay {
	t.Helper()
	needNetns(t)
	o := &overlay{head: "ferryovh", internal: "ferryovi"}
	for _, ns := range []string{o.head, o.internal} {
		exec.Command("ip", "netns", "del", ns).Run()
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	}
	exec.Command("ip", "link", "del", "ovh0").Run()
	sh(t, "ip", "netns", "add", o.head)
	sh(t, "ip", "netns", "add", o.internal)
	sh(t, "ip", "link", "add", "ovh0", "type", "veth", "peer", "name", "ovh1")
	sh(t, "ip", "link", "set", "ovh1", "netns", o.head)
	sh(t, "ip", "addr", "add", "10.203.1.1/24", "dev", "ovh0")
	sh(t, "ip", "link", "set", "ovh0", "up")
	sh(t, "ip", "-n", o.head, "link", "add", "ovi0", "type", "veth", "peer", "name", "ovi1")
	sh(t, "ip", "-n", o.head, "link", "set", "ovi1", "netns", o.internal)
	for _, c := range [][]string{
		{"-n", o.head, "addr", "add", "10.203.1.2/24", "dev", "ovh1"},
		{"-n", o.head, "addr", "add", "10.203.2.1/24", "dev", "ovi0"},
		{"-n", o.head, "link", "set", "ovh1", "up"},
		{"-n", o.head, "link", "set", "ovi0", "up"},
		{"-n", o.head, "link", "set", "lo", "up"},
		{"-n", o.internal, "addr", "add", "10.203.2.2/24", "dev", "ovi1"},
		{"-n", o.internal, "link", "set", "ovi1", "up"},
		{"-n", o.internal, "link", "set", "lo", "up"},
	} {
		sh(t, "ip", c...)
	}
	sh(t, "ip", "netns", "exec", o.head, "sysctl", "-qw", "net.ipv4.ip_forward=0")
	// No route from here to the private network: not even the default one.
	exec.Command("ip", "route", "del", "unreachable", "10.203.2.0/24").Run()
	sh(t, "ip", "route", "add", "unreachable", "10.203.2.0/24")
	t.Cleanup(func() { exec.Command("ip", "route", "del", "unreachable", "10.203.2.0/24").Run() })
	return o
}

// serveIn starts an anonymous ferry gridftp on ip:port inside namespace
// ns ("": this one), with extra flags, and waits until it listens.
func serveIn(t *testing.T, ns, ip, port string, extra ...string) *ferryServer {
	t.Helper()
	needFerry(t)
	root := t.TempDir()
	addr := net.JoinHostPort(ip, port)
	args := append([]string{"gridftp", "--root", root, "--listen", addr, "--anonymous", "--anonymous-write"}, extra...)
	s := &ferryServer{child: child{t: t, name: "ferry gridftp", args: args, log: &logBuffer{}}, root: root, addr: addr}
	listening := []string{"ss", "-Hltn", "sport = :" + port}
	if ns != "" {
		s.name, s.bin, s.args = s.name+" in "+ns, "ip", append([]string{"netns", "exec", ns, ferryBin}, args...)
		listening = append([]string{"ip", "netns", "exec", ns}, listening...)
	}
	t.Cleanup(s.stop)
	s.launch()
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, _ := exec.Command(listening[0], listening[1:]...).Output()
		if strings.Contains(string(out), "LISTEN") {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %s:\n%s", s.name, addr, s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// servers starts ferry gridftp at the source (here), on the head node
// (--multicast) and on the internal host, and checks that the internal
// host cannot be reached from here.
func (o *overlay) servers(t *testing.T) (src, head, internal *ferryServer) {
	t.Helper()
	src = serveIn(t, "", "10.203.1.1", freePortOn(t, "10.203.1.1"))
	head = serveIn(t, o.head, "10.203.1.2", "2811", "--multicast")
	internal = serveIn(t, o.internal, "10.203.2.2", "2811")
	if c, err := net.DialTimeout("tcp", internal.addr, 2*time.Second); err == nil {
		c.Close()
		t.Fatal("the internal host is reachable from here: the test proves nothing")
	}
	return src, head, internal
}

// writeSet writes set/big.bin and n small files in set/sub below root.
func writeSet(t *testing.T, root string, n int) {
	t.Helper()
	writeRandomFile(t, filepath.Join(root, "set", "big.bin"), 24<<20+5)
	for i := range n {
		writeRandomFile(t, filepath.Join(root, "set", "sub", fmt.Sprintf("f%d", i)), int64(i*10007))
	}
}

// TestOverlayRoute: a destination on a private network, reached only
// through the head node's server, which forwards and keeps nothing;
// beside it, a destination reached directly. The copy is verified.
func TestOverlayRoute(t *testing.T) {
	src, head, internal := newOverlay(t).servers(t)
	direct := serveIn(t, "", "10.203.1.1", freePortOn(t, "10.203.1.1"))
	writeSet(t, src.root, 5)
	r := runFerryCLI(t, 2*time.Minute, nil, "", "copy", "-r", "--verify-checksum", "-q",
		"--via", internal.addr+"=ftp://"+head.addr,
		"ftp://"+src.addr+"/set", "ftp://"+internal.addr+"/in/set", "ftp://"+direct.addr+"/set")
	if r.code != 0 {
		t.Fatalf("%s\n%s%s", r, r.stdout, r.stderr)
	}
	sameFiles(t, filepath.Join(src.root, "set"), filepath.Join(internal.root, "in", "set"), 6)
	sameFiles(t, filepath.Join(src.root, "set"), filepath.Join(direct.root, "set"), 6)
	left, _ := os.ReadDir(head.root)
	if len(left) != 0 {
		t.Errorf("the head node kept %d entries (%s...): it must only forward", len(left), left[0].Name())
	}
}

// sameFiles fails unless got holds want's n files, equal.
func sameFiles(t *testing.T, want, got string, n int) {
	t.Helper()
	seen := 0
	filepath.WalkDir(want, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		if err := compareFiles(p, filepath.Join(got, rel)); err != nil {
			t.Error(err)
		}
		seen++
		return nil
	})
	if seen != n {
		t.Errorf("%d files in %s, want %d", seen, want, n)
	}
}

// TestCopyManyCLI: ferry copy to several destinations (arguments and an
// -MC file) builds a tree of ferry servers with a GCT server as a leaf;
// every destination gets the tree through the tree, none by repair.
func TestCopyManyCLI(t *testing.T) {
	needTools(t)
	src := startFerryConfig(t, ferryConfig{Anonymous: true})
	var fwd []*ferryServer
	for range 3 {
		fwd = append(fwd, startFerryConfig(t, ferryConfig{Anonymous: true, Args: []string{"--multicast"}}))
	}
	gct := startGCTServer(t)
	writeRandomFile(t, filepath.Join(src.root, "set", "big.bin"), 12<<20+1)
	for i := range 4 {
		writeRandomFile(t, filepath.Join(src.root, "set", "d", fmt.Sprintf("f%d", i)), int64(i*4099+1))
	}
	mc := filepath.Join(t.TempDir(), "mc")
	os.WriteFile(mc, []byte(fwd[2].URL("copy/set")+"\n\n"+gct.URL("copy/set")+"\n"), 0o644)
	r := runFerryCLI(t, 2*time.Minute, nil, "", "copy", "-r", "--verify-checksum", "-q", "--fanout", "1",
		"--mc", mc, src.URL("set"), fwd[0].URL("copy/set"), fwd[1].URL("copy/set"))
	if r.code != 0 {
		t.Fatalf("%s\n%s%s", r, r.stdout, r.stderr)
	}
	out := r.stdout + r.stderr
	if !strings.Contains(out, "forwarded, fan-out 1") {
		t.Errorf("no tree:\n%s", out)
	}
	if strings.Count(out, "5 delivered (0 repaired), 0 skipped, 0 failed") != 4 {
		t.Errorf("not every destination got every file through the tree:\n%s", out)
	}
	for _, root := range []string{fwd[0].root, fwd[1].root, fwd[2].root, gct.Path("")} {
		sameFiles(t, filepath.Join(src.root, "set"), filepath.Join(root, "copy", "set"), 5)
	}
}
