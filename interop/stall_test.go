//go:build interop

package interop

// Silent black holes: a data path (or a whole path) that drops packets
// without a reset. The source ferry gridftp runs in a network namespace
// whose link sends at 40 Mbit/s, so a large file is in flight for
// seconds; the destination runs here; the engine drives them. An
// nftables rule in the namespace drops the packets, then goes: the
// transfer must be declared stalled (not left to TCP's minutes of
// retries), retried, and end with the file equal to its source.

import (
	"context"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/engine"
	"ferry/gridftp/client"
)

// The stall tests' network: this host on stallHost, the namespace on
// stallNS, in 10.234.7.0/24, which is routed "unreachable" on the host
// first: with the link gone, no packet for it follows the default route.
const (
	stallNet   = "10.234.7.0/24"
	stallHost  = "10.234.7.1"
	stallNSIP  = "10.234.7.2"
	stallNSNam = "ferrystl"
)

// newStallNS makes the namespace, its veth pair (stl0 here, stl1 there)
// and the 40 Mbit/s shaper of what it sends, and removes them at cleanup.
func newStallNS(t *testing.T) string {
	t.Helper()
	needNetns(t)
	needFerry(t)
	exec.Command("ip", "netns", "del", stallNSNam).Run()
	exec.Command("ip", "link", "del", "stl0").Run()
	exec.Command("ip", "route", "del", "unreachable", stallNet, "metric", "4000").Run()
	sh(t, "ip", "route", "add", "unreachable", stallNet, "metric", "4000")
	t.Cleanup(func() { exec.Command("ip", "route", "del", "unreachable", stallNet, "metric", "4000").Run() })
	t.Cleanup(func() { exec.Command("ip", "netns", "del", stallNSNam).Run() }) // takes the veth pair with it
	sh(t, "ip", "netns", "add", stallNSNam)
	sh(t, "ip", "link", "add", "stl0", "type", "veth", "peer", "name", "stl1")
	sh(t, "ip", "link", "set", "stl1", "netns", stallNSNam)
	sh(t, "ip", "addr", "add", stallHost+"/24", "dev", "stl0")
	sh(t, "ip", "link", "set", "stl0", "up")
	for _, c := range [][]string{
		{"-n", stallNSNam, "addr", "add", stallNSIP + "/24", "dev", "stl1"},
		{"-n", stallNSNam, "link", "set", "stl1", "up"},
		{"-n", stallNSNam, "link", "set", "lo", "up"},
	} {
		sh(t, "ip", c...)
	}
	sh(t, "ip", "netns", "exec", stallNSNam, "tc", "qdisc", "add", "dev", "stl1", "root",
		"tbf", "rate", "40mbit", "burst", "256kb", "latency", "400ms")
	return stallNSNam
}

// stallRules is the namespace's nftables table that drops, silently, every
// TCP packet in and out but those of the control port (data) or all of
// them (whole).
func stallRules(whole bool) string {
	keep := "tcp sport 2811 accept\n\t\ttcp dport 2811 accept\n\t\t"
	if whole {
		keep = ""
	}
	return `table inet stall {
	chain in {
		type filter hook input priority 0; policy accept;
		iif lo accept
		` + keep + `meta l4proto tcp drop
	}
	chain out {
		type filter hook output priority 0; policy accept;
		oif lo accept
		` + keep + `meta l4proto tcp drop
	}
}
`
}

// TestStallBlackHole: a file in flight from the namespace to ferry
// gridftp or GCT here meets a silent black hole of its data path, or of
// its whole path, for longer than the stall bound (15 s); then the path
// returns. The engine reports the stall as a fault, retries from what
// arrived, and the file arrives whole.
func TestStallBlackHole(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gct   bool // the destination is GCT's server, else ferry's
		whole bool
		hold  time.Duration // at least; up to 5 s more
	}{
		{"ferry data", false, false, 25 * time.Second},
		{"ferry whole path", false, true, 40 * time.Second},
		{"gct data", true, false, 25 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newStallNS(t)
			src := serveIn(t, ns, stallNSIP, "2811")
			var dst server = serveIn(t, "", stallHost, freePortOn(t, stallHost))
			if tc.gct {
				needTools(t)
				dst = startGCTOn(t, stallHost, gctRoot(t, "ferry-interop-stall-"))
			}
			writeRandomFile(t, filepath.Join(src.root, "big"), 64<<20+17)
			o := engineOptions()
			o.Concurrency, o.Parallelism, o.ChunkSize = 1, 2, -1
			// Every copy here ends within a minute or so of the path's return:
			// one still running at the limit has hung on the black hole.
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			o.Deadline = time.Now().Add(3 * time.Minute) // retries until then
			rep := newEngineRecorder()
			type outcome struct {
				res engine.Result
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := engine.Copy(ctx, endpointOf(src), endpointOf(dst),
					[]engine.Item{{Src: "/big", Dst: epPath(dst, "big")}}, o, rep)
				done <- outcome{res, err}
			}()
			// Drop once data is seen moving (the destination's markers), at a
			// random point of the next seconds.
			seed := uint64(time.Now().UnixNano())
			rng := rand.New(rand.NewPCG(seed, 0))
			at := time.Duration(rng.Int64N(int64(3 * time.Second)))
			hold := tc.hold + time.Duration(rng.Int64N(int64(5*time.Second)))
			t.Logf("seed %d: the black hole comes %v after data is seen moving and lasts %v", seed, at, hold)
			for rep.progress.Load() == 0 {
				select {
				case r := <-done:
					t.Fatalf("the copy ended before data was seen moving: %+v %v", r.res, r.err)
				case <-time.After(50 * time.Millisecond):
				}
			}
			time.Sleep(at)
			nft := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
			nft.Stdin = strings.NewReader(stallRules(tc.whole))
			if out, err := nft.CombinedOutput(); err != nil {
				t.Fatalf("nft: %v\n%s", err, out)
			}
			select {
			case r := <-done:
				t.Fatalf("the copy ended inside the black hole: %+v %v", r.res, r.err)
			case <-time.After(hold):
			}
			sh(t, "ip", "netns", "exec", ns, "nft", "delete", "table", "inet", "stall")
			r := <-done
			if r.err != nil || r.res.Transferred != 1 {
				t.Fatalf("%+v %v\nfaults:\n%s", r.res, r.err, rep.faultLog())
			}
			if err := compareFiles(filepath.Join(src.root, "big"), dst.Path("big")); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(rep.faultLog(), client.ErrStalled.Error()) {
				t.Fatalf("no fault says the data channel stalled; faults:\n%s", rep.faultLog())
			}
			t.Logf("%d faults:\n%s", r.res.Faults, rep.faultLog())
		})
	}
}
