//go:build interop

package interop

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"ferry/internal/partname"
)

// TestCopyManyInterruptedCLI: `ferry copy` to three destinations through
// a forwarding tree (a ferry head that forwards to a ferry server and a
// GCT server) is interrupted (SIGINT) at a random point of its tree pass,
// one seed per subtest: while it runs and after, no destination ever
// shows a file under its final name that is not whole, and the copy says
// it kept partial files; the same command
// again with -s size leaves every destination byte-equal to the source,
// nothing temporary left, and sends again no more than the files the
// head did not have whole: the others' copies of the rest are resumed
// from their temporary names.
func TestCopyManyInterruptedCLI(t *testing.T) {
	needTools(t)
	seed := uint64(time.Now().UnixNano())
	for run := range 2 {
		seed := seed + uint64(run)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			copyManyInterrupted(t, rand.New(rand.NewPCG(seed, 0)))
		})
	}
}

func copyManyInterrupted(t *testing.T, rng *rand.Rand) {
	const n, size = 4, 16 << 20
	src := startFerryConfig(t, ferryConfig{Anonymous: true})
	for i := range n {
		writeRandomFile(t, src.Path(fmt.Sprintf("set/f%d", i)), size)
	}
	// The head is the only server that forwards: the same one again.
	head := startFerryConfig(t, ferryConfig{Anonymous: true, Args: []string{"--multicast"}})
	leaf := startFerryConfig(t, ferryConfig{Anonymous: true})
	gct := startGCTServer(t)
	dsts := []server{head, leaf, gct}
	args := []string{"-r", "-q", "--fanout", "2", "-cc", "1", "--verify-checksum", src.URL("set")}
	for _, d := range dsts {
		args = append(args, d.URL("copy"))
	}
	// short reports the files under their final names at d that are not
	// the source's size, and counts those that are.
	short := func(d server) (bad []string, whole int) {
		es, _ := os.ReadDir(d.Path("copy"))
		for _, e := range es {
			if partname.Is(e.Name()) || e.IsDir() {
				continue
			}
			st, err := e.Info()
			if err != nil {
				continue // renamed meanwhile
			}
			if st.Size() != size {
				bad = append(bad, fmt.Sprintf("%s at %s %s: %d bytes of %d", e.Name(), d.Name(), d.Addr(), st.Size(), size))
			} else {
				whole++
			}
		}
		return bad, whole
	}

	th := startThrottle(t, src, time.Millisecond, 20*time.Millisecond)
	at := int64(float64(n*size) * (0.15 + 0.7*rng.Float64())) // bytes at the GCT leaf, the tree's last copy
	t.Logf("interrupted once %d MiB of %d arrived at the GCT server", at>>20, n*size>>20)
	var out logBuffer
	p, err := startProc(ferryBin, append([]string{"copy"}, args...), &out)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	deadline := time.Now().Add(2 * time.Minute)
	for !p.exited() && dirAllocated(gct.Path("copy")) < at {
		if time.Now().After(deadline) {
			t.Fatalf("%d MiB arrived within 2 minutes:\n%s", dirAllocated(gct.Path("copy"))>>20, out.String())
		}
		for _, d := range dsts {
			bad, _ := short(d)
			seen = append(seen, bad...)
		}
		time.Sleep(time.Millisecond)
	}
	if p.exited() {
		t.Fatalf("the copy ended before it could be interrupted:\n%s", out.String())
	}
	p.signalGroup(syscall.SIGINT)
	if !p.wait(30 * time.Second) {
		t.Fatalf("ferry copy still runs 30s after SIGINT:\n%s", out.String())
	}
	th.release()
	if !strings.Contains(out.String(), "kept as .ferry-*.part; run the same command again to resume") {
		t.Errorf("the interrupted copy does not say what it kept:\n%s", out.String())
	}
	whole := 0
	for _, d := range dsts {
		bad, w := short(d)
		seen = append(seen, bad...)
		if d == server(head) {
			whole = w
		}
	}
	if len(seen) > 0 {
		t.Errorf("files seen under their final names before they were whole: %s", strings.Join(seen[:min(len(seen), 10)], "; "))
	}
	t.Logf("%d of %d files were whole at the head", whole, n)

	r := mustCopy(t, append([]string{"-s", "size"}, args...)...)
	for _, d := range dsts {
		if err := compareTrees(src.Path("set"), d.Path("copy")); err != nil {
			t.Errorf("%s %s: %v", d.Name(), d.Addr(), err)
		}
	}
	if moved, most := movedBytes(t, r), int64(n-whole)*size+1<<20; moved > most {
		t.Errorf("again: moved %d MiB, want at most the %d files not whole at the head (%d MiB):\n%s", moved>>20, n-whole, most>>20, r)
	}
}
