package main

import (
	"encoding/binary"
	"io"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeDev is a node's device: Read hands out its packets (IPv4 headers
// with a sequence number in the identification field), at most one per
// every, then io.EOF; Write records what arrives.
type fakeDev struct {
	mu    sync.Mutex
	pkts  [][]byte
	i     int
	at    []int64
	every time.Duration
	got   []arrival
}

type arrival struct {
	src netip.Addr
	seq int
	n   int
	at  int64
}

// ipv4 is a packet of n bytes from src to dst with sequence number seq.
func ipv4(src, dst string, seq, n int) []byte {
	p := make([]byte, n)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[4:], uint16(seq))
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(p[12:], s[:])
	copy(p[16:], d[:])
	return p
}

func (f *fakeDev) Read(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.i == len(f.pkts) {
		return 0, io.EOF
	}
	if f.every > 0 && f.i > 0 {
		time.Sleep(f.every)
	}
	n := copy(b, f.pkts[f.i])
	f.at = append(f.at, now())
	f.i++
	return n, nil
}

func (f *fakeDev) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, arrival{netip.AddrFrom4([4]byte(b[12:16])), int(binary.BigEndian.Uint16(b[4:])), len(b), now()})
	return len(b), nil
}

var hubIPs = []string{"10.77.1.10", "10.77.1.11", "10.77.1.12"}

func testHub(t *testing.T, link linkConf, devs []*fakeDev) *hub {
	t.Helper()
	var specs []nodeSpec
	var rw []io.ReadWriter
	for i, d := range devs {
		specs = append(specs, nodeSpec{dev: "t" + hubIPs[i], ip: netip.MustParseAddr(hubIPs[i]), link: link})
		rw = append(rw, d)
	}
	h, err := newHub(specs, rw, 1, 4096, 1500)
	if err != nil {
		t.Fatal(err)
	}
	errs, drain := h.start()
	for range devs {
		if err := <-errs; err == nil || !strings.Contains(err.Error(), "EOF") {
			t.Fatalf("reader: %v", err)
		}
	}
	drain()
	return h
}

func TestHubRoutesInOrderWithTwoDelays(t *testing.T) {
	// Node 0 sends alternately to 1 and 2, node 1 to 0: each packet arrives
	// at its destination only, in order, after both links' delay.
	const delay = 10 * time.Millisecond
	d0 := &fakeDev{every: 100 * time.Microsecond}
	for i := range 40 {
		d0.pkts = append(d0.pkts, ipv4(hubIPs[0], hubIPs[1+i%2], i, 100+i))
	}
	d1 := &fakeDev{}
	for i := range 5 {
		d1.pkts = append(d1.pkts, ipv4(hubIPs[1], hubIPs[0], i, 60))
	}
	d2 := &fakeDev{}
	h := testHub(t, linkConf{delay: delay, queue: "auto"}, []*fakeDev{d0, d1, d2})
	for j, d := range []*fakeDev{d1, d2} {
		if len(d.got) != 20 {
			t.Fatalf("node %d got %d packets; want 20", j+1, len(d.got))
		}
		for k, a := range d.got {
			seq := 2*k + j
			if a.seq != seq || a.n != 100+seq || a.src.String() != hubIPs[0] {
				t.Fatalf("node %d packet %d: %+v; want seq %d from %s", j+1, k, a, seq, hubIPs[0])
			}
			lag := time.Duration(a.at - d0.at[seq])
			if lag < 2*delay || lag > 2*delay+hang {
				t.Errorf("node %d packet %d delayed %v; want %v", j+1, k, lag, 2*delay)
			}
		}
	}
	if len(d0.got) != 5 {
		t.Errorf("node 0 got %d packets; want 5", len(d0.got))
	}
	if n := h.unroutable.Load(); n != 0 {
		t.Errorf("%d unroutable", n)
	}
	if got := h.nodes[0].up.stats.pkts.Load(); got != 40 {
		t.Errorf("node 0's uplink counted %d packets", got)
	}
	if got := h.nodes[2].down.stats.pkts.Load(); got != 20 {
		t.Errorf("node 2's downlink counted %d packets", got)
	}
}

func TestHubUplinkCapsAllItSends(t *testing.T) {
	// Node 0 sends 200 packets of 1250 bytes at once, half to node 1, half
	// to node 2, over a 100 Mbit/s uplink (100 µs a packet): the last leaves
	// after 20 ms, although each downlink carries only half.
	d0 := &fakeDev{}
	for i := range 200 {
		d0.pkts = append(d0.pkts, ipv4(hubIPs[0], hubIPs[1+i%2], i, 1250))
	}
	d1, d2 := &fakeDev{}, &fakeDev{}
	testHub(t, linkConf{upRate: 100e6, downRate: 100e6, delay: time.Millisecond, queue: "1MB"}, []*fakeDev{d0, d1, d2})
	if len(d1.got) != 100 || len(d2.got) != 100 {
		t.Fatalf("got %d and %d packets; want 100 each", len(d1.got), len(d2.got))
	}
	last := max(d1.got[99].at, d2.got[99].at)
	if span := time.Duration(last - d0.at[0]); span < 22*time.Millisecond {
		t.Errorf("last packet after %v; want >= 22ms (20 ms on the uplink, 2 ms delay)", span)
	}
}

