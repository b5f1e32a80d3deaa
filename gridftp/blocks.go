package gridftp

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrDataStream reports a MODE E data stream that failed: cut, reset, or
// silent for longer than allowed.
var ErrDataStream = errors.New("gridftp: data stream failed")

// ErrTooManyStreams reports a sender that opened more streams than the
// receiver takes (Receiver.MaxStreams).
var ErrTooManyStreams = errors.New("gridftp: too many data streams")

// BufferPool hands out block buffers with room for a MODE E header in
// front, so that header and payload go out in one write and no block
// allocates. Send and Receiver hold a buffer only while a block moves
// through it, so that a pool made with Limit bounds the memory of a
// transfer whatever its streams.
type BufferPool struct {
	block int
	pool  *sync.Pool
	slots chan struct{} // one per buffer out, for a Limit pool; nil: no limit
}

// NewBufferPool makes a pool of buffers for blocks of size bytes.
func NewBufferPool(size int) *BufferPool { return &BufferPool{block: size, pool: &sync.Pool{}} }

// Limit returns a pool that takes its buffers from p but has at most n
// out at once: Get waits until one is put back.
func (p *BufferPool) Limit(n int) *BufferPool {
	return &BufferPool{block: p.block, pool: p.pool, slots: make(chan struct{}, max(n, 1))}
}

// BlockSize is the payload size of the pool's buffers.
func (p *BufferPool) BlockSize() int { return p.block }

// Get returns a buffer of HeaderLen+BlockSize bytes.
func (p *BufferPool) Get() *[]byte {
	if p.slots != nil {
		p.slots <- struct{}{}
	}
	if b, ok := p.pool.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, HeaderLen+p.block)
	return &b
}

// Put gives a buffer back.
func (p *BufferPool) Put(b *[]byte) {
	p.pool.Put(b)
	if p.slots != nil {
		<-p.slots
	}
}

// Stream is one MODE E data connection; its reader keeps read-ahead bytes
// between transfers when the stream is cached.
type Stream struct {
	Conn net.Conn
	R    *bufio.Reader
}

// streamReadAhead is the read buffer of one stream.
const streamReadAhead = 64 << 10

// NewStream wraps a data connection.
func NewStream(c net.Conn) *Stream {
	return &Stream{Conn: c, R: bufio.NewReaderSize(c, streamReadAhead)}
}

// Accept takes data connections from ln into ch until ln is closed, then
// closes ch. A connection that finds ch full waits for room; once stop is
// closed it is closed instead (a nil stop never is). admit, when set, is
// asked about each connection first, in a goroutine of its own (it may
// take a handshake): it returns the connection to hand on, or an error,
// and then the connection is closed and dropped.
func Accept(ln net.Listener, ch chan<- net.Conn, stop <-chan struct{}, admit func(net.Conn) (net.Conn, error)) {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		close(ch)
	}()
	admitting := make(chan struct{}, MaxStreams)
	hand := func(c net.Conn) bool {
		select {
		case ch <- c:
			return true
		case <-stop:
			c.Close()
			return false
		}
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if admit == nil {
			if !hand(c) {
				return
			}
			continue
		}
		select {
		case admitting <- struct{}{}: // at most MaxStreams at once
		case <-stop:
			c.Close()
			return
		}
		wg.Go(func() {
			defer func() { <-admitting }()
			if c, err := admit(c); err == nil {
				hand(c)
			} else if c != nil {
				c.Close()
			}
		})
	}
}

// Plan hands out the blocks of a set of byte ranges to sending streams.
type Plan struct {
	mu    sync.Mutex
	segs  []Range
	block int64
}

// NewPlan splits segs into blocks of at most block bytes.
func NewPlan(segs []Range, block int) *Plan {
	return &Plan{segs: slices.Clone(segs), block: int64(block)}
}

// Next returns the next block to send.
func (p *Plan) Next() (off, n int64, ok bool) { return p.NextUpTo(p.block) }

// NextUpTo returns the next block to send, of at most limit bytes (and at
// most the plan's block size).
func (p *Plan) NextUpTo(limit int64) (off, n int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.segs) > 0 && p.segs[0].Len() <= 0 {
		p.segs = p.segs[1:]
	}
	if len(p.segs) == 0 {
		return 0, 0, false
	}
	s := &p.segs[0]
	off, n = s.Start, min(p.block, limit, s.Len())
	s.Start += n
	return off, n, true
}

// Send sends the blocks of plan from src over streams, one worker per
// stream, block offsets relative to base. Every stream ends with EOD and
// the last one also carries EOF with the EOD count. sent counts payload
// bytes as they go out.
func Send(ctx context.Context, streams []*Stream, plan *Plan, src io.ReaderAt, base int64, pool *BufferPool, sent *atomic.Int64) error {
	_, err := sendPlan(ctx, streams, plan, src, base, pool, sent, ending{eof: len(streams)})
	return err
}

