package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"sync"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]int64{
		"1gbit": 1e9, "500mbit": 500e6, "64kbit": 64e3, "1000": 1000, "2.5gbit": 2.5e9,
		"125mbps": 1e9, "1G": 1e9, "0": 0, "off": 0,
	} {
		got, err := parseRate(in)
		if err != nil || got != want {
			t.Errorf("parseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"fast", "-1gbit", "1xbit"} {
		if _, err := parseRate(in); err == nil {
			t.Errorf("parseRate(%q): no error", in)
		}
	}
}

func TestParseQueue(t *testing.T) {
	for _, c := range []struct {
		in   string
		want queueSpec
	}{
		{"5000", queueSpec{packets: 5000}}, {"100p", queueSpec{packets: 100}},
		{"8MB", queueSpec{bytes: 8e6}}, {"8MiB", queueSpec{bytes: 8 << 20}}, {"64kb", queueSpec{bytes: 64e3}},
		{"0.25bdp", queueSpec{bdp: 0.25}}, {"2BDP", queueSpec{bdp: 2}},
		{"auto", queueSpec{}}, {"", queueSpec{}},
	} {
		got, err := parseQueue(c.in)
		if err != nil || got != c.want {
			t.Errorf("parseQueue(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"-3", "lots", "0", "0bdp", "-1bdp", "bdp"} {
		if _, err := parseQueue(in); err == nil {
			t.Errorf("parseQueue(%q): no error", in)
		}
	}
}

func TestQueueLimits(t *testing.T) {
	const ms = time.Millisecond
	for _, c := range []struct {
		spec  string
		rate  int64
		rtt   time.Duration
		pkts  int
		bytes int64
	}{
		{"auto", 1e9, 60 * ms, 0, 7_500_000},     // one BDP: 1 Gbit/s x 60 ms
		{"1bdp", 1e9, 60 * ms, 0, 7_500_000},     //
		{"0.25bdp", 1e9, 60 * ms, 0, 1_875_000},  // shallow
		{"2bdp", 1e9, 60 * ms, 0, 15_000_000},    // deep
		{"0.25bdp", 1e9, 20 * ms, 0, 625_000},    //
		{"2bdp", 1e9, 150 * ms, 0, 37_500_000},   //
		{"0.25bdp", 1e9, 150 * ms, 0, 4_687_500}, //
		{"0.25bdp", 10e6, 20 * ms, 0, minQueue},  // 6,250 B: the floor
		{"500", 1e9, 60 * ms, 500, 0},            // packets and bytes as given
		{"8MB", 1e9, 60 * ms, 0, 8e6},            //
		{"2bdp", 0, 60 * ms, 0, 0},               // unlimited: no queue
	} {
		q, err := parseQueue(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if p, b := q.limits(c.rate, c.rtt); p != c.pkts || b != c.bytes {
			t.Errorf("%s at %d bit/s, %v: %d packets, %d bytes; want %d, %d", c.spec, c.rate, c.rtt, p, b, c.pkts, c.bytes)
		}
	}
}

func TestShaperSerialization(t *testing.T) {
	s := newShaper(1e9, 0, 0) // 1 Gbit/s: 1500 bytes take 12 µs
	d, ok := s.admit(0, 1500)
	if !ok || d != 12000 {
		t.Fatalf("first packet departs %d, %v; want 12000", d, ok)
	}
	// A packet arriving while the link is busy waits for it.
	if d, _ = s.admit(1000, 1500); d != 24000 {
		t.Fatalf("second packet departs %d; want 24000", d)
	}
	// An idle link sends at once.
	if d, _ = s.admit(1e6, 100); d != 1e6+800 {
		t.Fatalf("after idle departs %d; want %d", d, int64(1e6+800))
	}
	// Odd rates do not drift: 1-byte packets at 3 bit/s take 8/3 s each.
	s = newShaper(3, 0, 0)
	var last int64
	for range 3000 {
		last, _ = s.admit(0, 1)
	}
	if want := int64(3000 * 8e9 / 3); last != want {
		t.Fatalf("3000 bytes at 3 bit/s done at %d; want %d", last, want)
	}
	// Unlimited rate: no delay, never drops.
	s = newShaper(0, 1, 1)
	for i := range 10 {
		if d, ok := s.admit(int64(i), 1500); !ok || d != int64(i) {
			t.Fatalf("unlimited: %d, %v", d, ok)
		}
	}
}

func TestShaperDropTailBytes(t *testing.T) {
	// 1 Gbit/s with a 15,000-byte queue: a burst of 20 full packets at one
	// instant keeps 10 (the backlog counts the packet being sent).
	s := newShaper(1e9, 0, 15000)
	kept := 0
	for range 20 {
		if _, ok := s.admit(0, 1500); ok {
			kept++
		}
	}
	if kept != 10 {
		t.Fatalf("kept %d of the burst; want 10", kept)
	}
	// Once one packet has been sent, one more fits.
	if _, ok := s.admit(12000, 1500); !ok {
		t.Fatal("after one departure: dropped")
	}
	if _, ok := s.admit(12000, 1500); ok {
		t.Fatal("queue full again: admitted")
	}
	// A steady stream at the link rate never drops.
	s = newShaper(1e9, 0, 3000)
	for i := range 100000 {
		if _, ok := s.admit(int64(i)*12000, 1500); !ok {
			t.Fatalf("steady stream dropped packet %d", i)
		}
	}
}

func TestShaperDropTailPackets(t *testing.T) {
	s := newShaper(1e9, 4, 0)
	kept := 0
	for range 10 {
		if _, ok := s.admit(0, 64); ok {
			kept++
		}
	}
	if kept != 4 {
		t.Fatalf("kept %d; want 4", kept)
	}
	// Small packets depart fast: 64 bytes take 512 ns; after all four, room for four more.
	for range 4 {
		if _, ok := s.admit(4*512, 64); !ok {
			t.Fatal("dropped after the queue drained")
		}
	}
	if _, ok := s.admit(4*512, 64); ok {
		t.Fatal("admitted a fifth")
	}
}

func TestLossRate(t *testing.T) {
	for _, p := range []float64{0.0001, 0.01, 0.3} {
		l := newLoss(p, 1, 42)
		const n = 4_000_000
		drops := 0
		for range n {
			if l.drop() {
				drops++
			}
		}
		mean := p * n
		sd := math.Sqrt(n * p * (1 - p))
		if math.Abs(float64(drops)-mean) > 5*sd {
			t.Errorf("p=%g: %d drops of %d; want %.0f ± %.0f", p, drops, n, mean, 5*sd)
		}
	}
	if l := newLoss(0, 1, 1); func() bool {
		for range 1_000_000 {
			if l.drop() {
				return true
			}
		}
		return false
	}() {
		t.Error("p=0 dropped a packet")
	}
	l := newLoss(1, 1, 1)
	for range 1000 {
		if !l.drop() {
			t.Fatal("p=1 passed a packet")
		}
	}
}

func TestLossIndependent(t *testing.T) {
	// Losses are independent: the chance that the packet after a loss is
	// lost is still p (no bursts).
	const p = 0.2
	l := newLoss(p, 1, 7)
	prev, pairs, afterLoss := false, 0, 0
	for range 1_000_000 {
		d := l.drop()
		if prev {
			afterLoss++
			if d {
				pairs++
			}
		}
		prev = d
	}
	if got := float64(pairs) / float64(afterLoss); math.Abs(got-p) > 0.01 {
		t.Errorf("P(loss | previous lost) = %.3f; want %.2f", got, p)
	}
}

func TestParseLossModel(t *testing.T) {
	for in, want := range map[string]float64{"random": 1, "": 1, "bursty": 3, "bursty:5": 5, "Bursty:1.5": 1.5} {
		if got, err := parseLossModel(in); err != nil || got != want {
			t.Errorf("parseLossModel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"gilbert", "bursty:0.5", "bursty:", "bursty:x"} {
		if _, err := parseLossModel(in); err == nil {
			t.Errorf("parseLossModel(%q): no error", in)
		}
	}
}

// TestLossBursty: over many packets the Gilbert model's mean loss is -loss
// and its bursts (runs of consecutive losses) have the mean length asked
// for; with a burst of 1 it is random loss (bursts of 1/(1-p)).
func TestLossBursty(t *testing.T) {
	for _, c := range []struct {
		p, burst, wantBurst float64
	}{
		{0.0001, 3, 3}, {0.001, 3, 3}, {0.01, 3, 3}, {0.001, 5, 5}, {0.01, 1.5, 1.5},
		{0.01, 1, 1 / 0.99}, {0.1, 1, 1 / 0.9},
	} {
		l := newLoss(c.p, c.burst, 99)
		const n = 20_000_000
		drops, bursts := 0, 0
		prev := false
		for range n {
			d := l.drop()
			if d {
				drops++
				if !prev {
					bursts++
				}
			}
			prev = d
		}
		gotP := float64(drops) / n
		gotB := float64(drops) / float64(bursts)
		// Bursts are ~n p / burst independent events: tolerance from their count.
		tol := 5 / math.Sqrt(float64(bursts))
		if math.Abs(gotP/c.p-1) > tol*math.Sqrt(c.burst) || math.Abs(gotB/c.wantBurst-1) > tol*math.Sqrt(c.burst) {
			t.Errorf("p %g burst %g: mean loss %.6f, mean burst %.3f (%d bursts); want %g, %.3f", c.p, c.burst, gotP, gotB, bursts, c.p, c.wantBurst)
		}
	}
}

// fakeIn hands out numbered packets, records when each was read, then
// reports EOF.
type fakeIn struct {
	mu    sync.Mutex
	sizes []int
	i     int
	at    []int64
	every time.Duration
}

func (f *fakeIn) Read(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.i == len(f.sizes) {
		return 0, io.EOF
	}
	if f.every > 0 && f.i > 0 {
		time.Sleep(f.every)
	}
	n := f.sizes[f.i]
	clear(b[:n])
	binary.BigEndian.PutUint32(b, uint32(f.i))
	f.at = append(f.at, now())
	f.i++
	return n, nil
}

type record struct {
	seq int
	n   int
	at  int64
}

type fakeOut struct {
	mu  sync.Mutex
	got []record
}

func (f *fakeOut) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, record{int(binary.BigEndian.Uint32(b)), len(b), now()})
	return len(b), nil
}

func run(t *testing.T, d *direction) {
	t.Helper()
	done := make(chan struct{})
	go func() { d.writeLoop(); close(done) }()
	if err := d.readLoop(); err == nil || !bytes.Contains([]byte(err.Error()), []byte("EOF")) {
		t.Fatalf("readLoop: %v", err)
	}
	<-done
}

func TestDelayQueueOrderAndDelay(t *testing.T) {
	const delay = 20 * time.Millisecond
	in := &fakeIn{sizes: make([]int, 50), every: 200 * time.Microsecond}
	for i := range in.sizes {
		in.sizes[i] = 100 + i
	}
	out := &fakeOut{}
	d := newDirection("t", in, out, delay, newShaper(0, 0, 0), newLoss(0, 1, 1), 1024, 1500)
	run(t, d)
	if len(out.got) != len(in.sizes) {
		t.Fatalf("got %d packets; want %d", len(out.got), len(in.sizes))
	}
	for i, r := range out.got {
		if r.seq != i || r.n != in.sizes[i] {
			t.Fatalf("packet %d: seq %d len %d; want in order with len %d", i, r.seq, r.n, in.sizes[i])
		}
		lag := time.Duration(r.at - in.at[i])
		if lag < delay || lag > delay+hang { // the upper bound catches a packet held for good, not a slow machine
			t.Errorf("packet %d delayed %v; want %v", i, lag, delay)
		}
	}
	if got := d.stats.pkts.Load(); got != 50 {
		t.Errorf("counted %d packets", got)
	}
}

func TestDelayQueueRate(t *testing.T) {
	// 200 packets of 1250 bytes at 100 Mbit/s take 100 µs each: 20 ms in
	// all, on top of a 5 ms delay, although they are all read at once.
	in := &fakeIn{sizes: make([]int, 200)}
	for i := range in.sizes {
		in.sizes[i] = 1250
	}
	out := &fakeOut{}
	d := newDirection("t", in, out, 5*time.Millisecond, newShaper(100e6, 0, 1<<20), newLoss(0, 1, 1), 1024, 1500)
	run(t, d)
	if len(out.got) != 200 {
		t.Fatalf("got %d packets", len(out.got))
	}
	first, last := out.got[0], out.got[199]
	if lag := time.Duration(first.at - in.at[0]); lag < 5100*time.Microsecond {
		t.Errorf("first packet after %v; want >= 5.1ms", lag)
	}
	if span := time.Duration(last.at - in.at[0]); span < 25*time.Millisecond {
		t.Errorf("last packet after %v; want >= 25ms (serialization)", span)
	}
	// Each packet is released no earlier than its serialization slot.
	for i, r := range out.got {
		if min := in.at[0] + int64(5*time.Millisecond) + int64(i+1)*100_000; r.at < min {
			t.Fatalf("packet %d out at %d, before its slot %d", i, r.at, min)
		}
	}
}

func TestDelayQueueDropsAndPool(t *testing.T) {
	// A queue of 10 packets at 10 Mbit/s (0.8 ms a packet): a burst of 100
	// keeps about 10; with only 4 slots in the delay line some of those drop.
	in := &fakeIn{sizes: make([]int, 100)}
	for i := range in.sizes {
		in.sizes[i] = 1000
	}
	out := &fakeOut{}
	d := newDirection("t", in, out, time.Millisecond, newShaper(10e6, 10, 0), newLoss(0, 1, 1), 4, 1500)
	run(t, d)
	kept := d.stats.pkts.Load()
	t.Logf("%s", &d.stats)
	if qd, sd := d.stats.queueDrops.Load(), d.stats.slotDrops.Load(); kept+qd+sd != 100 || qd < 90 {
		t.Errorf("kept %d, queue drops %d, slot drops %d; want 100 in all, >= 90 queue drops", kept, qd, sd)
	}
	// Every buffer came back to the pool (at most its capacity).
	if n := len(d.free); n == 0 || n > cap(d.free) {
		t.Errorf("%d buffers in the pool", n)
	}
}

func TestForwardNoAllocs(t *testing.T) {
	// The per-packet path (shaper, loss, queue, pool) does not allocate once warm.
	d := newDirection("t", nil, io.Discard, 0, newShaper(1e9, 1000, 0), newLoss(0.01, 1, 1), 64, 1500)
	step := func() {
		b := d.getBuf()
		dep, _ := d.shaper.admit(now(), 1500)
		d.loss.drop()
		d.queue <- packet{buf: b, n: 1500, due: dep}
		p := <-d.queue
		d.out.Write(p.buf[:p.n])
		d.putBuf(p.buf)
	}
	step()
	if a := testing.AllocsPerRun(1000, step); a != 0 {
		t.Errorf("%v allocations per packet", a)
	}
}

// hang bounds how much later than its delay a packet may leave before a
// test calls it held for good: a loaded machine runs late by tens of
// milliseconds, which says nothing of the line.
const hang = 10 * time.Second
