package gridftp

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

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
