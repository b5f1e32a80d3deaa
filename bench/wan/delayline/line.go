package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// The parts of the delay line that need no TUN device: rate and queue
// parsing, the bottleneck (serialization and drop-tail queue), loss
// sampling, and the per-direction forwarding loops over any packet reader
// and writer.

// parseRate reads a rate in bits per second, tc style: "1gbit", "500mbit",
// "64kbit", "1000000" (bit/s), or "0"/"off" for no limit. "bps" units
// (bytes per second, as in tc) are accepted too: "125mbps" = 1gbit.
func parseRate(s string) (int64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" || s == "0" || s == "off" || s == "none" {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   float64
	}{
		{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1},
		{"gbps", 8e9}, {"mbps", 8e6}, {"kbps", 8e3}, {"bps", 8},
		{"g", 1e9}, {"m", 1e6}, {"k", 1e3},
	}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("bad rate %q", s)
	}
	return int64(v * mult), nil
}

// queueSpec is a bottleneck queue limit as given: a count of packets, a
// number of bytes, or a multiple of the path's bandwidth-delay product
// (rate x RTT). At most one field is set; none is one BDP ("auto").
type queueSpec struct {
	packets int
	bytes   int64
	bdp     float64
}

// parseQueue reads the bottleneck queue limit: a bare number is a count of
// packets ("5000"), a number with a byte unit is bytes ("8MB", "8MiB",
// "64kb"), a number with "bdp" is that fraction of the bandwidth-delay
// product ("0.25bdp", "2bdp"), and "auto" (or "") is one BDP.
func parseQueue(s string) (queueSpec, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" || s == "auto" {
		return queueSpec{}, nil
	}
	if n, err := strconv.Atoi(strings.TrimSuffix(s, "p")); err == nil && n > 0 {
		return queueSpec{packets: n}, nil
	}
	units := []struct {
		suffix string
		mult   float64
	}{
		{"bdp", 0}, {"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10},
		{"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3}, {"b", 1},
	}
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			v, err := strconv.ParseFloat(strings.TrimSuffix(s, u.suffix), 64)
			if err != nil || v <= 0 || math.IsInf(v, 0) {
				break
			}
			if u.mult == 0 {
				return queueSpec{bdp: v}, nil
			}
			return queueSpec{bytes: int64(v * u.mult)}, nil
		}
	}
	return queueSpec{}, fmt.Errorf("bad queue %q (want packets like 5000, bytes like 8MB, or a fraction of the BDP like 0.25bdp)", s)
}

// minQueue is the smallest queue a BDP-relative spec gives, in bytes.
const minQueue = 64 << 10

// limits is the queue's packet and byte limit on a link of rate bits/s on
// a path of round trip rtt: a BDP-relative spec (or "auto", one BDP)
// becomes bytes, at least minQueue. An unlimited link has no queue.
func (q queueSpec) limits(rate int64, rtt time.Duration) (packets int, bytes int64) {
	if q.packets > 0 || q.bytes > 0 || rate <= 0 {
		return q.packets, q.bytes
	}
	frac := q.bdp
	if frac == 0 {
		frac = 1
	}
	bdp := rate / 8 * int64(rtt) / int64(time.Second)
	return 0, max(int64(frac*float64(bdp)), minQueue)
}

// describeQueue says what limits gives, for the log.
func describeQueue(packets int, bytes int64) string {
	if bytes > 0 {
		return fmt.Sprintf("%d bytes", bytes)
	}
	return fmt.Sprintf("%d packets", packets)
}

// shaper is the bottleneck link of one direction: a drop-tail queue in
// front of a link of a fixed rate. All times are nanoseconds on one
// monotonic clock. It allocates nothing after newShaper.
type shaper struct {
	rate     int64 // bits per second; 0 = unlimited (no queue ever builds)
	maxBytes int64 // queue limit in bytes (0 = no byte limit)
	busy     int64 // when the link finishes sending all admitted packets
	rem      int64 // remainder of the serialization division, so no rounding drifts

	// departure times of the packets still in the queue (or on the wire),
	// a ring, for the packet-count limit; nil = no packet limit.
	departs    []int64
	head, size int
}

func newShaper(rate int64, maxPackets int, maxBytes int64) *shaper {
	s := &shaper{rate: rate, maxBytes: maxBytes}
	if maxPackets > 0 {
		s.departs = make([]int64, maxPackets)
	}
	return s
}

// txTime is how long size bytes take to serialize at the link rate.
func (s *shaper) txTime(size int) int64 {
	num := int64(size)*8e9 + s.rem
	s.rem = num % s.rate
	return num / s.rate
}

