package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/internal/fault"
	"ferry/internal/synclevel"
)

// unit is one transfer: a whole file, one chunk of it, or a batch of
// small files in one tar stream (f is nil then).
type unit struct {
	f        *file
	b        *batch
	off, n   int64 // the chunk; n < 0 for the whole file
	striped  bool  // moves over a striped pair (ways.go)
	attempts int
	wait     fault.Backoff // its retries' waits
	seen     int64         // the copier's recoveries when it last failed
	part     client.Part   // what the current attempt moves
	reported int64         // bytes of the current attempt already reported
	renaming bool          // its file landed, its rename was sent on its pair: the replies are owed
	selfRen  bool          // the current attempt's destination renames it itself (serverRenames)
}

func (u *unit) length() int64 {
	if u.n < 0 {
		return u.f.size
	}
	return u.n
}

func (u *unit) name() string {
	if u.n < 0 {
		return u.f.src
	}
	return fmt.Sprintf("%s [%d+%d]", u.f.src, u.off, u.n)
}

// copier is one run of Copy.
type copier struct {
	src, dst Endpoint
	opts     Options
	rep      Reporter
	set      Settings
	q        queue
	fin      chan job
	retire   chan struct{} // the optimizer takes a session pair away
	ahead    atomic.Int64  // finishers yet to start that dial at once

	tarSrc     tarEnd // how the ends pack and unpack tar streams (tar.go)
	tarDst     tarEnd
	tarPer     int    // members of a batch; 0: no batches
	tarDecided bool   // whether files move as tar streams is decided (tarWindow)
	srcSums    sumEnd // how the ends compute checksum lists (sums.go)
	dstSums    sumEnd
	cred       *gridftp.DataCredential // for the data channels, when both ends are ferry's (datasec.go)
	sumAlg     string                  // what both ends compute, for checks Verify does not ask for; "": none
	dialErr    error                   // why a finisher's last dial failed
	ctx        context.Context         // the run's, for work a retry hands to finishers
	done       <-chan struct{}         // the run is stopping: failures are no faults
	stop       context.CancelFunc
	noSpace    error // the destination is full (nospace.go)
	mu         sync.Mutex
	listing    *client.Pair // the planning sessions, until a worker takes them
	spare      chan spare   // pairs dialed while planning (predial)
	predials   sync.WaitGroup
	predialed  chan struct{}      // closed when every predial dial ended
	unspare    context.CancelFunc // stops the dials of predial
	pending    int                // files admitted, not yet final
	planning   bool               // the planner runs: more files may come
	cut        bool               // the run stopped before the plan was done
	res        Result
	live       map[*file]struct{} // the files admitted, not yet final
	ended      []*file            // files failed or canceled that may have left a temporary file (settleTemps)
	begun      bool               // the planner handed on its first files (planner's goroutine only)
	// startedSent: the settings were reported; ending: the run
	// is over, they are reported as they are (reportStarted).
	startedSent, ending bool
	first               chan window                  // the first files, for begin
	ready               chan struct{}                // closed once begin is done
	freed               chan struct{}                // a file became final: room for more
	canceled            []string                     // paths canceled (cancel.go)
	flying              map[*unit]context.CancelFunc // units on pairs, and how to stop their pair
	waiting             map[*time.Timer]func()       // retries waiting for their backoff (after)

	// downSince is when an endpoint first did not answer since the last
	// time both did (UnixNano; 0: they answer); recoveries counts the
	// times they answered again.
	downSince  atomic.Int64
	recoveries atomic.Int64

	ways       *chooser     // how large files move; nil: plain (ways.go)
	stripeSize int64        // from which files are large for ways
	servers    atomic.Int64 // the server index of the next pair a worker dials
}

// Copy copies items from src to dst and reports as it goes. The error is
// for the run as a whole (bad arguments, an unreachable endpoint,
// cancellation); per-file failures are in Result.FailedFiles.
//
// Planning and moving run at once (see planner): the first window of
// files sets the tuning, the ways of large files and tar batching
// (begin); each later window is queued as it comes, while fewer than
// maxLive files are not final.
func Copy(ctx context.Context, src, dst Endpoint, items []Item, opts Options, rep Reporter) (Result, error) {
	start := time.Now()
	if rep == nil {
		rep = nopReporter{}
	}
	if !opts.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, opts.Deadline)
		defer cancel()
	}
	outer := ctx
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	c := &copier{src: src, dst: dst, opts: opts, rep: rep, done: ctx.Done(), stop: stop, ctx: ctx,
		live: map[*file]struct{}{}, planning: true, first: make(chan window), ready: make(chan struct{}), freed: make(chan struct{}, 1)}
	defer c.closeListing()
	defer c.closeSpares()
	if opts.Cancels != nil {
		c.canceled = opts.Cancels.attach(c.cancel)
		defer opts.Cancels.attach(nil)
	}
	p, err := c.open(ctx)
	if err != nil {
		return c.res, err
	}
	if c.set.wan() && (opts.Recursive || len(items) > 1 || len(items) == 1 && items[0].Recursive) {
		c.predial(ctx, predialPairs)
	}
	planned := make(chan error, 1)
	go func() { planned <- c.planAll(ctx, p, items) }()
	select {
	case w := <-c.first:
		err = c.begin(ctx, w.files, w.last)
		close(c.ready)
		if err != nil {
			stop()
			<-planned
			return c.res, err
		}
		c.run(ctx)
		err = <-planned
	case err = <-planned:
		if err == nil {
			err = c.begin(ctx, nil, true)
		}
	}
	c.res.Elapsed = time.Since(start)
	c.ending = true
	c.reportStarted()
	if err != nil {
		return c.res, err
	}
	if full := c.full(); full != nil {
		c.removePartials(outer)
		return c.res, full
	}
	c.settleTemps(outer)
	if err := ctx.Err(); err != nil && (c.pending > 0 || c.cut) {
		if errors.Is(err, context.DeadlineExceeded) {
			more := ""
			if c.cut {
				more = " found so far (the listing did not end)"
			}
			return c.res, fmt.Errorf("deadline reached with %d of %d files%s not done: %w", c.pending, c.res.Files, more, err)
		}
		return c.res, err
	}
	return c.res, nil
}

