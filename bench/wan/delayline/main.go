// Command delayline emulates a wide-area link in user space, for machines
// without netem. It owns two TUN devices, A and B, and forwards every IP
// packet read from one into the other after a one-way delay, through a
// rate-limited bottleneck with a bounded drop-tail queue and random or
// bursty loss (-loss-model). Each direction has its own queue, loss sampler
// and pair of goroutines; B->A may have its own delay, rate, loss and queue
// (-delay-ba, -rate-ba, -loss-ba, -queue-ba), and a queue may be a fraction
// of the bandwidth-delay product (-queue 0.25bdp).
//
// Each device can be created directly inside a network namespace
// (-netns-a, -netns-b), so a packet that namespace ferryA routes into tunA
// comes out of tunB in namespace ferryB, and back. bench/wan/setup.sh sets
// this up; run as root:
//
//	delayline -netns-a ferryA -a tunA -netns-b ferryB -b tunB \
//	    -delay 30ms -rate 1gbit -loss 0.0001
//
// The devices exist while the program runs (they are not persistent); it
// exits, removing them, on SIGINT or SIGTERM and prints its counters
// (packets forwarded, lost, dropped by the full queue), which it also
// prints on SIGUSR1 and every -stats interval.
//
// With -node (repeated), it is instead a hub: a star of nodes, each a TUN
// device in its own namespace behind its own access link with -rate,
// -delay, -loss and -queue each direction (a node's uplink and downlink each
// capped, as a site's), routing packets between them by IPv4 destination
// address (see hub.go). The path between two nodes so has twice -delay
// each way. -node NS:DEV:IP[:key=value...] may override its link's rate
// (both directions), up, down (one direction's rate), delay, loss or queue:
//
//	delayline -node ferry0:tun0:10.77.1.10 -node ferry1:tun1:10.77.1.11:up=1gbit \
//	    -node ferry2:tun2:10.77.1.12 -delay 15ms -rate 100mbit
package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetPrefix("delayline: ")
	var (
		nameA   = flag.String("a", "tunA", "name of TUN device A")
		nameB   = flag.String("b", "tunB", "name of TUN device B")
		nsA     = flag.String("netns-a", "", "create device A in this network namespace (name in /run/netns or a path)")
		nsB     = flag.String("netns-b", "", "create device B in this network namespace")
		ab, ba  linkFlags
		modelS  = flag.String("loss-model", "random", "random (independent losses), bursty (Gilbert: bursts of 3 packets on average, mean loss -loss) or bursty:B (bursts of B packets)")
		mtu     = flag.Int("mtu", 1500, "largest packet; set the devices' MTU to at most this")
		slots   = flag.Int("slots", 1<<16, "packets in flight per direction (the delay line itself), beyond which packets drop")
		seed    = flag.Uint64("seed", uint64(time.Now().UnixNano()), "random seed for loss")
		statsIv = flag.Duration("stats", 0, "print counters at this interval (0 = only at exit)")
		nodes   []string
	)
	flag.StringVar(&ab.delay, "delay", "30ms", "one-way delay, each direction (A->B; B->A too unless -delay-ba)")
	flag.StringVar(&ab.rate, "rate", "1gbit", "link rate, each direction (gbit, mbit, kbit, bit; 0 = unlimited)")
	flag.StringVar(&ab.queue, "queue", "auto", "bottleneck queue: packets (5000), bytes (8MB) or a fraction of the BDP, rate x RTT (0.25bdp, 2bdp); auto = 1bdp (hub: of a path, RTT 4 x delay), at least 64KB")
	flag.StringVar(&ab.loss, "loss", "0", "loss probability per packet, each direction (0.0001 = 0.01 %); the mean, with -loss-model bursty")
	flag.StringVar(&ba.delay, "delay-ba", "", "B->A's one-way delay (default: -delay)")
	flag.StringVar(&ba.rate, "rate-ba", "", "B->A's rate (default: -rate)")
	flag.StringVar(&ba.queue, "queue-ba", "", "B->A's queue (default: -queue; a BDP is of B->A's rate)")
	flag.StringVar(&ba.loss, "loss-ba", "", "B->A's loss probability (default: -loss)")
	flag.Func("node", "hub mode: a node NS:DEV:IP[:rate=R][:up=R][:down=R][:delay=D][:loss=P][:queue=Q], repeated (then -a, -b, -netns-a, -netns-b and the -*-ba flags are not used)",
		func(s string) error { nodes = append(nodes, s); return nil })
	flag.Parse()
	if flag.NArg() > 0 {
		log.Fatalf("unexpected arguments %q", flag.Args())
	}
	burst, err := parseLossModel(*modelS)
	if err != nil {
		log.Fatal(err)
	}
	dirs, err := parseDirs(ab, ba)
	if err != nil {
		log.Fatal(err)
	}
	if len(nodes) > 0 {
		if *nsA != "" || *nsB != "" || ba != (linkFlags{}) {
			log.Fatal("-node and -netns-a/-netns-b or a -*-ba flag: choose the hub or the pair")
		}
		d := dirs[0]
		def := linkConf{upRate: d.rate, downRate: d.rate, delay: d.delay, loss: d.loss, burst: burst, queue: ab.queue}
		runHub(nodes, def, *seed, *slots, *mtu, *statsIv)
		return
	}

	tunA, err := openTUNIn(*nsA, *nameA)
	if err != nil {
		log.Fatal(err)
	}
	tunB, err := openTUNIn(*nsB, *nameB)
	if err != nil {
		log.Fatal(err)
	}
	ends := [2]struct {
		name     string
		in       io.Reader
		out      io.Writer
		from, to string
	}{{"A->B", tunA, tunB, *nameA + nsSuffix(*nsA), *nameB + nsSuffix(*nsB)}, {"B->A", tunB, tunA, *nameB + nsSuffix(*nsB), *nameA + nsSuffix(*nsA)}}
	var lines []*direction
	for i, d := range dirs {
		e := ends[i]
		lines = append(lines, newDirection(e.name, e.in, e.out, d.delay, newShaper(d.rate, d.qPkts, d.qBytes),
			newLoss(d.loss, burst, *seed+uint64(i)), *slots, *mtu))
		log.Printf("%s -> %s: delay %v, rate %d bit/s, queue %s, loss %g (%s), mtu %d, pid %d",
			e.from, e.to, d.delay, d.rate, describeQueue(d.qPkts, d.qBytes), d.loss, *modelS, *mtu, os.Getpid())
	}

	errc := make(chan error, 2)
	for _, d := range lines {
		go func() { errc <- d.readLoop() }()
		go d.writeLoop()
	}
	waitSignals(*statsIv, func() {
		for _, d := range lines {
			log.Printf("%s %s", d.name, &d.stats)
		}
	}, errc)
}

