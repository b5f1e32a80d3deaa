// Command delayline emulates a wide-area link in user space, for machines
// without netem. It owns two TUN devices, A and B, and forwards every IP
// packet read from one into the other after a one-way delay, through a
// rate-limited bottleneck with a bounded drop-tail queue and random loss.
// Each direction has its own queue, loss sampler and pair of goroutines.
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
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
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
		delay   = flag.Duration("delay", 30*time.Millisecond, "one-way delay, each direction")
		rateS   = flag.String("rate", "1gbit", "link rate, each direction (gbit, mbit, kbit, bit; 0 = unlimited)")
		queueS  = flag.String("queue", "auto", "bottleneck queue: packets (5000) or bytes (8MB); auto = one BDP of rate x 2 x delay (hub: of a path, rate x 4 x delay), at least 64KB")
		lossP   = flag.Float64("loss", 0, "random loss probability per packet, each direction (0.0001 = 0.01 %)")
		mtu     = flag.Int("mtu", 1500, "largest packet; set the devices' MTU to at most this")
		slots   = flag.Int("slots", 1<<16, "packets in flight per direction (the delay line itself), beyond which packets drop")
		seed    = flag.Uint64("seed", uint64(time.Now().UnixNano()), "random seed for loss")
		statsIv = flag.Duration("stats", 0, "print counters at this interval (0 = only at exit)")
		nodes   []string
	)
	flag.Func("node", "hub mode: a node NS:DEV:IP[:rate=R][:up=R][:down=R][:delay=D][:loss=P][:queue=Q], repeated (then -a, -b, -netns-a, -netns-b are not used)",
		func(s string) error { nodes = append(nodes, s); return nil })
	flag.Parse()
	if flag.NArg() > 0 {
		log.Fatalf("unexpected arguments %q", flag.Args())
	}
	rate, err := parseRate(*rateS)
	if err != nil {
		log.Fatal(err)
	}
	qPkts, qBytes, err := parseQueue(*queueS)
	if err != nil {
		log.Fatal(err)
	}
	if qPkts == 0 && qBytes == 0 && rate > 0 {
		qBytes = max(rate/8*int64(2**delay)/int64(time.Second), 64<<10)
	}
	if *lossP < 0 || *lossP > 1 {
		log.Fatalf("-loss %v: want a probability in [0, 1]", *lossP)
	}
	if len(nodes) > 0 {
		if *nsA != "" || *nsB != "" {
			log.Fatal("-node and -netns-a/-netns-b: choose the hub or the pair")
		}
		def := linkConf{upRate: rate, downRate: rate, delay: *delay, loss: *lossP, queue: *queueS}
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

	dirs := []*direction{
		newDirection("A->B", tunA, tunB, *delay, newShaper(rate, qPkts, qBytes), newLoss(*lossP, *seed), *slots, *mtu),
		newDirection("B->A", tunB, tunA, *delay, newShaper(rate, qPkts, qBytes), newLoss(*lossP, *seed+1), *slots, *mtu),
	}
	queue := fmt.Sprintf("%d packets", qPkts)
	if qBytes > 0 {
		queue = fmt.Sprintf("%d bytes", qBytes)
	}
	log.Printf("%s%s <-> %s%s: delay %v, rate %d bit/s, queue %s, loss %g, mtu %d, pid %d",
		*nameA, nsSuffix(*nsA), *nameB, nsSuffix(*nsB), *delay, rate, queue, *lossP, *mtu, os.Getpid())

	errc := make(chan error, 2)
	for _, d := range dirs {
		go func() { errc <- d.readLoop() }()
		go d.writeLoop()
	}
	waitSignals(*statsIv, func() {
		for _, d := range dirs {
			log.Printf("%s %s", d.name, &d.stats)
		}
	}, errc)
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