// open opens a session at each end, which the planner lists on (and a
// worker takes once the plan is done), judges the link between them
// (judgeLink), chooses the checksum algorithm, and makes the planner.
func (c *copier) open(ctx context.Context) (*planner, error) {
	pair, err := c.dialPair(ctx)
	if err != nil {
		return nil, err
	}
	c.listing = pair
	s, d := pair.Src, pair.Dst
	if err := judgeLink(ctx, &c.set, s, d, localNets()); err != nil {
		return nil, err
	}
	if err := c.secure(s, d); err != nil {
		return nil, err
	}
	if c.opts.Verify || c.opts.SyncLevel == synclevel.Checksum || c.opts.Resume {
		if c.set.Algorithm, err = chooseAlgorithm(c.opts.Algorithm, s.Checksums(), d.Checksums()); err != nil {
			return nil, err
		}
		_, liveS := s.Feature("CKSMLIVE")
		_, liveD := d.Feature("CKSMLIVE")
		c.set.Live = c.opts.Verify && liveS && liveD
	}
	c.planCompress(pair)
	p := &planner{src: s, dst: d, opts: c.opts, alg: c.set.Algorithm, srcSums: &c.srcSums, dstSums: &c.dstSums,
		emit: c.admit, hungry: func() bool { return c.q.len() == 0 }, redial: c.redial,
		dialSrc: c.src.dial, pools: [2]*pool{newPool(c.src.dial), newPool(c.dst.dial)}}
	if p.alg == "" {
		p.alg, _ = chooseAlgorithm("", s.Checksums(), d.Checksums()) // for what earlier runs left (goodBlocks)
	}
	c.sumAlg = p.alg
	p.deleter, _ = c.rep.(Deleter)
	return p, nil
}

// redial replaces the planning session at one end (dst), broken, with a
// new one.
func (c *copier) redial(ctx context.Context, dst bool) (*client.Conn, error) {
	e := c.src
	if dst {
		e = c.dst
	}
	conn, err := e.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	old := &c.listing.Src
	if dst {
		old = &c.listing.Dst
	}
	(*old).Close()
	*old = conn
	c.mu.Unlock()
	return conn, nil
}

// planAll runs the planner, and then lets the run end once every file is
// final; a plan that fails stops the run.
// A plan cut short because the run stopped (canceled, a deadline, a full
// destination) is no error of its own: the run's end says why (cut).
func (c *copier) planAll(ctx context.Context, p *planner, items []Item) error {
	err := p.plan(ctx, items)
	c.mu.Lock()
	c.res.Directories, c.res.Deleted = p.dirs, p.deleted
	c.cut = err != nil && ctx.Err() != nil
	c.mu.Unlock()
	c.planDone()
	if err != nil && ctx.Err() == nil {
		c.stop()
		return err
	}
	return nil
}

// planDone notes that no more files come: the planning sessions are free
// for a worker, and the run ends once every file is final.
func (c *copier) planDone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.planning = false
	if c.pending == 0 {
		c.q.close()
	}
}

