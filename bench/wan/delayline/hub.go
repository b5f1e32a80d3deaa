package main

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The hub: a star of nodes, each a TUN device (in its own network
// namespace) behind its own access link. A packet read from node i's
// device goes through i's uplink (rate, drop-tail queue, loss, delay) to
// the hub, which routes it by its IPv4 destination address to node j's
// downlink (rate, queue, loss, delay), and is written into j's device.
// A path between two nodes so has two links' delay each way, and a node's
// uplink and downlink each cap everything it sends or receives, as a
// site's access link would.
//
// Per node: a reader goroutine (device -> uplink shaper -> uplink delay
// queue), a mover (takes each packet off the uplink when it reaches the
// hub, and admits it to the destination's downlink shaper, under that
// downlink's lock, onto its delay queue) and a writer (device). Every
// stage keeps the FIFO property of direction: departures from a shaper
// are in order and the delay is constant, so due times never decrease.

// linkConf is one node's access link, each direction.
type linkConf struct {
	upRate, downRate int64 // bit/s, 0 = unlimited
	delay            time.Duration
	loss             float64 // mean loss probability
	burst            float64 // mean loss burst in packets (the loss model; 1 = random)
	queue            string  // parseQueue's syntax; a BDP is of the path (rate x 4 x delay)
}

// nodeSpec is one node of the star: -node NS:DEV:IP[:key=value...].
type nodeSpec struct {
	ns, dev string
	ip      netip.Addr
	link    linkConf
}

// parseNode reads "NS:DEV:IP" and optional ":key=value" overrides of the
// default link: rate (both directions), up, down (one direction's rate),
// delay, loss, queue. NS may be empty (the current namespace).
func parseNode(s string, def linkConf) (nodeSpec, error) {
	f := strings.Split(s, ":")
	if len(f) < 3 {
		return nodeSpec{}, fmt.Errorf("-node %q: want NS:DEV:IP[:key=value...]", s)
	}
	n := nodeSpec{ns: f[0], dev: f[1], link: def}
	ip, err := netip.ParseAddr(f[2])
	if err != nil || !ip.Is4() {
		return nodeSpec{}, fmt.Errorf("-node %q: %q is not an IPv4 address", s, f[2])
	}
	n.ip = ip
	if n.dev == "" {
		return nodeSpec{}, fmt.Errorf("-node %q: no device name", s)
	}
	for _, kv := range f[3:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nodeSpec{}, fmt.Errorf("-node %q: %q is not key=value", s, kv)
		}
		switch k {
		case "rate", "up", "down":
			r, err := parseRate(v)
			if err != nil {
				return nodeSpec{}, fmt.Errorf("-node %q: %v", s, err)
			}
			if k != "down" {
				n.link.upRate = r
			}
			if k != "up" {
				n.link.downRate = r
			}
		case "delay":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return nodeSpec{}, fmt.Errorf("-node %q: bad delay %q", s, v)
			}
			n.link.delay = d
		case "loss":
			p, err := strconv.ParseFloat(v, 64)
			if err != nil || p < 0 || p > 1 {
				return nodeSpec{}, fmt.Errorf("-node %q: bad loss %q", s, v)
			}
			n.link.loss = p
		case "queue":
			if _, err := parseQueue(v); err != nil {
				return nodeSpec{}, fmt.Errorf("-node %q: %v", s, err)
			}
			n.link.queue = v
		default:
			return nodeSpec{}, fmt.Errorf("-node %q: unknown key %q (want rate, up, down, delay, loss, queue)", s, k)
		}
	}
	return n, nil
}

// hubShaper is the shaper of one link direction at rate, with the queue
// of spec; a BDP is of a path between two such links (rate x 4 x delay).
func hubShaper(rate int64, delay time.Duration, spec string) (*shaper, string) {
	q, _ := parseQueue(spec) // checked by parseNode or main
	pkts, bytes := q.limits(rate, 4*delay)
	return newShaper(rate, pkts, bytes), describeQueue(pkts, bytes)
}

// hubLink is one direction of a node's access link.
type hubLink struct {
	name   string
	delay  int64
	mu     sync.Mutex // a downlink is fed by every node's mover
	shaper *shaper
	loss   *loss
	queue  chan packet // in due order
	stats  counters
}

type hubNode struct {
	name     string
	ip       [4]byte
	dev      io.ReadWriter // one packet per Read or Write
	up, down *hubLink
}

type hub struct {
	nodes      []*hubNode
	route      map[[4]byte]int // destination address -> node
	free       chan []byte     // buffer pool, shared
	mtu        int
	unroutable atomic.Uint64 // not IPv4, to no node, or to the sender itself
}

