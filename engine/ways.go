package engine

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
)

// Large files can move three ways. A striped endpoint (a front end and
// its data movers, GCT's -r or ferry's --movers) answers SPAS with one
// address per mover: one striped transfer then has every mover move its
// share. An endpoint that lists several servers of the same storage
// (Endpoint.Servers) takes the chunks of one file on sessions spread over
// them (the client-side approach of the chunking papers). Otherwise a
// file moves over one session pair, chunked over several when tuning says
// so.
//
// When both are possible the copy tries each on one large file, one after
// the other so that neither slows the other's measure, and moves the rest
// the way that delivered its file faster (bytes over the time from its
// first transfer starting to its outcome, checks included). Two files are
// a small sample and other traffic may sway it; it is still the pair's
// own behaviour, measured, rather than a guess.

// Way is how a large file moves between the two ends.
type Way int

// Ways of moving a large file.
const (
	WayPlain   Way = iota // over session pairs to the endpoints' own addresses
	WayStriped            // one striped transfer (SPAS/SPOR): each mover moves its stripes
	WaySpread             // chunks on sessions spread over an endpoint's several servers
)

func (w Way) String() string { return [...]string{"plain", "striped", "spread"}[w] }

// Ways is an optional interface of a Reporter: Way is called when the
// copy settles how its large files move, and why: once when only one way
// is open, else for each trial and for the choice.
type Ways interface {
	Way(w Way, note string)
}

// defaultStripeSize is the size from which a file is striped or spread
// over servers. Below it a file takes well under a second on a LAN, and
// a striped setup (SPAS and SPOR, a set of streams per mover, an EOD per
// stripe) or the sessions and chunk bookkeeping of spreading weigh more
// than the movers add; from it every mover of a blocked layout gets
// dozens of blocks.
const defaultStripeSize = 64 << 20

// stripeLayout is the layout of striped transfers: blocks of 1 MiB dealt
// round robin, GCT's default, so that each mover gets an even share of
// any large file and its range markers stay few.
var stripeLayout = gridftp.Layout{BlockSize: 1 << 20}

// Servers is how many servers the endpoint's sessions are spread over.
func (e Endpoint) servers() int { return 1 + len(e.Servers) }

// at is the endpoint as reached at its k-th server (round robin).
func (e Endpoint) at(k int) Endpoint {
	if k %= e.servers(); k > 0 {
		e.Addr = e.Servers[k-1]
	}
	return e
}

// chooser settles the way of each large file (see above).
type chooser struct {
	mu     sync.Mutex
	ways   []Way // open to the copy, in trial order
	trials []trial
	chosen int     // index into ways; -1 until chosen
	held   []*file // waiting for the choice
	now    func() time.Time
}

// trial is one large file moved one way, and how fast it went.
type trial struct {
	f     *file
	start time.Time // its first transfer started; zero until then
	rate  float64   // bytes per second; 0 when it failed
}

func newChooser(ways []Way) *chooser {
	ch := &chooser{ways: ways, chosen: -1, now: time.Now}
	if len(ways) == 1 {
		ch.chosen = 0
	}
	return ch
}

// assign gives a large file its way, or holds it until trials choose one
// (held). The first files are the trials.
func (ch *chooser) assign(f *file) (w Way, held bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	switch {
	case ch.chosen >= 0:
		return ch.ways[ch.chosen], false
	case len(ch.trials) == 0:
		ch.trials = append(ch.trials, trial{f: f})
		return ch.ways[0], false
	}
	ch.held = append(ch.held, f)
	return 0, true
}

// started notes that a transfer of f started: a trial's clock starts.
func (ch *chooser) started(f *file) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for i := range ch.trials {
		if ch.trials[i].f == f && ch.trials[i].start.IsZero() {
			ch.trials[i].start = ch.now()
		}
	}
}

// release is a held file and the way it goes now.
type release struct {
	f   *file
	way Way
}

// ended takes the outcome of a file: a trial's end starts the next trial
// or makes the choice, which releases the held files. note says what
// happened, for Ways; "" when nothing did.
func (ch *chooser) ended(f *file, ok bool) (out []release, chosen Way, note string) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.chosen >= 0 || len(ch.trials) == 0 || ch.trials[len(ch.trials)-1].f != f {
		return nil, 0, ""
	}
	t := &ch.trials[len(ch.trials)-1]
	if d := ch.now().Sub(t.start); ok && !t.start.IsZero() && d > 0 {
		t.rate = float64(f.size) / d.Seconds()
	}
	if n := len(ch.trials); n < len(ch.ways) && len(ch.held) > 0 {
		next := ch.held[0]
		ch.held = ch.held[1:]
		note = fmt.Sprintf("trying %s on %s (%s)", ch.ways[n], next.src, ch.rates())
		ch.trials = append(ch.trials, trial{f: next})
		return []release{{next, ch.ways[n]}}, ch.ways[n], note
	}
	best := 0
	for i, t := range ch.trials {
		if t.rate > ch.trials[best].rate {
			best = i
		}
	}
	ch.chosen = best
	for _, h := range ch.held {
		out = append(out, release{h, ch.ways[best]})
	}
	ch.held = nil
	return out, ch.ways[best], "chosen: " + ch.rates()
}