// SendGrowing is Send that may add streams while it runs, as g says
// (grow.go). The streams that joined are in the result, also after an
// error: the caller keeps or closes them with the others.
func SendGrowing(ctx context.Context, streams []*Stream, plan *Plan, src io.ReaderAt, base int64, pool *BufferPool, sent *atomic.Int64, g *Growth) (GrowthResult, error) {
	return sendPlan(ctx, streams, plan, src, base, pool, sent, ending{eof: len(streams), grow: g})
}

// SendStripe is Send for one sender of a striped transfer to one
// receiving stripe: the last stream's EOF announces eof EODs (every
// sender's connections into the stripe), or the streams end with EOD
// only when eof is 0 (another sender announces it; PlanStripes). The
// streams stay open for the next transfer, as with Send.
func SendStripe(ctx context.Context, streams []*Stream, plan *Plan, src io.ReaderAt, base int64, pool *BufferPool, sent *atomic.Int64, eof int) error {
	_, err := sendPlan(ctx, streams, plan, src, base, pool, sent, ending{eof: eof})
	return err
}

// OrderedReaderAt is a source whose blocks must be read in the plan's
// order even when several streams send them: one that hashes what it
// reads (a live checksum). Its reads are serialised; the streams' writes
// to the network still overlap.
type OrderedReaderAt interface {
	io.ReaderAt
	ReadsInOrder()
}

// A FileSummer is an OrderedReaderAt over a file that can take a range in
// (hash it) without handing its bytes on: a sender hashes each block
// through a small buffer and sends it from the file by sendfile, which
// saves the copy of every byte into the socket (sendSummedBlock).
type FileSummer interface {
	OrderedReaderAt
	// SumFile is the file the ranges are read from.
	SumFile() *os.File
	// Take hashes [off, off+n) of the file, reading it through p; off
	// follows the range taken before.
	Take(p []byte, off, n int64) error
}

// sendPlan sends the blocks of plan from src, ending the streams as end
// says. A file's blocks go out by sendfile on a bare TCP stream
// (sendFileBlock), hashed on the way when src is a FileSummer
// (sendSummedBlock).
func sendPlan(ctx context.Context, streams []*Stream, plan *Plan, src io.ReaderAt, base int64, pool *BufferPool, sent *atomic.Int64, end ending) (GrowthResult, error) {
	var inOrder sync.Mutex
	_, ordered := src.(OrderedReaderAt)
	summer, summed := src.(FileSummer)
	next := func(payload []byte) (int64, int, error) {
		if ordered {
			inOrder.Lock()
			defer inOrder.Unlock()
		}
		off, n, ok := plan.NextUpTo(int64(len(payload)))
		if !ok {
			return 0, 0, io.EOF
		}
		if m, err := src.ReadAt(payload[:n], off); err != nil && !(err == io.EOF && m == int(n)) {
			if err == io.EOF {
				err = fmt.Errorf("source shorter than announced: %w", io.ErrUnexpectedEOF)
			}
			return 0, 0, err
		}
		return off - base, int(n), nil
	}
	f, isFile := src.(*os.File)
	return send(ctx, streams, end, func(c net.Conn, limit int) (int, error) {
		if tc, ok := plainTCP(c); ok && isFile {
			return sendFileBlock(tc, f, plan, base, pool, limit)
		}
		if tc, ok := plainTCP(c); ok && summed {
			return sendSummedBlock(tc, summer, &inOrder, plan, base, pool, limit)
		}
		return sendBlock(c, pool, limit, next)
	}, sent)
}

// SendStream sends src, read from start to end, over streams: each worker
// takes the next block-sized piece in turn, so the blocks' offsets follow
// the order of src. For a source that cannot seek or tell its size (a
// program's output).
func SendStream(ctx context.Context, streams []*Stream, src io.Reader, pool *BufferPool, sent *atomic.Int64) error {
	var (
		mu   sync.Mutex
		pos  int64
		done bool
	)
	_, err := send(ctx, streams, ending{eof: len(streams)}, buffered(pool, func(payload []byte) (int64, int, error) {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return 0, 0, io.EOF
		}
		n, err := io.ReadFull(src, payload)
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			done = true
			if n == 0 {
				return 0, 0, io.EOF
			}
		case err != nil:
			return 0, 0, err
		}
		off := pos
		pos += int64(n)
		return off, n, nil
	}), sent)
	return err
}