func TestHubDownlinkCapsAllItReceives(t *testing.T) {
	// Nodes 0 and 1 each send 100 packets of 1250 bytes at once to node 2:
	// their uplinks run in parallel (10 ms each), node 2's downlink at
	// 100 Mbit/s takes 20 ms for the 200, and interleaves them.
	d0, d1, d2 := &fakeDev{}, &fakeDev{}, &fakeDev{}
	for i := range 100 {
		d0.pkts = append(d0.pkts, ipv4(hubIPs[0], hubIPs[2], i, 1250))
		d1.pkts = append(d1.pkts, ipv4(hubIPs[1], hubIPs[2], i, 1250))
	}
	h := testHub(t, linkConf{upRate: 100e6, downRate: 100e6, delay: time.Millisecond, queue: "1MB"}, []*fakeDev{d0, d1, d2})
	if len(d2.got) != 200 {
		t.Fatalf("node 2 got %d packets; want 200", len(d2.got))
	}
	first := min(d0.at[0], d1.at[0])
	if span := time.Duration(d2.got[199].at - first); span < 22*time.Millisecond {
		t.Errorf("last packet after %v; want >= 22ms (20 ms on the downlink, 2 ms delay)", span)
	}
	next := map[netip.Addr]int{}
	for _, a := range d2.got {
		if a.seq != next[a.src] {
			t.Fatalf("from %v: seq %d, want %d (reordered)", a.src, a.seq, next[a.src])
		}
		next[a.src]++
	}
	if d := h.nodes[2].down.stats.queueDrops.Load(); d != 0 {
		t.Errorf("%d queue drops", d)
	}
}

func TestHubUnroutable(t *testing.T) {
	d0 := &fakeDev{pkts: [][]byte{
		ipv4(hubIPs[0], "10.77.1.99", 0, 60), // to no node
		ipv4(hubIPs[0], hubIPs[0], 1, 60),    // to itself
		{0x60, 0, 0, 0},                      // IPv6
		ipv4(hubIPs[0], hubIPs[1], 3, 60),
	}}
	d1, d2 := &fakeDev{}, &fakeDev{}
	h := testHub(t, linkConf{queue: "auto"}, []*fakeDev{d0, d1, d2})
	if n := h.unroutable.Load(); n != 3 {
		t.Errorf("%d unroutable; want 3", n)
	}
	if len(d1.got) != 1 || d1.got[0].seq != 3 || len(d2.got) != 0 {
		t.Errorf("node 1 got %+v, node 2 %+v", d1.got, d2.got)
	}
}

func TestParseNode(t *testing.T) {
	def := linkConf{upRate: 1e8, downRate: 1e8, delay: 15 * time.Millisecond, loss: 0, queue: "auto"}
	n, err := parseNode("ferry1:tun1:10.77.1.11:up=1gbit:delay=5ms:loss=0.001:queue=500", def)
	if err != nil {
		t.Fatal(err)
	}
	want := linkConf{upRate: 1e9, downRate: 1e8, delay: 5 * time.Millisecond, loss: 0.001, queue: "500"}
	if n.ns != "ferry1" || n.dev != "tun1" || n.ip.String() != "10.77.1.11" || n.link != want {
		t.Errorf("got %+v", n)
	}
	if n, _ = parseNode(":tun0:10.0.0.1:rate=10mbit", def); n.link.upRate != 1e7 || n.link.downRate != 1e7 || n.ns != "" {
		t.Errorf("rate=: %+v", n)
	}
	for _, bad := range []string{"ferry1:tun1", "a:b:::", "a:b:10.0.0.1:x=1", "a:b:fe80::1", "a:b:10.0.0.1:delay=-1s", "a:b:10.0.0.1:queue=lots"} {
		if _, err := parseNode(bad, def); err == nil {
			t.Errorf("parseNode(%q): no error", bad)
		}
	}
	// auto: one BDP of a path, rate x 4 x delay: 100 Mbit/s x 60 ms = 750 KB.
	if _, q := hubShaper(1e8, 15*time.Millisecond, "auto"); q != "750000 bytes" {
		t.Errorf("auto queue %s", q)
	}
	if _, q := hubShaper(1e8, 15*time.Millisecond, "0.25bdp"); q != "187500 bytes" {
		t.Errorf("0.25bdp queue %s", q)
	}
}

func TestHubNoAllocs(t *testing.T) {
	// Reading, routing, both shapers and queues do not allocate once warm.
	specs := []nodeSpec{{dev: "a", ip: netip.MustParseAddr(hubIPs[0]), link: linkConf{upRate: 1e9, downRate: 1e9, loss: 0.01}},
		{dev: "b", ip: netip.MustParseAddr(hubIPs[1]), link: linkConf{upRate: 1e9, downRate: 1e9, loss: 0.01}}}
	h, err := newHub(specs, []io.ReadWriter{nil, nil}, 1, 64, 1500)
	if err != nil {
		t.Fatal(err)
	}
	pkt := ipv4(hubIPs[0], hubIPs[1], 0, 1500)
	step := func() {
		b := h.getBuf()
		copy(b, pkt)
		to := h.dest(b[:1500])
		up, down := h.nodes[0].up, h.nodes[to].down
		dep, _ := up.shaper.admit(now(), 1500)
		up.loss.drop()
		up.queue <- packet{buf: b, n: 1500, due: dep, to: to}
		p := <-up.queue
		down.mu.Lock()
		dep, _ = down.shaper.admit(p.due, p.n)
		down.loss.drop()
		down.queue <- packet{buf: p.buf, n: p.n, due: dep}
		down.mu.Unlock()
		p = <-down.queue
		io.Discard.Write(p.buf[:p.n])
		h.putBuf(p.buf)
	}
	step()
	if a := testing.AllocsPerRun(1000, step); a != 0 {
		t.Errorf("%v allocations per packet", a)
	}
}
