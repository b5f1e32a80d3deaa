package gridftp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

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