// SendFunc sends the blocks next hands out over streams, one worker per
// stream, and ends them as Send does. next fills payload (up to a block of
// pool) with the next block and says at what offset it goes; io.EOF when
// there are no more. Workers call next concurrently. For a sender whose
// blocks arrive from elsewhere (a forwarding layer): each goes whole, its
// payload a block of pool whatever the stream's window.
func SendFunc(ctx context.Context, streams []*Stream, next func(payload []byte) (off int64, n int, err error), pool *BufferPool, sent *atomic.Int64) error {
	_, err := send(ctx, streams, ending{eof: len(streams)}, whole(pool, next), sent)
	return err
}

// buffered is a block sender that sends the blocks next fills into
// buffers of pool, each of at most the limit the stream's window sets:
// for a source read from start to end, which a block of any size takes
// the next piece of.
func buffered(pool *BufferPool, next func([]byte) (int64, int, error)) func(net.Conn, int) (int, error) {
	return func(c net.Conn, limit int) (int, error) { return sendBlock(c, pool, limit, next) }
}

// whole is buffered for blocks made elsewhere, which cannot be cut: next
// always gets a whole block of pool to fill.
func whole(pool *BufferPool, next func([]byte) (int64, int, error)) func(net.Conn, int) (int, error) {
	return func(c net.Conn, _ int) (int, error) { return sendBlock(c, pool, math.MaxInt, next) }
}

// sendBacklog is how much a sending stream's socket holds beyond what is
// in flight, to another host: a block goes to the stream that can send
// it. Without a bound a socket takes as much as its buffer (autotuned to
// many windows), so when the data runs out the slowest streams still hold
// megabytes that only they can send: over a lossy path, where each
// stream's window stays small, that tail was a third of the transfer
// (512 MiB, 16 streams, 150 ms, 0.1 %, cubic: 58.8 and 59.7 s unbounded,
// 43.6 and 51.9 s at 256 KiB, 46.7 and 54.8 s at 1 MiB; bench/LOG.md,
// issue 17).
const sendBacklog = 256 << 10

// ending is how the streams of one send end: the last to finish carries
// the EOF announcing eof EODs unless eof is 0. With grow, streams may
// join while the send runs; eof then counts them too.
type ending struct {
	eof  int
	grow *Growth
}

// minBlock is the least a block to another host carries (blockLimit).
const minBlock = 64 << 10

// blockLimit is how much a stream's next block may carry: to another
// host about one congestion window, at least minBlock, and never more than
// a block of the sender's (the caller's cap). A block is delivered in
// order on its stream, and a stream whose window is small (one loss held
// down on a long path, or that left slow start early) takes rounds to
// deliver a whole block; sized to the window, such a stream takes what it
// sends in about a round trip, and the streams with large windows carry
// the rest (2,000 × 50 KB as tar batches, 150 ms, 0.01 %, cubic: a pair
// whose streams sat at windows of 30–80 segments took 5–8 s where the
// others took 2–3; bench/LOG.md, issue 17). win is the window in
// bytes, 0 when not known (to this host, where the blocks stay whole).
func blockLimit(win int) int {
	if win > 0 {
		return (win + minBlock - 1) / minBlock * minBlock
	}
	return math.MaxInt
}

