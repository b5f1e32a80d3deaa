//go:build interop

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

	"ferry/internal/partname"
)

// A striped endpoint of ferry's (a front end and its data movers, each a
// ferry gridftp process over one root) with globus-url-copy -stripe, and
// with one of GCT's (startStripedGCT).

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
		if err := waitListening(m.launch(), addr, 15*time.Second); err != nil {
			t.Fatalf("ferry mover on %s: %v\n%s", addr, err, m.log)
		}
		fs.movers, fs.addrs = append(fs.movers, m), append(fs.addrs, addr)
	}
	fs.ferryServer = startFerryConfig(t, ferryConfig{Root: root, Anonymous: true,
		Args: []string{"--movers", strings.Join(fs.addrs, ","), "--mover-key", key}})
	return fs
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
	g := startStripedGCT(t, 2)
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

// TestStripedCopyMoverKilled: ferry copy stripes a large file between two
// ferry striped endpoints; a destination mover killed mid-file fails that
// transfer with a reply naming a mover, and the copy resumes through the
// movers left from what the range markers showed had arrived.
func TestStripedCopyMoverKilled(t *testing.T) {
	needTools(t)
	src, dst := startFerryStriped(t, 2), startFerryStriped(t, 2)
	const size = 384 << 20
	writeRandomFile(t, src.Path("big"), size)
	done := make(chan cliRun, 1)
	go func() { done <- ferryCopy(t, src.URL("big"), dst.URL("big")) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		// The file arrives under its temporary name until it is whole.
		if fi, err := os.Stat(dst.Path(partname.For("big"))); err == nil && fi.Size() > size/4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the copy did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	dst.movers[1].kill9()
	r := <-done
	if r.code != 0 {
		t.Fatalf("copy after a mover died:\n%s", r)
	}
	same(t, "striped copy after a mover died", src.Path("big"), dst.Path("big"))
	if !strings.Contains(r.stdout+r.stderr, "striped over 2 movers") {
		t.Errorf("the copy did not stripe:\n%s", r)
	}
	// Either end may tell first: the destination's front end names the
	// mover it lost, the source's the mover whose stripe broke.
	if !strings.Contains(r.stdout+r.stderr, "data mover 1 (") {
		t.Errorf("no fault names a mover:\n%s", r)
	}
}