// admit takes a window from the planner: it hands the first files to
// begin and waits for it, and queues later ones once there is room
// (fewer than maxLive files not final); it reports what the planner
// settled and planned as it takes them.
func (c *copier) admit(ctx context.Context, w window) error {
	if len(w.files) == 0 {
		c.report(w)
		return nil
	}
	if !c.begun {
		c.report(w)
		c.begun = true
		if w.last {
			// The planning sessions are free; begin queues the files
			// (the run ends once they are final).
			c.mu.Lock()
			c.planning = false
			c.mu.Unlock()
		}
		select {
		case c.first <- w:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-c.ready:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		c.mu.Lock()
		room := c.pending == 0 || c.pending+len(w.files) <= maxLive
		c.mu.Unlock()
		if room {
			break
		}
		select {
		case <-c.freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.report(w)
	bs, rest := c.tarWindow(ctx, w.files, false, w.last)
	c.reportStarted()
	c.schedule(w.files, bs, rest)
	if w.last {
		c.planDone()
	}
	return nil
}

// report counts and reports what a window of the plan settled, and what
// it plans to move.
func (c *copier) report(w window) {
	var bytes int64
	for _, f := range w.files {
		bytes += f.size - f.restart.Total()
	}
	planned := len(w.files)
	c.mu.Lock()
	c.res.Files += len(w.files) + len(w.done)
	for _, r := range w.done {
		switch r.Outcome {
		case Skipped:
			c.res.Skipped++
		case Transferred:
			c.res.Transferred++
			planned++
		case SkippedError:
			c.res.SkippedErrors++
			planned++
		default:
			c.res.Failed++
			c.res.FailedFiles = append(c.res.FailedFiles, r)
		}
	}
	c.mu.Unlock()
	c.rep.Planned(planned, bytes)
	if wk, ok := c.rep.(Walker); ok {
		wk.Walked(w.dirs)
	}
	for _, r := range w.done {
		c.rep.Done(r)
	}
}

// begin decides, from the first window of files (last: the whole plan),
// the settings, the ways of large files and tar batching, reports them,
// and queues the files.
func (c *copier) begin(ctx context.Context, files []*file, last bool) error {
	c.set = tune(c.opts, files, c.set, !last)
	if err := c.chooseWays(ctx, files); err != nil {
		return err
	}
	bs, rest := c.tarWindow(ctx, files, true, last)
	c.planGrowth()
	c.mu.Lock()
	c.res.Settings = c.set
	c.mu.Unlock()
	c.reportStarted()
	c.schedule(files, bs, rest)
	return nil
}

// reportStarted reports the settings (Starter) once they are settled: once
// whether small files move as tar streams is decided, which may take
// later windows than the first (tarWindow), or when the run ends.
func (c *copier) reportStarted() {
	if c.startedSent || !c.tarDecided && !c.ending {
		return
	}
	c.startedSent = true
	if st, ok := c.rep.(Starter); ok {
		c.mu.Lock()
		s := c.res.Settings
		c.mu.Unlock()
		st.Started(s)
	}
}

// schedule queues the batches bs of some of files first, then splits the
// rest into units and queues them. It counts the finishers' jobs to come:
// up to that many finishers dial their sessions while the workers start,
// not when the first file waits for them.
func (c *copier) schedule(files []*file, bs []*batch, rest []*file) {
	c.mu.Lock()
	for _, f := range files {
		c.live[f] = struct{}{}
	}
	c.pending += len(files)
	var canceled []*file
	for _, f := range files {
		if c.isCanceled(f.src) {
			canceled = append(canceled, f)
		}
	}
	c.mu.Unlock()
	for _, f := range canceled {
		c.final(f, Canceled, nil)
	}
	for _, b := range bs {
		for _, f := range b.files {
			f.units = 1
		}
		c.q.push(&unit{b: b})
	}
	for _, f := range rest {
		if f.ended {
			continue
		}
		way := WayPlain
		if c.ways != nil && f.size >= c.stripeSize {
			var held bool
			if way, held = c.ways.assign(f); held {
				continue // queued once trials choose its way
			}
		}
		// A whole file that needs only its rename is renamed on its
		// worker's pair (worker), with no finisher's job.
		if whole := c.enqueue(f, way); c.checksSource(f) || f.tmp != "" && !whole {
			jobs := 1 // finalize; with Verify, each chunk's check before it
			if c.opts.Verify {
				jobs = f.units
			}
			c.ahead.Add(int64(jobs))
		}
	}
}

// enqueue splits a file into units the way it moves and queues them:
// whole and striped, in chunks spread over servers, or in chunks of the
// tuned size when it is large enough (else whole). It reports whether the
// file moves whole, in one unit.
func (c *copier) enqueue(f *file, way Way) (whole bool) {
	chunk := c.set.ChunkSize
	switch way {
	case WayStriped:
		chunk = 0
	case WaySpread:
		chunk = spreadChunk(f.size, max(c.src.servers(), c.dst.servers()))
	}
	var us []*unit
	var again int64 // bytes an earlier run moved that go again
	c.mu.Lock()
	if f.ended {
		c.mu.Unlock()
		return false
	}
	if chunk > 0 && f.size > 2*chunk {
		for off := int64(0); off < f.size; off += chunk {
			n := min(chunk, f.size-off)
			if f.restart.Contains(off, off+n) {
				f.chunks.Add(off, off+n) // an earlier run moved it
				continue
			}
			us = append(us, &unit{f: f, off: off, n: n})
		}
		if len(us) > 0 {
			again = f.restart.Total() - f.chunks.Total() // parts of chunks go whole
			f.restart = f.chunks
		}
	}
	if len(us) == 0 { // unchunked, or every chunk moved before
		f.have = f.restart
		us = append(us, &unit{f: f, n: -1, striped: way == WayStriped})
	}
	f.units = len(us)
	c.mu.Unlock()
	for _, u := range us {
		c.q.push(u)
	}
	if again > 0 {
		c.rep.Planned(0, again)
	}
	return us[0].n < 0
}

// run starts the session pairs and the finishers, and waits for every file.
func (c *copier) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.fin = make(chan job)
	c.retire = make(chan struct{}, maxConcurrency(c.set))
	var wg sync.WaitGroup
	start := func() {
		wg.Add(2)
		go func() { defer wg.Done(); c.worker(ctx) }()
		go func() { defer wg.Done(); c.finisher(ctx) }()
	}
	for range c.set.Concurrency {
		start()
	}
	if c.opts.Concurrency == 0 {
		wg.Add(1)
		go func() { defer wg.Done(); c.optimize(ctx, start) }()
	}
	stop := context.AfterFunc(ctx, c.q.close)
	defer stop()
	wg.Wait()
}

// worker moves units over one session pair, keeping up to Pipelining
// transfers in flight.
func (c *copier) worker(ctx context.Context) {
	var pair *client.Pair
	// pctx ends with the pair: a cancel of a file on it (cancel.go) stops
	// the pair, and the other transfers on it go back to the queue.
	var life struct {
		ctx   context.Context
		abort context.CancelFunc
	}
	drop := func() {
		life.abort()
		pair.Close()
		pair = nil
	}
	defer func() {
		if pair != nil {
			drop()
		}
	}()
	var inflight []*unit // transfers, and renames whose replies are owed (renaming)
	// abandon drops the pair: the transfers in flight go back to the
	// queue, the renames in doubt to finishers (requeue).
	abandon := func() {
		drop()
		c.land(inflight...)
		c.requeue(inflight)
		inflight = nil
	}
	retiring := false
	for {
		if !retiring {
			select {
			case <-c.retire: // the optimizer wants fewer pairs: drain, then go
				retiring = true
			default:
			}
		}
		for !retiring && len(inflight)-renamesIn(inflight) < c.set.Pipelining {
			u := c.q.pop(ctx, len(inflight) == 0)
			if u == nil {
				break
			}
			if c.abandoned(u) {
				continue
			}
			if pair == nil {
				p, err := c.connect(ctx)
				if err != nil {
					c.fail(u, err)
					continue
				}
				pair = p
				life.ctx, life.abort = context.WithCancel(ctx)
			}
			if u.b != nil && batchesIn(inflight) >= maxBatchesInFlight {
				c.q.pushFront(u) // the other pairs take the next batches
				break
			}
			if u.striped != (pair.Striping != nil) {
				if len(inflight) > 0 {
					c.q.pushFront(u) // a pair changes its data channel between transfers only
					break
				}
				if err := c.stripe(ctx, pair, u.striped); err != nil {
					c.fail(u, err)
					drop()
					continue
				}
			}
			u.reported, u.part = 0, c.part(u)
			if src, dst := c.stacksFor(u); src != pair.Src.DiskStack() || dst != pair.Dst.DiskStack() {
				if !popenStack(src, dst, pair.Src.DiskStack(), pair.Dst.DiskStack()) {
					// Layers the servers name in FEAT: the stacks go
					// ahead of the transfer, pipelined, in order.
					u.part.SrcStack, u.part.DstStack = stackChange(pair.Src, src), stackChange(pair.Dst, dst)
				} else if len(inflight) > 0 {
					c.q.pushFront(u) // a program's stack is set between transfers only
					break
				} else if err := setStacks(ctx, pair, src, dst); err != nil {
					c.stackRefused(u, err)
					if !errors.As(err, new(*gridftp.Error)) {
						drop()
					}
					continue
				} else if err := pair.Setup(ctx, c.streams(u)); err != nil {
					c.fail(u, err)
					drop()
					continue
				}
			}
			u.selfRen = c.serverRenames(u, pair)
			if u.selfRen {
				u.part.DstPath = u.f.dst
				c.renameSent(u.f) // with the STOR: its reply may be lost
			}
			u.part.DstPartStor = pair.Dst.PartStorChange(u.selfRen)
			if err := pair.Start(u.part); err != nil {
				c.fail(u, err)
				drop()
				c.requeue(inflight)
				inflight = nil
				continue
			}
			c.fly(u, life.abort)
			c.started(u)
			if u.f != nil {
				c.touch(u.f) // a batch's members go to temporary names first
				if c.ways != nil {
					c.ways.started(u.f)
				}
			}
			inflight = append(inflight, u)
		}
		if len(inflight) == 0 {
			if retiring || c.q.done() || ctx.Err() != nil {
				return
			}
			continue
		}

		u := inflight[0]
		inflight = inflight[1:]
		if u.renaming {
			err := pair.Dst.RenameReply(life.ctx)
			if err != nil && !errors.As(err, new(*gridftp.Error)) {
				inflight = append([]*unit{u}, inflight...)
				abandon() // the rename is in doubt: requeue
				continue
			}
			u.renaming = false
			c.renamed(ctx, u, err)
			continue
		}
		err := pair.Finish(life.ctx, u.part, c.markers(u))
		c.land(u)
		if err != nil {
			abandon()
			if c.opts.fan != nil && u.f != nil && c.opts.fan.failed(u.f.dst, err) {
				// The head stored the file; some of the tree did not:
				// the repair pass sees to those.
				c.unitMoved(ctx, u)
			} else {
				c.fail(u, err)
			}
			continue
		}
		if u.b != nil {
			c.batchMoved(ctx, u)
			continue
		}
		if u.selfRen {
			c.reportRest(u)
			if c.lastUnit(u) {
				c.renamed(ctx, u, nil)
			}
			continue
		}
		if c.renameOnly(u) {
			// All its data landed: its rename goes on this pair, ahead
			// of the next transfers' commands, its replies read in
			// their turn; no finisher's session, no round trip of its
			// own.
			c.reportRest(u)
			if !c.lastUnit(u) {
				continue
			}
			c.renameSent(u.f)
			u.renaming = true
			inflight = append(inflight, u)
			if err := pair.Dst.SendRename(u.f.tmp, u.f.dst); err != nil {
				abandon()
			}
			continue
		}
		c.unitMoved(ctx, u)
	}
}

// connect sets up a session pair for transfers: the planning sessions
// when no worker has taken them yet, else new ones.
func (c *copier) connect(ctx context.Context) (*client.Pair, error) {
	start := time.Now()
	// Pairs set up while planning first: the planning pair still needs
	// its PASV and PORT.
	p := c.takeSpare(ctx)
	if p == nil {
		p = c.takeListing()
	}
	if p == nil {
		var err error
		if p, err = c.dialPairAt(ctx, int(c.servers.Add(1))); err != nil {
			return nil, err
		}
	}
	c.configure(p)
	if err := p.Setup(ctx, c.set.Parallelism); err != nil {
		p.Close()
		return nil, err
	}
	c.answered(start)
	return p, nil
}

// configure gives a pair the copy's data channel settings, for Setup.
func (c *copier) configure(p *client.Pair) {
	if c.set.Live {
		p.Live = c.set.Algorithm
	}
	_, listens := p.Src.Feature("PASVSEND")
	p.Reverse = c.dst.Outbound && !c.src.Outbound && listens
	p.Cred, p.Private = c.cred, c.opts.Encrypt
	p.MaxParallel = c.set.MaxParallel
	p.Stall = c.opts.stall(c.set.RTT)
	if c.cred == nil {
		p.From = senderAddrs(p)
	}
}

// dialPair opens and logs in a session at each end, both at once, at
// the endpoints' first servers.
func (c *copier) dialPair(ctx context.Context) (*client.Pair, error) { return c.dialPairAt(ctx, 0) }

// dialPairAt is dialPair at the k-th server of each end (round robin):
// workers' pairs spread over an endpoint's servers.
func (c *copier) dialPairAt(ctx context.Context, k int) (*client.Pair, error) {
	var s, d *client.Conn
	var serr, derr error
	both(func() { s, serr = c.src.at(k).dial(ctx) }, func() { d, derr = c.dst.at(k).dial(ctx) })
	if serr != nil || derr != nil {
		for _, conn := range []*client.Conn{s, d} {
			if conn != nil {
				conn.Close()
			}
		}
		if serr != nil {
			return nil, fmt.Errorf("source: %w", serr)
		}
		return nil, fmt.Errorf("destination: %w", derr)
	}
	return &client.Pair{Src: s, Dst: d}, nil
}

// takeListing hands over the planning sessions, once, when the plan is
// done.
func (c *copier) takeListing() *client.Pair {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.planning {
		return nil
	}
	p := c.listing
	c.listing = nil
	return p
}

// predialPairs is how many session pairs a copy of trees dials while it
// plans over a wide-area link: as many as the tuning gives small files
// there. The planning pair comes after them.
const predialPairs = 8

// predial dials n session pairs in the background while the copy plans,
// and sets their data channels up for one stream (what small files get
// over a WAN): over a wide-area link a pair's logins, PASV and PORT cost
// round trips that the first transfers would otherwise wait for once the
// plan is made. connect takes them (another parallelism then costs the
// source one command ahead of the first transfer; a long plan, a new
// PASV and PORT); those no worker takes are closed at the end.
func (c *copier) predial(ctx context.Context, n int) {
	ctx, c.unspare = context.WithCancel(ctx)
	c.spare = make(chan spare, n)
	for range n {
		c.predials.Add(1)
		go func() {
			defer c.predials.Done()
			p, err := c.dialPairAt(ctx, int(c.servers.Add(1)))
			if err != nil {
				return
			}
			c.configure(p)
			if err := p.Setup(ctx, 1); err != nil {
				p.Close()
				return
			}
			c.spare <- spare{p, time.Now()}
		}()
	}
	c.predialed = make(chan struct{})
	go func() {
		c.predials.Wait()
		close(c.predialed)
	}()
}

// spare is a pair predial made, and when it was set up.
type spare struct {
	p  *client.Pair
	at time.Time
}

// spareSetupAge is how long a spare pair's data channel setup is trusted:
// a passive side may stop listening after a while.
const spareSetupAge = 30 * time.Second

// takeSpare takes a pair predial made, waiting for one still being
// dialed; nil when there is none.
func (c *copier) takeSpare(ctx context.Context) *client.Pair {
	if c.spare == nil {
		return nil
	}
	var s spare
	select {
	case s = <-c.spare:
	case <-c.predialed:
		select {
		case s = <-c.spare:
		default:
			return nil
		}
	case <-ctx.Done():
		return nil
	}
	if time.Since(s.at) > spareSetupAge {
		s.p.Reset()
	}
	return s.p
}

// closeSpares closes the pairs predial made that no worker took.
func (c *copier) closeSpares() {
	if c.unspare != nil {
		c.unspare()
	}
	c.predials.Wait()
	for p := c.takeSpare(context.Background()); p != nil; p = c.takeSpare(context.Background()) {
		p.Close()
	}
}

// closeListing closes the planning sessions if no worker took them.
func (c *copier) closeListing() {
	c.mu.Lock()
	p := c.listing
	c.listing = nil
	c.mu.Unlock()
	if p != nil {
		p.Close()
	}
}

// both runs f and g at once and returns when both are done.
func both(f, g func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		g()
	}()
	f()
	<-done
}

func (c *copier) part(u *unit) client.Part {
	if u.b != nil {
		return c.batchPart(u)
	}
	p := client.Part{SrcPath: u.f.src, DstPath: u.f.at(), Offset: u.off, Length: u.n}
	if u.n < 0 {
		c.mu.Lock()
		p.Have.AddAll(u.f.have)
		c.mu.Unlock()
	}
	return p
}

// markers turns the destination's markers into progress and restart ranges.
func (c *copier) markers(u *unit) client.Markers {
	if u.b != nil {
		return c.batchMarkers(u)
	}
	return client.Markers{
		Bytes: func(total int64) {
			if d := total - u.reported; d > 0 {
				u.reported = total
				c.progress(u.f, d)
			}
		},
		Ranges: func(rs gridftp.Ranges) {
			// A tree's file goes again whole: its head cannot seek. So
			// does one its destination renames itself: once its reply is
			// lost, its temporary name may be gone.
			if u.n < 0 && c.opts.fan == nil && !u.selfRen {
				c.mu.Lock()
				u.f.have.AddAll(rs)
				c.mu.Unlock()
				c.partial(u.f, false)
			}
		},
	}
}

// partial tells a Partials reporter what of f is at the destination; a
// member of a tar stream when member.
func (c *copier) partial(f *file, member bool) {
	pr, ok := c.rep.(Partials)
	if !ok {
		return
	}
	c.mu.Lock()
	p := Partial{Size: f.size, Modify: f.mtime, Member: member}
	p.Have.AddAll(f.have)
	p.Have.AddAll(f.chunks)
	ended := f.ended
	c.mu.Unlock()
	if !ended {
		pr.Partial(f.src, p)
	}
}

// started tells a Partials reporter that the files of u are on their way:
// what lands of them, even after this copy stops, a later run knows this
// copy sent.
func (c *copier) started(u *unit) {
	if c.opts.fan != nil {
		return
	}
	if u.b == nil {
		c.partial(u.f, false)
		return
	}
	c.mu.Lock()
	fs := make([]*file, 0, len(u.b.byName))
	for _, f := range u.b.byName {
		fs = append(fs, f)
	}
	c.mu.Unlock()
	for _, f := range fs {
		c.partial(f, true)
	}
}

// progress counts d bytes of f moved (or, d < 0, taken back).
func (c *copier) progress(f *file, d int64) {
	c.mu.Lock()
	if f.ended {
		c.mu.Unlock()
		return // a canceled file's late markers
	}
	if d > 0 {
		c.res.Bytes += d // what moved, re-sends too
	}
	f.moved += d
	c.mu.Unlock()
	c.moved(f, d)
}

// moved tells the reporter that d bytes of f moved (or were taken back).
func (c *copier) moved(f *file, d int64) {
	if fp, ok := c.rep.(FileProgress); ok {
		fp.FileProgress(f.src, d)
		return
	}
	c.rep.Progress(d)
}

// unitMoved accounts a unit whose transfer succeeded; what remains (chunk
// checksums, whole-file checks, mtime) runs on a finisher.
func (c *copier) unitMoved(ctx context.Context, u *unit) {
	c.reportRest(u)
	if u.n >= 0 && c.opts.Verify {
		c.finish(ctx, func(p *client.Pair) error { return c.verifyChunk(ctx, p, u) })
		return
	}
	c.unitDone(ctx, u, nil)
}

// reportRest reports as moved what the markers of u's attempt did not.
func (c *copier) reportRest(u *unit) {
	part := u.length() - u.part.Have.Total() // a restart moves only what is missing
	if d := part - u.reported; d > 0 {
		u.reported = part
		c.progress(u.f, d)
	}
}

// unitDone counts a finished unit; the file's last one finalizes it, on the
// pair p when a finisher calls (a finisher must not wait for another),
// else handed to one. The error is finalize's on p.
func (c *copier) unitDone(ctx context.Context, u *unit, p *client.Pair) error {
	if !c.lastUnit(u) {
		return nil
	}
	switch {
	case !c.needsFinishing(u.f):
		c.final(u.f, Transferred, nil)
	case p != nil:
		return c.finalize(ctx, p, u)
	default:
		c.finish(ctx, func(p *client.Pair) error { return c.finalize(ctx, p, u) })
	}
	return nil
}

// lastUnit counts a finished unit and reports whether it was the last of
// its file, which did not end otherwise (failed or canceled).
func (c *copier) lastUnit(u *unit) bool {
	c.mu.Lock()
	u.f.units--
	last := u.f.units == 0 && !u.f.ended
	if u.n >= 0 {
		u.f.chunks.Add(u.off, u.off+u.n)
	}
	c.mu.Unlock()
	if u.n >= 0 && !last {
		c.partial(u.f, false)
	}
	return last
}

// renameOnly reports a unit whose file, once it landed, needs nothing but
// its rename from its temporary name: the worker that moved it renames it
// (worker).
func (c *copier) renameOnly(u *unit) bool {
	return u.n < 0 && u.f.tmp != "" && !c.checksSource(u.f)
}

// serverRenames reports whether the destination of p is to write u under
// its file's temporary name and rename it itself once it landed (SITE
// PARTSTOR, which the server names in FEAT): a file that needs nothing
// but its rename (renameOnly: no checksum to compare first, no mtime to
// set), sent whole from its start, through the default stack, on a pair
// not striped, to a destination that is not a multicast tree. The rename
// then costs no command at all.
func (c *copier) serverRenames(u *unit, p *client.Pair) bool {
	if u.b != nil || !c.renameOnly(u) || !u.part.Have.Empty() || c.opts.fan != nil || p.Striping != nil {
		return false
	}
	if _, dst := c.stacksFor(u); dst != "" {
		return false
	}
	_, ok := p.Dst.Feature("PARTSTOR")
	return ok
}

// renamesIn counts the units of us whose renames' replies are owed.
func renamesIn(us []*unit) int {
	n := 0
	for _, u := range us {
		if u.renaming {
			n++
		}
	}
	return n
}

// renamed ends a file whose rename from its temporary name a worker sent,
// by the destination's reply: nil, done; a refusal goes through finalize's
// retries, which look first whether it was done (whereIs).
func (c *copier) renamed(ctx context.Context, u *unit, err error) {
	switch {
	case err == nil:
		c.final(u.f, Transferred, nil)
	case isNotFound(err):
		// An earlier try's lost reply? finalize looks.
		c.finish(ctx, func(p *client.Pair) error { return c.finalize(ctx, p, u) })
	default:
		c.retryFinish(ctx, u, renameError(err), func(p *client.Pair) error { return c.finalize(ctx, p, u) })
	}
}

// needsFinishing reports whether a file needs more than its data: its
// rename, or finalize's checks.
func (c *copier) needsFinishing(f *file) bool {
	return f.tmp != "" || c.checksSource(f)
}

// checksSource reports whether a file's source is looked up again once its
// data landed.
func (c *copier) checksSource(f *file) bool {
	return c.opts.Verify || c.opts.PreserveMtime || f.size >= sourceCheckSize || nonASCII(f.dst)
}

// nonASCII reports a path with bytes above 0x7f: some servers (GCT 13)
// silently drop those bytes, so such a file is looked up afterwards.
func nonASCII(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] >= 0x80 {
			return true
		}
	}
	return false
}