// send runs one worker per stream. block sends the next block over a
// stream, of at most limit payload bytes (blockLimit), and returns its
// payload size; io.EOF when there are no more.
// Each stream ends as end says. What growth did is returned with the
// error, the streams that joined among it.
func send(ctx context.Context, streams []*Stream, end ending, block func(c net.Conn, limit int) (int, error), sent *atomic.Int64) (GrowthResult, error) {
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		left     atomic.Int32
		moved    atomic.Int64
		// mu guards the streams (all), the EOF's count, and over: once
		// a worker found no more blocks (or the send failed), no stream
		// joins.
		mu   sync.Mutex
		all  = slices.Clone(streams)
		eof  = end.eof
		over bool
		res  GrowthResult
	)
	left.Store(int32(len(streams)))
	fail := func(err error) {
		errOnce.Do(func() {
			firstErr = err
			mu.Lock()
			defer mu.Unlock()
			over = true
			for _, s := range all {
				s.Conn.SetWriteDeadline(time.Unix(1, 0))
			}
		})
	}
	stop := context.AfterFunc(ctx, func() { fail(ctx.Err()) })
	defer stop()
	worker := func(c net.Conn) {
		defer wg.Done()
		var gauge *windowGauge
		if tc, ok := TCPConn(c); ok && !sameHost(tc) {
			holdBack(c, sendBacklog)
			gauge = newWindowGauge(tc)
		}
		for {
			n, err := block(c, blockLimit(gauge.window()))
			if err == io.EOF {
				break
			}
			if err != nil {
				fail(err)
				return
			}
			moved.Add(int64(n))
			if sent != nil {
				sent.Add(int64(n))
			}
		}
		mu.Lock()
		over = true
		count := eof
		mu.Unlock()
		h := Header{Desc: DescEOD}
		if left.Add(-1) == 0 && count > 0 {
			h.Desc, h.Offset = h.Desc|DescEOF, uint64(count)
		}
		var hdr [HeaderLen]byte
		h.Put(hdr[:])
		if _, err := c.Write(hdr[:]); err != nil {
			fail(fmt.Errorf("%w: %v", ErrDataStream, err))
		}
	}
	for _, s := range streams {
		wg.Add(1)
		go worker(s.Conn)
	}
	if g := end.grow; g != nil && len(streams) > 0 && len(streams) < g.Max && (g.AnyControl || lossBound(streams[0].Conn)) {
		var growing sync.WaitGroup
		gctx, stopGrowing := context.WithCancel(ctx)
		// add opens k streams and starts them, unless the data ran out
		// first; the dial holds the workers' end back, so that the EOF
		// counts every stream that carried a block or an EOD.
		add := func(k int) int {
			mu.Lock()
			defer mu.Unlock()
			if over {
				return 0
			}
			joined, err := g.Dial(gctx, k)
			if err != nil || over {
				for _, s := range joined {
					s.Conn.Close()
				}
				return 0
			}
			for _, s := range joined {
				all = append(all, s)
				res.Added = append(res.Added, s)
				eof++
				left.Add(1)
				wg.Add(1)
				go worker(s.Conn)
			}
			return len(joined)
		}
		// delivered is what the streams' receiver acknowledged, where the
		// kernel says: what the sends wrote may still sit in send buffers
		// as large as the window.
		delivered := func() int64 {
			mu.Lock()
			conns := make([]net.Conn, len(all))
			for i, s := range all {
				conns[i] = s.Conn
			}
			mu.Unlock()
			var sum int64
			for _, c := range conns {
				n, ok := streamAcked(c)
				if !ok {
					return moved.Load()
				}
				sum += n
			}
			return sum
		}
		growing.Go(func() {
			res.Kept, res.Done = g.run(gctx, streams[0].Conn, len(streams), delivered, add)
		})
		wg.Wait()
		stopGrowing()
		growing.Wait()
	}
	wg.Wait()
	// The context's callback may be failing the send right now: wait for
	// it, or make sure it does nothing from here on, before reading
	// firstErr.
	errOnce.Do(func() {})
	if firstErr != nil {
		return res, firstErr
	}
	for _, s := range all {
		s.Conn.SetWriteDeadline(time.Time{})
	}
	return res, nil
}

// sendBlock fills a buffer of pool with the next block and writes it to c.
func sendBlock(c net.Conn, pool *BufferPool, limit int, next func([]byte) (int64, int, error)) (int, error) {
	bp := pool.Get()
	defer pool.Put(bp)
	buf := *bp
	off, n, err := next(buf[HeaderLen : HeaderLen+min(pool.BlockSize(), limit)])
	if err != nil {
		return 0, err
	}
	Header{Count: uint64(n), Offset: uint64(off)}.Put(buf)
	if _, err := c.Write(buf[:HeaderLen+n]); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrDataStream, err)
	}
	return n, nil
}

// Close ends a stream the way a sender shrinking its set does: a header
// with the will-close bit, then the connection closes.
func (s *Stream) Close() error {
	var hdr [HeaderLen]byte
	Header{Desc: DescWillClose}.Put(hdr[:])
	s.Conn.SetWriteDeadline(time.Now().Add(time.Second))
	s.Conn.Write(hdr[:])
	return s.Conn.Close()
}

// Receiver writes one MODE E transfer to Dst. Block offsets are shifted by
// Base. It records the ranges written, for 111 markers and restarts. A Dst
// that is a file (an *os.File, or a FileAt) takes the payload of bare TCP
// streams by splice, socket to file, unless a Hash needs the bytes.
type Receiver struct {
	Dst     io.WriterAt
	Base    int64
	Pool    *BufferPool
	Timeout time.Duration // no data for this long fails the transfer; 0: 60 s
	// MaxStreams bounds the streams of the transfer, cached and accepted;
	// one more fails it with ErrTooManyStreams. 0: MaxStreams.
	MaxStreams int

	// Hash, when set, is fed the data while it arrives, in file order from
	// Base on; see Sum. Data that continues the hashed prefix is hashed from
	// the buffer just written to Dst (with ReadBack, from Dst). Blocks that
	// arrive ahead of a gap wait on Dst: once the gap is filled, the stream
	// that filled it reads them back (Dst must be an io.ReaderAt) and hashes
	// them, so several streams and blocks out of order keep a live sum.
	Hash hash.Hash
	// ReadBack makes Hash see what Dst holds rather than what was written
	// to it: every byte is read back from Dst after its write, so that a
	// storage layer that alters data is caught. It costs one more copy of
	// the data; see the caller for when that buys anything.
	ReadBack bool
	// OnFailure, when set, hears the transfer's failure once, before Run
	// waits for its streams to stop: a Dst that holds writers back (an
	// ordering layer) must let them go.
	OnFailure func(error)
	// Drain, when set, is how long the streams are read on once Dst has
	// failed, what they carry dropped, until the transfer's EODs are in;
	// Run then returns Dst's error. A sender told of the failure before it
	// has sent everything may wait for ever: globus-url-copy, told between
	// its last data block and its EOF, never sends the EOF, and waits for
	// it (TestModeEFailedStoreDrains).
	Drain time.Duration

	bytes   atomic.Int64
	mu      sync.Mutex
	ranges  Ranges
	pending Ranges
	next    int64 // where the data claimed for hashing ends, relative to Base
	broken  bool  // data was written over what Hash had claimed, or could not be read back
	turn    sync.Cond
	issued  uint64       // hash jobs handed out, under mu
	served  uint64       // hash jobs done, in order, under mu
	stop    atomic.Bool  // the transfer failed: hash no further
	readOut atomic.Int64 // bytes read back for Hash: progress too
	// writing counts the writes to Dst under way: while Dst holds one,
	// a quiet data channel is Dst's doing, not the sender's.
	writing atomic.Int32
	// dropping is set once Dst failed and the streams drain (Drain);
	// dropped hands Run that failure.
	dropping atomic.Bool
	dropped  chan error
}