// linkFlags are one direction's settings as given (parseRate's,
// time.ParseDuration's, a probability, parseQueue's syntax); in B->A's, ""
// is A->B's.
type linkFlags struct{ rate, delay, loss, queue string }

// dirConf is one direction of the pair's link, parsed.
type dirConf struct {
	rate   int64
	delay  time.Duration
	loss   float64
	qPkts  int
	qBytes int64
}

// parseDirs reads A->B's and B->A's settings (B->A's empty fields are
// A->B's). A queue relative to the BDP is of its direction's rate and the
// round trip, A->B's delay plus B->A's.
func parseDirs(ab, ba linkFlags) ([2]dirConf, error) {
	var out [2]dirConf
	var queues [2]queueSpec
	for i, f := range []linkFlags{ab, ba} {
		if i == 1 {
			f = linkFlags{cmp.Or(f.rate, ab.rate), cmp.Or(f.delay, ab.delay), cmp.Or(f.loss, ab.loss), cmp.Or(f.queue, ab.queue)}
		}
		d := &out[i]
		var err error
		if d.rate, err = parseRate(f.rate); err != nil {
			return out, err
		}
		if d.delay, err = time.ParseDuration(f.delay); err != nil || d.delay < 0 {
			return out, fmt.Errorf("bad delay %q", f.delay)
		}
		if d.loss, err = strconv.ParseFloat(f.loss, 64); err != nil || d.loss < 0 || d.loss > 1 {
			return out, fmt.Errorf("bad loss %q: want a probability in [0, 1]", f.loss)
		}
		if queues[i], err = parseQueue(f.queue); err != nil {
			return out, err
		}
	}
	rtt := out[0].delay + out[1].delay
	for i := range out {
		out[i].qPkts, out[i].qBytes = queues[i].limits(out[i].rate, rtt)
	}
	return out, nil
}

// runHub opens a device per node and forwards between them until a signal.
func runHub(args []string, def linkConf, seed uint64, slots, mtu int, statsIv time.Duration) {
	if len(args) < 2 {
		log.Fatal("the hub needs at least two -node")
	}
	var specs []nodeSpec
	var devs []io.ReadWriter
	for _, a := range args {
		s, err := parseNode(a, def)
		if err != nil {
			log.Fatal(err)
		}
		specs = append(specs, s)
	}
	for _, s := range specs {
		f, err := openTUNIn(s.ns, s.dev)
		if err != nil {
			log.Fatal(err)
		}
		devs = append(devs, f)
	}
	h, err := newHub(specs, devs, seed, slots, mtu)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("hub of %d nodes, mtu %d, pid %d:", len(specs), mtu, os.Getpid())
	for _, l := range describe(specs) {
		log.Print("  " + l)
	}
	errs, _ := h.start()
	waitSignals(statsIv, func() { h.report(log.Printf) }, errs)
}

// waitSignals reports at every interval and on SIGUSR1, and returns on
// SIGINT or SIGTERM; it exits on an error from errc.
func waitSignals(statsIv time.Duration, report func(), errc <-chan error) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1)
	var tick <-chan time.Time
	if statsIv > 0 {
		tick = time.Tick(statsIv)
	}
	for {
		select {
		case <-tick:
			report()
		case s := <-sig:
			if s == syscall.SIGUSR1 {
				report()
				continue
			}
			log.Printf("%v: exiting", s)
			report()
			return
		case err := <-errc:
			report()
			log.Fatal(err)
		}
	}
}

func nsSuffix(ns string) string {
	if ns == "" {
		return ""
	}
	return " (netns " + ns + ")"
}