// rates says how fast each trial went; the caller holds ch.mu.
func (ch *chooser) rates() string {
	s := ""
	for i, t := range ch.trials {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %.1f MB/s", ch.ways[i], t.rate/1e6)
	}
	return s
}

// chooseWays finds the ways open to large files: it asks both ends for
// their stripes (SPAS) on the planning sessions when a file is large
// enough, and counts the endpoints' servers; it reports the plan.
func (c *copier) chooseWays(ctx context.Context, files []*file) error {
	size := c.opts.StripeSize
	if size == 0 {
		size = defaultStripeSize
	}
	var largest int64
	for _, f := range files {
		largest = max(largest, f.size)
	}
	c.set.Stripes = 1
	if size < 0 || largest < size || c.listing == nil {
		return nil
	}
	c.stripeSize = size
	var ways []Way
	var notes []string
	// A receiver that accepts no connections is reached in reverse,
	// which striping cannot do.
	if !c.dst.Outbound && !c.src.Outbound {
		var sn, dn int
		var serr, derr error
		both(func() { sn, serr = c.listing.Src.Stripes(ctx) }, func() { dn, derr = c.listing.Dst.Stripes(ctx) })
		if serr != nil {
			return fmt.Errorf("source: SPAS: %w", serr)
		}
		if derr != nil {
			return fmt.Errorf("destination: SPAS: %w", derr)
		}
		c.set.Stripes = dn
		if dn > 1 { // the destination's movers receive whatever the source is
			ways = append(ways, WayStriped)
			notes = append(notes, fmt.Sprintf("stripes (SPAS): %d at the destination, %d at the source", dn, sn))
		}
	}
	if n := max(c.src.servers(), c.dst.servers()); n > 1 && c.opts.ChunkSize >= 0 {
		ways = append(ways, WaySpread)
		notes = append(notes, fmt.Sprintf("servers: %d at the source, %d at the destination", c.src.servers(), c.dst.servers()))
		// A pair per server at least; a concurrency the options fix
		// stands (tuning capped it at the number of files, before chunks).
		c.set.Concurrency = max(c.set.Concurrency, cmp.Or(c.opts.Concurrency, n))
	}
	if len(ways) == 0 {
		return nil
	}
	c.ways = newChooser(ways)
	c.set.Way = ways[0]
	if w, ok := c.rep.(Ways); ok {
		note := fmt.Sprintf("%s for files of %d MiB or more: %s", ways[0], size>>20, notes[0])
		if len(ways) > 1 {
			note = fmt.Sprintf("trying %s, then %s, for files of %d MiB or more: %s; %s", ways[0], ways[1], size>>20, notes[0], notes[1])
		}
		w.Way(ways[0], note)
	}
	return nil
}

// chosen hands a file's outcome to the chooser and queues the files it
// releases.
func (c *copier) chosen(f *file, ok bool) {
	out, w, note := c.ways.ended(f, ok)
	if note == "" {
		return
	}
	if c.ways.decided() {
		c.mu.Lock()
		c.res.Settings.Way = w
		c.mu.Unlock()
	}
	if r, ok := c.rep.(Ways); ok {
		r.Way(w, note)
	}
	for _, r := range out {
		c.enqueue(r.f, r.way)
	}
}

// decided reports whether the choice is made.
func (ch *chooser) decided() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.chosen >= 0
}

// spreadChunk is the chunk size that spreads a file of size bytes over n
// servers: two chunks per server, so that a faster server takes more,
// and none under 8 MiB.
func spreadChunk(size int64, n int) int64 {
	const mib = 1 << 20
	c := (size/int64(2*n) + mib - 1) / mib * mib
	return max(c, 8*mib)
}

// stripe sets a pair's data channel up striped (SPAS, SPOR) or not, for
// the next transfer.
func (c *copier) stripe(ctx context.Context, p *client.Pair, striped bool) error {
	p.Striping = nil
	if striped {
		p.Striping = &stripeLayout
	}
	return p.Setup(ctx, c.set.Parallelism)
}