// Sum returns the hash of the data received, when Hash saw all of it, in
// order and once, and how many bytes it covers.
func (r *Receiver) Sum() (sum []byte, n int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Hash == nil || r.broken || r.served != r.issued || r.next != r.bytes.Load() {
		return nil, 0, false
	}
	return r.Hash.Sum(nil), r.next, true
}

// hashJob is a stretch of written data that one stream hashes: [from, to),
// absolute, the first len(own) bytes of which are in that stream's buffer.
type hashJob struct {
	from, to int64
	own      []byte
	ticket   uint64
}

// wrote records that [start, start+len(p)) of Dst now holds p and, with a
// Hash, returns the hashing this stream owes: data that continues the
// claimed prefix, together with anything written earlier out of order that
// it makes contiguous. ok is false when there is none.
func (r *Receiver) wrote(start int64, p []byte) (job hashJob, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record(start, start+int64(len(p)))
	if r.Hash == nil || r.broken {
		return job, false
	}
	claimed := r.Base + r.next
	switch {
	case start < claimed:
		r.broken = true // written again: the hash may no longer match Dst
		return job, false
	case start > claimed:
		return job, false // ahead of a gap: whoever fills it hashes this
	}
	to := r.ranges.reach(start)
	r.next = to - r.Base
	job = hashJob{from: start, to: to, own: p, ticket: r.issued}
	r.issued++
	return job, true
}

// record notes, under mu, that Dst holds [start, end).
func (r *Receiver) record(start, end int64) {
	r.ranges.Add(start, end)
	r.pending.Add(start, end)
}

// hash does one job once the jobs issued before it are done, reading back
// from Dst into buf what is not taken from the stream's buffer.
func (r *Receiver) hash(job hashJob, buf []byte) {
	r.mu.Lock()
	if r.turn.L == nil {
		r.turn.L = &r.mu
	}
	for r.served != job.ticket {
		r.turn.Wait()
	}
	skip := r.broken
	r.mu.Unlock()
	failed := !skip && !r.feed(job, buf)
	r.mu.Lock()
	if failed {
		r.broken = true
	}
	r.served++
	r.turn.Broadcast()
	r.mu.Unlock()
}

// feed passes [job.from, job.to) to Hash.
func (r *Receiver) feed(job hashJob, buf []byte) bool {
	pos := job.from
	if !r.ReadBack {
		r.Hash.Write(job.own)
		pos += int64(len(job.own))
	}
	if pos == job.to {
		return true
	}
	rd, ok := r.Dst.(io.ReaderAt)
	if !ok {
		return false
	}
	for pos < job.to {
		if r.stop.Load() {
			return false
		}
		n := min(int64(len(buf)), job.to-pos)
		if m, _ := rd.ReadAt(buf[:n], pos); int64(m) != n {
			return false
		}
		r.Hash.Write(buf[:n])
		r.readOut.Add(n)
		pos += n
	}
	return true
}

// reach returns where the range holding pos ends, or pos when none does.
func (s *Ranges) reach(pos int64) int64 {
	i := sort.Search(len(s.rs), func(i int) bool { return s.rs[i].End > pos })
	if i < len(s.rs) && s.rs[i].Start <= pos {
		return s.rs[i].End
	}
	return pos
}

// Bytes is the payload written so far.
func (r *Receiver) Bytes() int64 { return r.bytes.Load() }

// Counter exposes the byte count for markers.
func (r *Receiver) Counter() *atomic.Int64 { return &r.bytes }