// errNameChanged reports a destination that stored a file under another
// name than the one asked for.
var errNameChanged = errors.New("the destination server does not keep this name")

// sourceCheckSize is the size from which a finished file's source is looked
// at again to detect a change during the transfer; smaller files would pay
// a round trip each, and checksums (Verify) catch their changes anyway.
const sourceCheckSize = 1 << 20

// job is a finisher's work; it returns the error that, unless it is a
// server's reply, means the pair is broken.
type job func(*client.Pair) error

// finish hands work to a finisher; it waits when all are busy.
func (c *copier) finish(ctx context.Context, j job) {
	select {
	case c.fin <- j:
	case <-ctx.Done():
	case <-c.q.closed(): // every file is final: nothing is left to finish
	}
}

// finisher runs checksums and final touches over its own session pair, so
// that they overlap with data moving on the workers' pairs. While work for
// finishers is expected it dials at once, alongside the workers; otherwise
// when the first job comes.
func (c *copier) finisher(ctx context.Context) {
	var pair *client.Pair
	defer func() {
		if pair != nil {
			pair.Close()
		}
	}()
	if c.ahead.Add(-1) >= 0 {
		pair, _ = c.dialPair(ctx) // on failure, the first job dials again
	}
	for {
		select {
		case job := <-c.fin:
			if pair == nil {
				p, err := c.dialPair(ctx)
				if err != nil {
					c.mu.Lock()
					c.dialErr = err
					c.mu.Unlock()
					job(nil)
					continue
				}
				pair = p
			}
			var reply *gridftp.Error
			if err := job(pair); err != nil && !errors.As(err, &reply) {
				pair.Close() // a broken session: dial afresh next time
				pair = nil
			}
		case <-ctx.Done():
			return
		case <-c.q.closed():
			return
		}
	}
}