// admit offers a packet of size bytes arriving at now. It returns the time
// its last bit leaves the link, or ok=false if the queue is full (drop-tail).
func (s *shaper) admit(now int64, size int) (depart int64, ok bool) {
	if s.rate <= 0 {
		return now, true
	}
	// Packets that have left the link leave the packet ring.
	for s.size > 0 && s.departs[s.head] <= now {
		s.head++
		if s.head == len(s.departs) {
			s.head = 0
		}
		s.size--
	}
	start := max(now, s.busy)
	if s.maxBytes > 0 {
		backlog := float64(start-now) * float64(s.rate) / 8e9 // bytes not yet sent
		if backlog+float64(size) > float64(s.maxBytes) {
			return 0, false
		}
	}
	if s.departs != nil && s.size == len(s.departs) {
		return 0, false
	}
	depart = start + s.txTime(size)
	s.busy = depart
	if s.departs != nil {
		i := s.head + s.size
		if i >= len(s.departs) {
			i -= len(s.departs)
		}
		s.departs[i] = depart
		s.size++
	}
	return depart, true
}

// parseLossModel reads the loss model: "random" (independent losses, a
// mean burst of 1 packet), "bursty" (Gilbert, bursts of 3 packets on
// average) or "bursty:B" (bursts of B packets on average, B >= 1). It
// returns the mean burst length.
func parseLossModel(s string) (float64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "", "random":
		return 1, nil
	case "bursty":
		return 3, nil
	}
	if b, ok := strings.CutPrefix(s, "bursty:"); ok {
		v, err := strconv.ParseFloat(b, 64)
		if err == nil && v >= 1 && !math.IsInf(v, 0) {
			return v, nil
		}
	}
	return 0, fmt.Errorf("bad loss model %q (want random, bursty, or bursty:B with a mean burst of B >= 1 packets)", s)
}

// loss drops packets with the Gilbert model, a two-state Markov chain
// (Gilbert-Elliott with no loss in the good state and every packet lost
// in the bad one): from the good state the next packet turns bad with
// probability g, from the bad state good again with probability 1/burst.
// A burst of losses is then geometric with a mean of burst packets, a good
// run geometric with a mean of (1-g)/g, and the mean loss is p when
// g = p / (p + burst (1-p)).
// With burst = 1 (or less) the losses are independent with probability p:
// random loss.
// Instead of one random number per packet it draws the run of passing
// packets and the run of lost ones from the geometric distribution, so the
// common case is a decrement.
type loss struct {
	lGood float64 // log(1-g): the good run is geometric in g
	lBad  float64 // log(1-1/burst): a burst beyond its first packet is geometric in 1/burst
	gap   int64   // packets still to pass before the next burst
	lost  int64   // packets of this burst still to drop
	rng   *rand.Rand
}