// Ranges returns the absolute ranges written so far.
func (r *Receiver) Ranges() Ranges {
	r.mu.Lock()
	defer r.mu.Unlock()
	var c Ranges
	c.AddAll(r.ranges)
	return c
}

// TakePending returns the ranges written since the previous call.
func (r *Receiver) TakePending() Ranges {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pending
	r.pending = Ranges{}
	return p
}

// streamEvent is what a stream reader reports to Run.
type streamEvent struct {
	s        *Stream
	eofCount int  // > 0: an EOF block announced this many EODs
	done     bool // the reader returned; fields below are final
	eod      bool // the stream reached EOD
	closing  bool // the sender closes the stream
	idle     bool // the transfer ended before the stream carried anything
	dropped  bool // a cached stream the sender closed before this transfer used it
	err      error
}

// Run reads one transfer from the cached streams and from connections that
// arrive on accept during it (nil when none can), until as many EODs as the
// EOF block announced have arrived. It returns the streams that stay open
// for the next transfer. On error it returns them too, still open, so that
// the caller can send its error reply before closing them: a peer told
// first reads the reason rather than a reset.
//
// A connection that arrives once the EOF count is known and as many
// streams as it counts are open belongs to the next transfer (a pipelined
// sender that opens new connections per file): it is kept, unread, for
// that one. A second EOF with another count is data of another transfer
// and fails this one rather than mixing the two. A cached stream the
// sender closes before it carries anything of this transfer is dropped.
func (r *Receiver) Run(ctx context.Context, streams []*Stream, accept <-chan net.Conn, onAccept func(net.Conn)) ([]*Stream, error) {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	events := make(chan streamEvent, 8)
	r.dropped = make(chan error, 1)
	var drained <-chan time.Time // the end of the drain after Dst failed
	var finished atomic.Bool
	running := map[*Stream]bool{}
	start := func(s *Stream, cached bool) {
		running[s] = true
		go r.readStream(s, events, &finished, cached)
	}
	streams = slices.Clone(streams)
	for _, s := range streams {
		start(s, true)
	}
	joined := len(streams) // the streams of this transfer, closed ones too
	var next []*Stream     // connections of the next transfer
	eods, want := 0, -1
	var failure error
	progress := time.NewTimer(timeout)
	defer progress.Stop()
	lastBytes := int64(-1)
	// fail records the transfer's failure, the first.
	fail := func(err error) {
		if failure != nil {
			return
		}
		failure = err
		r.stop.Store(true) // no more reading back for a sum nobody will use
		if r.OnFailure != nil {
			r.OnFailure(failure)
		}
	}
	// wake stops the streams: those still running return.
	wake := func() {
		finished.Store(true)
		for s := range running {
			s.Conn.SetReadDeadline(time.Unix(1, 0))
		}
	}
	complete := func() bool { return want >= 0 && eods >= want }
	for len(running) > 0 || (failure == nil && !complete()) {
		if complete() && !finished.Load() {
			wake()
		}
		if failure == nil && len(running) == 0 && accept == nil {
			failure = fmt.Errorf("%w: every stream ended before EOF", ErrDataStream)
			break
		}
		select {
		case err := <-r.dropped:
			fail(err)
			drained = time.After(r.Drain)
		case <-drained:
			wake()
		case c, ok := <-accept:
			if !ok {
				accept = nil
				continue
			}
			if finished.Load() {
				c.Close()
				continue
			}
			if limit := cmp.Or(r.MaxStreams, MaxStreams); len(streams) >= limit {
				c.Close()
				fail(fmt.Errorf("%w: more than %d", ErrTooManyStreams, limit))
				wake()
				continue
			}
			if onAccept != nil {
				onAccept(c)
			}
			s := NewStream(c)
			if want >= 0 && joined >= want {
				next = append(next, s)
				continue
			}
			joined++
			streams = append(streams, s)
			start(s, false)
		case ev := <-events:
			if ev.eofCount > 0 && want >= 0 && ev.eofCount != want && !finished.Load() {
				fail(fmt.Errorf("%w: a second EOF (%d EODs, then %d): data of another transfer", ErrDataStream, want, ev.eofCount))
				wake()
			}
			if ev.eofCount > 0 && want < 0 {
				want = ev.eofCount
			}
			if !ev.done {
				continue
			}
			delete(running, ev.s)
			if ev.dropped {
				joined--
			}
			switch {
			case ev.idle:
			case ev.err != nil && !finished.Load():
				fail(ev.err)
				wake()
			case ev.eod:
				eods++
			}
			if ev.closing && ev.err == nil {
				ev.s.Conn.Close()
				streams = slices.DeleteFunc(streams, func(x *Stream) bool { return x == ev.s })
			}
		case <-ctx.Done():
			if !finished.Load() {
				fail(ctx.Err())
				wake()
			}
		case <-progress.C:
			// Reading back what came ahead of a gap counts as progress:
			// the streams may wait for it. So does a write Dst holds (a
			// listing's reader taking its time).
			if n := r.bytes.Load() + r.readOut.Load(); n == lastBytes && failure == nil && r.writing.Load() == 0 {
				fail(fmt.Errorf("%w: no data for %v", ErrDataStream, timeout))
				wake()
			} else {
				lastBytes = n
			}
			progress.Reset(timeout)
		}
	}
	for _, s := range streams {
		s.Conn.SetReadDeadline(time.Time{})
	}
	return append(streams, next...), failure
}