// sessionless is the error of a finisher's job that got no session: why
// the finisher's last dial failed (the fault is the endpoint's, as the
// workers' dials say).
func (c *copier) sessionless() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dialErr != nil {
		return c.dialErr
	}
	return errors.New("no session to finish the file")
}

// verifyChunk compares a chunk's checksum at both ends. A mismatch sends
// the chunk again; a failure to compute the checksums retries only them.
func (c *copier) verifyChunk(ctx context.Context, p *client.Pair, u *unit) error {
	if p == nil {
		err := c.sessionless()
		c.retryFinish(ctx, u, err, func(p *client.Pair) error { return c.verifyChunk(ctx, p, u) })
		return err
	}
	a, b, err := checksums(ctx, p.Src, p.Dst, c.set.Algorithm, u.f.src, u.f.at(), u.off, u.n)
	switch {
	case err != nil:
		c.retryFinish(ctx, u, err, func(p *client.Pair) error { return c.verifyChunk(ctx, p, u) })
		return err
	case a != b:
		c.fail(u, fmt.Errorf("%w: %s %s at source, %s at destination", errMismatch, c.set.Algorithm, a, b))
		return nil
	}
	return c.unitDone(ctx, u, p)
}

// retryFinish counts a fault in a finisher's work (not in the data) and
// runs j again after a backoff, or gives up on the file.
func (c *copier) retryFinish(ctx context.Context, u *unit, err error, j job) {
	if c.moot(u) {
		return
	}
	if fault.IsFatal(err) {
		c.filled(err)
		return
	}
	delay, give := c.retryDelay(u, err)
	if give {
		c.final(u.f, Failed, err)
		return
	}
	c.rep.Fault(u.name(), err, delay)
	c.after(delay, func() { c.finish(ctx, j) })
}