func newLoss(p, burst float64, seed uint64) *loss {
	burst = max(burst, 1)
	g := 0.0
	if p > 0 {
		g = p / (p + burst*(1-p))
	}
	l := &loss{lGood: math.Log1p(-g), lBad: math.Log1p(-1 / burst),
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	l.gap = l.geometric(l.lGood)
	return l
}

// geometric draws k >= 0 with P(k) = (1-q)^k q, given l1q = log(1-q):
// the failures before the first success of chance q. q = 0 (l1q = 0)
// never succeeds; q = 1 (l1q = -Inf) at once.
func (l *loss) geometric(l1q float64) int64 {
	if l1q == 0 {
		return math.MaxInt64
	}
	u := 1 - l.rng.Float64() // (0, 1]
	g := math.Floor(math.Log(u) / l1q)
	if g > math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(g)
}

// drop reports whether the next packet is lost.
func (l *loss) drop() bool {
	if l.lost > 0 {
		l.lost--
		return true
	}
	if l.gap > 0 {
		l.gap--
		return false
	}
	// This packet starts a burst; the rest of it, then the next good run.
	l.lost = l.geometric(l.lBad)
	l.gap = l.geometric(l.lGood)
	return true
}

// packet is a buffer from the pool with its length and the time it is due
// at the far end. Passed by value: the queue holds no pointers to allocate.
type packet struct {
	buf []byte
	n   int
	due int64
	to  int // the hub: index of the node it goes to
}

type counters struct {
	pkts, bytes, lost, queueDrops, slotDrops, writeErrs atomic.Uint64

	// writer sleeps, and the total time they overshot by, in ns
	sleeps, late atomic.Uint64
}

func (c *counters) String() string {
	late := time.Duration(0)
	if n := c.sleeps.Load(); n > 0 {
		late = time.Duration(c.late.Load() / n)
	}
	return fmt.Sprintf("fwd %d pkts %d bytes, lost %d, queue-drops %d, slot-drops %d, write-errors %d, wake-ups %d late by %v on average",
		c.pkts.Load(), c.bytes.Load(), c.lost.Load(), c.queueDrops.Load(), c.slotDrops.Load(), c.writeErrs.Load(),
		c.sleeps.Load(), late)
}

// clock is nanoseconds since the program started, on the monotonic clock.
var epoch = time.Now()

func now() int64 { return int64(time.Since(epoch)) }

// direction forwards packets from in to out: a reader goroutine runs the
// bottleneck and loss and appends to the delay queue; a writer goroutine
// releases each packet when it is due. The delay is the same for every
// packet and departures from the link are in order, so due times never
// decrease and a FIFO (a channel) is the time-ordered queue.
type direction struct {
	name   string
	in     io.Reader // one packet per Read (a TUN fd)
	out    io.Writer // one packet per Write
	delay  int64
	shaper *shaper
	loss   *loss
	queue  chan packet // the delay line: packets in flight, in due order
	free   chan []byte // buffer pool
	mtu    int
	stats  counters
}

func newDirection(name string, in io.Reader, out io.Writer, delay time.Duration, sh *shaper, ls *loss, slots, mtu int) *direction {
	return &direction{
		name: name, in: in, out: out, delay: int64(delay), shaper: sh, loss: ls,
		queue: make(chan packet, slots), free: make(chan []byte, slots), mtu: mtu,
	}
}

func (d *direction) getBuf() []byte {
	select {
	case b := <-d.free:
		return b
	default:
		return make([]byte, d.mtu)
	}
}

func (d *direction) putBuf(b []byte) {
	select {
	case d.free <- b:
	default:
	}
}

// transient read/write errors that are retried rather than fatal.
func transient(err error) bool {
	return errors.Is(err, syscall.EINTR) || errors.Is(err, syscall.EAGAIN)
}

// readLoop reads packets until in fails; it closes the queue when it stops.
func (d *direction) readLoop() error {
	defer close(d.queue)
	for {
		buf := d.getBuf()
		n, err := d.in.Read(buf)
		if err != nil {
			d.putBuf(buf)
			if transient(err) {
				continue
			}
			return fmt.Errorf("%s: read: %w", d.name, err)
		}
		if n == 0 {
			d.putBuf(buf)
			continue
		}
		depart, ok := d.shaper.admit(now(), n)
		switch {
		case !ok:
			d.stats.queueDrops.Add(1)
		case d.loss.drop(): // serialized, then lost on the wire
			d.stats.lost.Add(1)
		default:
			select {
			case d.queue <- packet{buf: buf, n: n, due: depart + d.delay}:
				continue
			default: // more packets in flight than slots
				d.stats.slotDrops.Add(1)
			}
		}
		d.putBuf(buf)
	}
}

// writeLoop releases packets when due, until the queue is closed.
func (d *direction) writeLoop() error {
	release(d.queue, d.out, &d.stats, d.putBuf)
	return nil
}

// release writes each packet of queue to out when it is due, counts it in
// st and gives its buffer back with put, until the queue is closed.
// It reads the clock only when the head packet does not look due yet.
// Go's timers wake up to about 1 ms late for short sleeps, so packets leave
// in bursts of up to about 1 ms of traffic; every packet due by the time the
// writer wakes goes out at once. The counters report the mean lateness.
func release(queue <-chan packet, out io.Writer, st *counters, put func([]byte)) {
	var t int64
	for p := range queue {
		t = sleepUntil(t, p.due, st)
		for {
			_, err := out.Write(p.buf[:p.n])
			if err != nil && transient(err) {
				continue
			}
			if err != nil {
				st.writeErrs.Add(1)
			} else {
				st.pkts.Add(1)
				st.bytes.Add(uint64(p.n))
			}
			break
		}
		put(p.buf)
	}
}

// sleepUntil returns once due has come. t is the clock as last read (the
// clock is read again only when due is after it); it returns the clock as
// last read. A sleep and how late it woke are counted in st.
func sleepUntil(t, due int64, st *counters) int64 {
	if due > t {
		t = now()
		if due > t {
			time.Sleep(time.Duration(due - t))
			t = now()
			st.sleeps.Add(1)
			st.late.Add(uint64(max(t-due, 0)))
		}
	}
	return t
}