// readStream reads one stream of one transfer up to its EOD. Before each
// header it peeks, so that a stream the sender leaves unused can be woken
// by a past deadline without losing a byte. A cached stream (one of an
// earlier transfer) that ends before it carries anything is one the
// sender dropped.
func (r *Receiver) readStream(s *Stream, events chan<- streamEvent, finished *atomic.Bool, cached bool) {
	ev := streamEvent{s: s, done: true}
	var z zeroCopy
	defer func() {
		z.close()
		events <- ev
	}()
	carried := false
	for {
		if _, err := s.R.Peek(1); err != nil {
			if finished.Load() && !carried && errors.Is(err, os.ErrDeadlineExceeded) {
				ev.idle = true
				return
			}
			if cached && !carried && errors.Is(err, io.EOF) {
				ev.closing, ev.dropped = true, true
				return
			}
			ev.err = fmt.Errorf("%w: closed before EOD: %v", ErrDataStream, err)
			return
		}
		if finished.Load() && !carried {
			ev.idle = true // the bytes waiting belong to the next transfer
			return
		}
		carried = true
		h, err := ReadHeader(s.R)
		if err != nil {
			if !errors.Is(err, ErrBadHeader) {
				err = fmt.Errorf("%w: cut inside a header: %v", ErrDataStream, err)
			}
			ev.err = err
			return
		}
		if h.Desc&DescEOF != 0 {
			if h.Offset == 0 {
				ev.err = fmt.Errorf("%w: EOF with EOD count 0", ErrBadHeader)
				return
			}
			events <- streamEvent{s: s, eofCount: int(h.Offset)}
		} else if h.Count > 0 {
			bp := r.Pool.Get()
			err := r.readBlock(s, h, *bp, &z)
			r.Pool.Put(bp)
			if err != nil {
				ev.err = err
				return
			}
		}
		ev.eod = h.Desc&DescEOD != 0
		ev.closing = h.Desc&DescWillClose != 0
		if ev.eod || ev.closing {
			return
		}
	}
}

// readBlock copies one block's payload from s to Dst and, with a Hash,
// hashes what that makes contiguous. Where z can, the payload goes from
// the socket into the file by splice instead, with no copy through buf.
func (r *Receiver) readBlock(s *Stream, h Header, buf []byte, z *zeroCopy) error {
	pos, left := r.Base+int64(h.Offset), int64(h.Count)
	defer z.wakeAt(s, 1) // the next header wakes the reader, however short
	for left > 0 {
		if r.dropping.Load() {
			return z.skip(s, buf, left)
		}
		z.wakeAt(s, left)
		n, err := r.splice(s, z, buf, pos, left)
		if err == nil && n == 0 {
			n = min(int64(len(buf)), left)
			if b := s.R.Buffered(); !z.off && b > 0 {
				n = min(n, int64(b)) // the read-ahead first, then splice
			}
			if err := z.readFull(s, buf[:n]); err != nil {
				return fmt.Errorf("%w: cut inside a block: %v", ErrDataStream, err)
			}
			r.writing.Add(1)
			_, err = r.Dst.WriteAt(buf[:n], pos)
			r.writing.Add(-1)
			if err == nil {
				r.bytes.Add(n)
				if job, ok := r.wrote(pos, buf[:n]); ok {
					r.hash(job, buf)
				}
			}
		}
		if err != nil && (errors.Is(err, ErrDataStream) || !r.drop(err)) {
			return err
		}
		pos += n
		left -= n
	}
	return nil
}

// drop starts the drain after Dst failed with err, if Drain asks for one,
// and reports whether it did: the streams then read on, dropping what
// they carry.
func (r *Receiver) drop(err error) bool {
	if r.Drain <= 0 {
		return false
	}
	if r.dropping.CompareAndSwap(false, true) {
		r.dropped <- err
	}
	return true
}

// skip reads and drops the next n bytes of s, through buf.
func (z *zeroCopy) skip(s *Stream, buf []byte, n int64) error {
	for n > 0 {
		k := min(int64(len(buf)), n)
		if err := z.readFull(s, buf[:k]); err != nil {
			return fmt.Errorf("%w: cut inside a block: %v", ErrDataStream, err)
		}
		n -= k
	}
	return nil
}