// errMismatch is data that arrived damaged: its checksums at both ends
// differ. It says another try may mend it (internal/fault), as a
// destination server's INCORRECT_CHECKSUM does.
var errMismatch error = damaged{}

// damaged is the type of errMismatch.
type damaged struct{}

func (damaged) Error() string { return "checksum mismatch" }
func (damaged) Retry() bool   { return true }

var errSourceChanged = errors.New("source changed during the transfer")

// finalize checks that the source did not change, verifies the whole file
// (unless its chunks were verified) and sets its mtime. A changed source or
// a mismatch sends the whole file again; other failures retry finalize.
func (c *copier) finalize(ctx context.Context, p *client.Pair, u *unit) error {
	err := c.finishFile(ctx, p, u)
	switch {
	case err == nil:
	case errors.Is(err, errMismatch) || errors.Is(err, errSourceChanged):
		c.failFile(&unit{f: u.f, n: -1, attempts: u.attempts, wait: u.wait, seen: u.seen}, err)
	case errors.Is(err, errNameChanged):
		c.final(u.f, Failed, err)
	default:
		c.retryFinish(ctx, u, err, func(p *client.Pair) error { return c.finalize(ctx, p, u) })
	}
	return err
}

// finishFile ends a file whose data all landed: it checks that the source
// did not change, verifies the whole file (unless its chunks were
// verified), cuts what an old file had beyond the source's size, sets the
// mtime and renames the file from its temporary name to its final one.
func (c *copier) finishFile(ctx context.Context, p *client.Pair, u *unit) error {
	f := u.f
	if p == nil {
		return c.sessionless()
	}
	at, err := c.whereIs(ctx, p, f)
	if err != nil {
		return err
	}
	// The destination is looked up with the source when, after chunks,
	// its length needs a check.
	dp := ""
	if u.n >= 0 && !c.opts.blind() {
		dp = at
	}
	var de gridftp.Entry
	var derr error
	if c.checksSource(f) || dp != "" {
		var e gridftp.Entry
		var err error
		e, de, err, derr = stat(ctx, p.Src, p.Dst, f.src, dp)
		if err != nil {
			return &client.EndError{Err: err}
		}
		if e.Size != f.size || !e.Modify.Equal(f.mtime) {
			c.mu.Lock()
			f.size, f.mtime = e.Size, e.Modify
			c.mu.Unlock()
			return fmt.Errorf("%w: now %d bytes, modified %s", errSourceChanged, e.Size, e.Modify.Format(time.RFC3339))
		}
	}
	var sum string
	// Behind a relay, the relay's forwarding layer compares its child's
	// copy with what it received, or fails the transfer.
	if c.opts.Verify && u.n < 0 && !c.opts.blind() {
		a, b, err := checksums(ctx, p.Src, p.Dst, c.set.Algorithm, f.src, at, 0, -1)
		if err != nil {
			return err
		}
		if a != b {
			return fmt.Errorf("%w: %s %s at source, %s at destination", errMismatch, c.set.Algorithm, a, b)
		}
		sum = c.set.Algorithm + ":" + a
	}
	if u.n >= 0 {
		// Chunks never shorten the file; a longer old destination is cut.
		if derr == nil && de.Size > f.size {
			if _, err := p.Dst.Do(ctx, "SITE TRNC %d %s", f.size, at); err != nil {
				return err
			}
		}
		if c.opts.Verify {
			sum = c.set.Algorithm + ":chunks"
		}
	}
	if c.opts.PreserveMtime && !f.mtime.IsZero() {
		if _, err := p.Dst.Do(ctx, "MFMT %s %s", f.mtime.UTC().Format(gridftp.TimeLayout), at); err != nil {
			return fmt.Errorf("preserve mtime: %w", err)
		}
	}
	if at != f.dst {
		c.renameSent(f)
		if err := p.Dst.Rename(ctx, f.tmp, f.dst); err != nil {
			return renameError(err)
		}
	}
	if nonASCII(f.dst) && !c.opts.blind() {
		if err := c.checkName(ctx, p.Dst, f.dst); err != nil {
			return err
		}
	}
	f.sum = sum
	c.final(f, Transferred, nil)
	return nil
}