// newHub makes the hub over devs (devs[i] is specs[i]'s device).
func newHub(specs []nodeSpec, devs []io.ReadWriter, seed uint64, slots, mtu int) (*hub, error) {
	h := &hub{route: make(map[[4]byte]int, len(specs)), free: make(chan []byte, 2*slots), mtu: mtu}
	for i, s := range specs {
		ip := s.ip.As4()
		if _, dup := h.route[ip]; dup {
			return nil, fmt.Errorf("address %v given twice", s.ip)
		}
		h.route[ip] = i
		name := s.dev
		if s.ns != "" {
			name = s.ns
		}
		up, _ := hubShaper(s.link.upRate, s.link.delay, s.link.queue)
		down, _ := hubShaper(s.link.downRate, s.link.delay, s.link.queue)
		h.nodes = append(h.nodes, &hubNode{
			name: name, ip: ip, dev: devs[i],
			up: &hubLink{name: name + " up", delay: int64(s.link.delay), shaper: up,
				loss: newLoss(s.link.loss, s.link.burst, seed+uint64(2*i)), queue: make(chan packet, slots)},
			down: &hubLink{name: name + " down", delay: int64(s.link.delay), shaper: down,
				loss: newLoss(s.link.loss, s.link.burst, seed+uint64(2*i+1)), queue: make(chan packet, slots)},
		})
	}
	return h, nil
}

func (h *hub) getBuf() []byte {
	select {
	case b := <-h.free:
		return b
	default:
		return make([]byte, h.mtu)
	}
}

func (h *hub) putBuf(b []byte) {
	select {
	case h.free <- b:
	default:
	}
}

// dest is the node an IPv4 packet goes to, or -1.
func (h *hub) dest(p []byte) int {
	if len(p) < 20 || p[0]>>4 != 4 {
		return -1
	}
	if j, ok := h.route[[4]byte(p[16:20])]; ok {
		return j
	}
	return -1
}

// start starts every node's goroutines. Each reader's error (its device
// failed; io.EOF in tests) comes on errs; once every reader has stopped,
// drain waits until everything in flight has been written.
func (h *hub) start() (errs <-chan error, drain func()) {
	errc := make(chan error, len(h.nodes))
	var movers, writers sync.WaitGroup
	for i, n := range h.nodes {
		go func() { errc <- h.readLoop(i) }()
		movers.Add(1)
		go func() { defer movers.Done(); h.moveLoop(i) }()
		writers.Add(1)
		go func() { defer writers.Done(); release(n.down.queue, n.dev, &n.down.stats, h.putBuf) }()
	}
	return errc, func() {
		movers.Wait()
		for _, n := range h.nodes {
			close(n.down.queue)
		}
		writers.Wait()
	}
}

// readLoop puts node i's packets on its uplink; it closes the uplink's
// queue when its device fails.
func (h *hub) readLoop(i int) error {
	nd := h.nodes[i]
	up := nd.up
	defer close(up.queue)
	for {
		buf := h.getBuf()
		n, err := nd.dev.Read(buf)
		if err != nil {
			h.putBuf(buf)
			if transient(err) {
				continue
			}
			return fmt.Errorf("%s: read: %w", nd.name, err)
		}
		to := -1
		if n > 0 {
			to = h.dest(buf[:n])
		}
		if to < 0 || to == i {
			h.unroutable.Add(1)
			h.putBuf(buf)
			continue
		}
		depart, ok := up.shaper.admit(now(), n)
		switch {
		case !ok:
			up.stats.queueDrops.Add(1)
		case up.loss.drop():
			up.stats.lost.Add(1)
		default:
			select {
			case up.queue <- packet{buf: buf, n: n, due: depart + up.delay, to: to}:
				continue
			default:
				up.stats.slotDrops.Add(1)
			}
		}
		h.putBuf(buf)
	}
}

// moveLoop takes node i's packets off its uplink as they reach the hub and
// offers each to its destination's downlink, at the time it arrived there
// (not when the mover woke: its lateness does not add to the path).
func (h *hub) moveLoop(i int) {
	up := h.nodes[i].up
	var t int64
	for p := range up.queue {
		t = sleepUntil(t, p.due, &up.stats)
		up.stats.pkts.Add(1)
		up.stats.bytes.Add(uint64(p.n))
		down := h.nodes[p.to].down
		down.mu.Lock()
		depart, ok := down.shaper.admit(p.due, p.n)
		switch {
		case !ok:
			down.stats.queueDrops.Add(1)
		case down.loss.drop():
			down.stats.lost.Add(1)
		default:
			select {
			case down.queue <- packet{buf: p.buf, n: p.n, due: depart + down.delay}:
				down.mu.Unlock()
				continue
			default:
				down.stats.slotDrops.Add(1)
			}
		}
		down.mu.Unlock()
		h.putBuf(p.buf)
	}
}

// report prints every link's counters with logf.
func (h *hub) report(logf func(string, ...any)) {
	for _, n := range h.nodes {
		logf("%s %s", n.up.name, &n.up.stats)
		logf("%s %s", n.down.name, &n.down.stats)
	}
	logf("hub: %d packets unroutable (not IPv4, to no node, or to their sender)", h.unroutable.Load())
}

// describe is one line per node: its address and links.
func describe(specs []nodeSpec) []string {
	var out []string
	for _, s := range specs {
		_, uq := hubShaper(s.link.upRate, s.link.delay, s.link.queue)
		_, dq := hubShaper(s.link.downRate, s.link.delay, s.link.queue)
		out = append(out, fmt.Sprintf("%s%s %v: up %d bit/s (queue %s), down %d bit/s (queue %s), delay %v each way, loss %g each way",
			s.dev, nsSuffix(s.ns), s.ip, s.link.upRate, uq, s.link.downRate, dq, s.link.delay, s.link.loss))
	}
	return out
}