// FileAt is implemented by a Receiver's Dst that writes to a file
// unchanged, so that payload may go from the socket into the file by
// splice: it returns the file once it has checked, as WriteAt would, that
// n bytes may go at off; nil when there is no file to splice into.
type FileAt interface {
	FileAt(off, n int64) (*os.File, error)
}

// zeroCopy is one stream's state for splicing into Dst: its pipe, made
// at the first splice, and whether splicing is off (not possible here, or
// refused by the kernel); and the socket's wake-up threshold.
type zeroCopy struct {
	sp  *splicer
	off bool

	raw   syscall.RawConn // the bare TCP socket; nil before the first block or when there is none
	lowat int             // its SO_RCVLOWAT: 0 the default, -1 not to be set
	want  int             // the value being set, for set
	set   func(fd uintptr)
}

// maxLowat is the most payload a receiving stream waits for before it
// wakes: over a WAN segments arrive a few at a time, and a reader woken
// for each pays a wake-up, a read (or two splices) and a write per
// segment (one 512 MiB file over 16 streams, 60 ms, 0.01 %, bbr: the
// destination's server took 2.2-2.5 CPU-s a copy woken per segment, 0.72
// with the threshold; bench/LOG.md, issue 17).
const maxLowat = 256 << 10

// minLowat: a block shorter than this (a small file's) is read as it comes.
const minLowat = 64 << 10

// wakeAt makes the stream's reader wake when min(n, maxLowat) bytes wait
// in the socket (SO_RCVLOWAT): n is no more than the socket still owes
// the reader, so that its last bytes wake it, and 1 between blocks. The
// reader's read-ahead counts too: n excludes what it holds.
func (z *zeroCopy) wakeAt(s *Stream, n int64) {
	if z.lowat < 0 {
		return
	}
	n -= int64(s.R.Buffered())
	want := int(max(1, min(n, maxLowat)))
	if want == z.lowat || z.lowat > 1 && z.lowat <= want || want < minLowat && z.lowat <= 1 {
		return // already waking no later than the block's end; or a short block
	}
	if z.raw == nil {
		tc, bare := plainTCP(s.Conn)
		if !bare {
			z.lowat = -1
			return
		}
		raw, err := tc.SyscallConn()
		if err != nil {
			z.lowat = -1
			return
		}
		z.raw = raw
		z.set = func(fd uintptr) { z.lowat = setLowat(fd, z.want) } // made once: no allocation per block
	}
	z.want = want
	if z.raw.Control(z.set) != nil || z.lowat == 0 {
		z.lowat = -1
	}
}

// readFull reads len(p) bytes of a block's payload from s: each read
// waits for no more than the rest of p (wakeAt).
func (z *zeroCopy) readFull(s *Stream, p []byte) error {
	for len(p) > 0 {
		z.wakeAt(s, int64(len(p)))
		k, err := s.R.Read(p)
		p = p[k:]
		if err != nil && len(p) > 0 {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

func (z *zeroCopy) close() {
	if z.sp != nil {
		z.sp.close()
	}
}

// splice moves up to n bytes of payload from s into Dst at pos by
// splice and returns how many it took from s, or 0 when it cannot: a Hash
// wants the bytes, Dst is not a file (FileAt), s is not a bare TCP
// connection, or its read-ahead holds bytes still. When Dst fails, some
// of those may not be in Dst: what is, is counted.
func (r *Receiver) splice(s *Stream, z *zeroCopy, buf []byte, pos, n int64) (int64, error) {
	if z.off || s.R.Buffered() > 0 {
		return 0, nil
	}
	f, err := r.fileAt(pos, n)
	if err != nil {
		return 0, err
	}
	tc, bare := plainTCP(s.Conn)
	if f == nil || !bare || r.Hash != nil {
		z.off = true
		return 0, nil
	}
	if z.sp == nil {
		if z.sp, err = newSplicer(); err != nil {
			z.off = true
			return 0, nil
		}
	}
	m, taken, err := z.sp.splice(tc, f, r.Dst, buf, pos, n)
	if m > 0 {
		r.bytes.Add(m)
		r.mu.Lock()
		r.record(pos, pos+m)
		r.mu.Unlock()
	}
	if errors.Is(err, errNoZeroCopy) {
		z.off, err = true, nil
	}
	return taken, err
}

// fileAt is the file under Dst to splice n bytes into at off, or nil.
func (r *Receiver) fileAt(off, n int64) (*os.File, error) {
	switch d := r.Dst.(type) {
	case *os.File:
		return d, nil
	case FileAt:
		return d.FileAt(off, n)
	}
	return nil, nil
}