// renameSent notes that the rename of f was sent: its reply may be lost.
func (c *copier) renameSent(f *file) {
	c.mu.Lock()
	f.renameSent = true
	c.mu.Unlock()
}

// whereIs is where f's data is at the destination as finishFile begins:
// where it was written (file.at), or, when a rename sent before may have
// been done without its reply (the session broke), its final name if that
// is so: the temporary name is gone and the file under its final name is
// the source's, by size and, when both ends compute one, checksum.
func (c *copier) whereIs(ctx context.Context, p *client.Pair, f *file) (string, error) {
	c.mu.Lock()
	sent := f.renameSent
	c.mu.Unlock()
	if !sent {
		return f.at(), nil
	}
	_, err := p.Dst.Stat(ctx, f.tmp)
	if !isNotFound(err) {
		return f.tmp, err
	}
	de, err := p.Dst.Stat(ctx, f.dst)
	if err != nil || de.Size != f.size {
		return f.tmp, err // its rename fails: the file goes again
	}
	if c.sumAlg != "" {
		a, b, err := checksums(ctx, p.Src, p.Dst, c.sumAlg, f.src, f.dst, 0, -1)
		if err != nil || a != b {
			return f.tmp, err
		}
	}
	return f.dst, nil
}

// renameError says that the destination refused to rename a file from
// its temporary name; a broken session is said as the workers' are (the
// faults of an outage are one cause).
func renameError(err error) error {
	var refused *gridftp.Error
	if errors.As(err, &refused) {
		return fmt.Errorf("rename from its temporary name: %w", err)
	}
	return &client.EndError{Dest: true, Err: err}
}

// checkName looks the file dst up at the destination, whose server may
// have stored it under another name (errNameChanged).
func (c *copier) checkName(ctx context.Context, conn *client.Conn, dst string) error {
	de, err := conn.Stat(ctx, dst)
	var refused *gridftp.Error
	if errors.As(err, &refused) {
		return fmt.Errorf("%w (it cannot find the file by it): %v", errNameChanged, err)
	}
	if err != nil {
		return err
	}
	if path.Clean(de.Name) != path.Clean(dst) {
		return fmt.Errorf("%w (it stored %q)", errNameChanged, de.Name)
	}
	return nil
}

// failFile restarts a whole file from scratch (or gives up on it).
func (c *copier) failFile(u *unit, err error) {
	c.mu.Lock()
	u.f.units = 1
	u.f.have = gridftp.Ranges{}
	back := u.f.moved
	c.mu.Unlock()
	c.progress(u.f, -back) // all of it goes again
	c.fail(u, err)
}

// fail counts a fault and retries the unit after a backoff, or gives up on
// its file when the error is fatal or tries or time are used up. A whole
// file's data may have landed before the failure: a finisher looks at it
// before it is sent again (recheck).
func (c *copier) fail(u *unit, err error) {
	if u.b != nil {
		c.batchFailed(u, err)
		return
	}
	if c.moot(u) {
		return
	}
	if fault.IsFatal(err) {
		c.filled(err)
		return
	}
	delay, give := c.retryDelay(u, err)
	if give {
		c.takeBack(u, err)
		c.final(u.f, Failed, err)
		return
	}
	c.rep.Fault(u.name(), err, delay)
	// A tree's file goes again: its children's copies were not checked.
	if u.n < 0 && u.f.tmp != "" && u.f.size > 0 && c.sumAlg != "" && c.opts.fan == nil && !errors.Is(err, errMismatch) && !errors.Is(err, errSourceChanged) {
		c.after(delay, func() { c.finish(c.ctx, func(p *client.Pair) error { return c.recheck(c.ctx, p, u, err, false) }) })
		return
	}
	c.takeBack(u, err)
	c.after(delay, func() { c.q.push(u) })
}

// takeBack takes back from the progress what the failed attempt of u
// reported moved, but for the ranges its markers said arrived: it goes
// again. What stays counted is those ranges, also when its byte count
// (perf markers) was behind them; they become u's part's, as they will be
// the next attempt's, so that reportRest counts the rest, even when the
// next attempt fails before it starts and a look then finds the file whole
// (recheck).
func (c *copier) takeBack(u *unit, err error) {
	c.mu.Lock()
	back := u.reported
	if u.n < 0 {
		back -= u.f.have.Total() - u.part.Have.Total()
	}
	u.reported = 0
	if errors.Is(err, errMismatch) && u.n < 0 {
		back = u.f.moved
		u.f.have = gridftp.Ranges{}
	}
	if u.n < 0 {
		u.part.Have = gridftp.Ranges{}
		u.part.Have.AddAll(u.f.have)
	}
	c.mu.Unlock()
	if back != 0 {
		c.progress(u.f, -back)
	}
}

// recheck looks, on a finisher's pair p, at what the failed attempt of the
// whole file u left under its temporary name (or under its final name,
// when the rename may have been done: whereIs) before the file is sent
// again: all of it, equal to its source by checksum, is only finished (a
// destination that died after the data landed, before it said so), never
// truncated and sent again. A broken session looks once more, on a new one
// (again); without a session to look on, the look is the file's next try
// (fail): what the look cannot see is not sent again.
func (c *copier) recheck(ctx context.Context, p *client.Pair, u *unit, cause error, again bool) error {
	if c.moot(u) {
		return nil
	}
	var err error
	whole := false
	if p != nil {
		var at string
		var de gridftp.Entry
		if at, err = c.whereIs(ctx, p, u.f); err == nil {
			de, err = p.Dst.Stat(ctx, at)
		}
		if err == nil && de.Size == u.f.size {
			var a, b string
			a, b, err = checksums(ctx, p.Src, p.Dst, c.sumAlg, u.f.src, at, 0, -1)
			whole = err == nil && a == b
		}
	}
	if whole {
		c.reportRest(u)
		c.unitDone(ctx, u, p)
		return nil
	}
	if p == nil {
		err = c.sessionless()
	}
	var refused *gridftp.Error
	switch {
	case err == nil || errors.As(err, &refused):
		// Not all of it, not the source's, or the destination
		// refused the look: it goes again.
		c.takeBack(u, cause)
		c.q.push(u)
	case p != nil && !again:
		// The finisher's session broke (as the destination's did): it
		// dials afresh, and looks again.
		go c.finish(ctx, func(p *client.Pair) error { return c.recheck(ctx, p, u, cause, true) })
	default:
		// No session to look on: the look is the next try.
		c.fail(u, err)
	}
	return err
}

// retryDelay counts a fault of u and says how long to wait before the next
// try, or that there is none.
func (c *copier) retryDelay(u *unit, err error) (delay time.Duration, giveUp bool) {
	u.attempts++
	c.mu.Lock()
	c.res.Faults++
	u.f.attempts = max(u.f.attempts, u.attempts)
	c.mu.Unlock()
	delay = c.backoff(&u.wait, &u.seen, err)
	late := !c.opts.Deadline.IsZero() && time.Now().Add(delay).After(c.opts.Deadline)
	return delay, fault.Final(err) || u.attempts >= c.opts.maxAttempts() || late
}

// backoff counts a failure err of work whose backoff is b, and says how
// long to wait before its retry. seen is the count of recoveries the work
// knew of: when the endpoints answered again since its last failure, its
// waits start again from the first.
func (c *copier) backoff(b *fault.Backoff, seen *int64, err error) time.Duration {
	b.Base, b.Max = c.opts.Backoff, c.opts.MaxBackoff
	if r := c.recoveries.Load(); r != *seen {
		b.Reset()
		*seen = r
	}
	if fault.Unanswered(err) {
		c.downSince.CompareAndSwap(0, time.Now().UnixNano())
	}
	return b.Next()
}

// answered notes that both endpoints answered a session pair set up
// from start on. After a failure of an endpoint that did not answer,
// before start, that is a recovery: every retry's backoff starts again,
// and the retries waiting run now. (A pair set up, or a transfer that
// ended well, while an endpoint was going away proves nothing.)
func (c *copier) answered(start time.Time) {
	down := c.downSince.Load()
	if down == 0 || start.UnixNano() <= down || !c.downSince.CompareAndSwap(down, 0) {
		return
	}
	c.recoveries.Add(1)
	c.mu.Lock()
	waiting := c.waiting
	c.waiting = nil
	c.mu.Unlock()
	for _, f := range waiting {
		go f()
	}
}

// after runs f after delay, or sooner when the endpoints answer again
// (answered).
func (c *copier) after(delay time.Duration, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting == nil {
		c.waiting = map[*time.Timer]func(){}
	}
	var t *time.Timer
	t = time.AfterFunc(delay, func() {
		c.mu.Lock()
		_, ok := c.waiting[t]
		delete(c.waiting, t)
		c.mu.Unlock()
		if ok {
			f()
		}
	})
	c.waiting[t] = f
}

// requeue puts back units that a pair failure interrupted; that is not
// their fault. A unit whose rename was sent, its reply lost with the
// pair, goes to a finisher: finalize looks whether it was done (whereIs).
func (c *copier) requeue(us []*unit) {
	for _, u := range us {
		if u.renaming {
			u.renaming = false
			c.finish(c.ctx, func(p *client.Pair) error { return c.finalize(c.ctx, p, u) })
			continue
		}
		c.q.push(u)
	}
}

// abandoned reports a unit whose file already failed or was canceled.
func (c *copier) abandoned(u *unit) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if u.b != nil {
		for _, f := range u.b.files {
			if !f.ended {
				return false
			}
		}
		return true
	}
	return u.f.ended
}

// moot reports a failure not worth a retry or a fault: its file is
// final (failed, canceled), or the whole run is stopping.
func (c *copier) moot(u *unit) bool {
	select {
	case <-c.done:
		return true
	default:
	}
	return c.abandoned(u)
}

// final records a file's outcome once. A canceled file's bytes so far are
// taken back: they are not part of the copy, nor are those of a file
// skipped for a source error (Options.SkipSourceErrors).
func (c *copier) final(f *file, o Outcome, err error) {
	if o == Failed && c.opts.SkipSourceErrors && SourceError(err) {
		o = SkippedError
	}
	c.mu.Lock()
	if f.ended {
		c.mu.Unlock()
		return
	}
	f.ended, f.outcome = true, o
	r := FileResult{Src: f.src, Dst: f.dst, Size: f.size, Outcome: o, Checksum: f.sum, Attempts: max(f.attempts, 1), Err: err, Moved: f.moved, Unreported: f.unreported}
	var back int64
	switch o {
	case Failed:
		c.res.Failed++
		c.res.FailedFiles = append(c.res.FailedFiles, r)
	case SkippedError:
		c.res.SkippedErrors++
		back, f.moved = f.moved, 0
	case Canceled:
		c.res.Canceled++
		back, f.moved = f.moved, 0
	default:
		c.res.Transferred++
	}
	delete(c.live, f)
	c.keep(f)
	c.pending--
	if c.pending == 0 && !c.planning {
		c.q.close()
	}
	c.mu.Unlock()
	select {
	case c.freed <- struct{}{}:
	default:
	}
	if back != 0 {
		c.moved(f, -back)
	}
	c.rep.Done(r)
	if c.ways != nil {
		c.chosen(f, o == Transferred)
	}
}

type nopReporter struct{}

func (nopReporter) Planned(int, int64)                 {}
func (nopReporter) Progress(int64)                     {}
func (nopReporter) Fault(string, error, time.Duration) {}
func (nopReporter) Done(FileResult)                    {}

// optimize adds and removes session pairs by observed throughput while
// units remain (see decide). start launches one more pair.
func (c *copier) optimize(ctx context.Context, start func()) {
	t := time.NewTicker(tuneInterval(c.set.RTT))
	defer t.Stop()
	floor, ceiling := c.set.Concurrency, maxConcurrency(c.set)
	pairs := c.set.Concurrency
	var prevBytes int64
	var prevRate float64
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.q.closed():
			return
		case now := <-t.C:
			c.mu.Lock()
			bytes := c.res.Bytes
			c.mu.Unlock()
			rate := float64(bytes-prevBytes) / now.Sub(last).Seconds()
			prevBytes, last = bytes, now
			was := pairs
			switch decide(prevRate, rate, pairs, floor, ceiling) {
			case 1:
				if c.q.len() > 0 {
					pairs++
					start()
				}
			case -1:
				select {
				case c.retire <- struct{}{}:
					pairs--
				default:
				}
			}
			if tu, ok := c.rep.(Tuner); ok && pairs != was {
				tu.Tuned(was, pairs, prevRate, rate)
			}
			prevRate = rate
			c.mu.Lock()
			c.res.Settings.Concurrency = max(c.res.Settings.Concurrency, pairs)
			c.mu.Unlock()
		}
	}
}
