package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"ferry/gridftp"
	"ferry/internal/partname"
	"ferry/stack"
	"ferry/storage"
)

func (ss *session) handleRETR(arg string) bool {
	ss.retrieve(ss.path(arg), -1, -1)
	return true
}

// handleERET serves "ERET P <offset> <length> <path>": a section of a file
// whose MODE E block offsets are relative to the section.
func (ss *session) handleERET(arg string) bool {
	off, n, p, ok := parseERET(arg)
	if !ok {
		ss.reply(gridftp.CodeBadArguments, "ERET: expected P OFFSET LENGTH PATH.")
		return true
	}
	ss.retrieve(ss.path(p), off, n)
	return true
}

// parseERET reads "P <offset> <length> <path>".
func parseERET(arg string) (off, n int64, p string, ok bool) {
	f := strings.SplitN(arg, " ", 4)
	if len(f) != 4 || !strings.EqualFold(f[0], "P") || f[3] == "" {
		return 0, 0, "", false
	}
	off, err1 := strconv.ParseInt(f[1], 10, 64)
	n, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || off < 0 || n < 0 {
		return 0, 0, "", false
	}
	return off, n, f[3], true
}

// retrieve sends a file, or the section [off, off+n) of it when off >= 0,
// from the session's stack: the file layer's files are read in any order
// and from any offset; a layer read from start to end (a program's output)
// only whole.
func (ss *session) retrieve(p string, off, n int64) {
	defer ss.clearRest()
	ctx, done := ss.transferContext()
	defer done()
	if !ss.readyToTransfer(ctx) {
		return
	}
	t, reported := ss.transferFor(p)
	src, err := ss.sessionStack().Open(ctx, t)
	if err != nil {
		reported()
		ss.srv.Stats.transfer(false, 0, err, false)
		ss.errorReply("open", err)
		return
	}
	ra, ranged := src.(io.ReaderAt)
	sz, sized := src.(stack.Sizer)
	if ranged && sized {
		err = ss.sendRanges(ctx, p, src, ra, sz.Size(), off, n)
	} else if off >= 0 || ss.restSet {
		err = stack.ErrNotSeekable
	} else {
		err = ss.sendStream(ctx, src.(io.Reader))
	}
	err = stack.End(src, err)
	reported()
	ss.endTransfer(ctx, "send", err, false)
}

// sendRanges sends the file src of size bytes, or its section [off,
// off+n) when off >= 0, less what REST says the receiver has.
func (ss *session) sendRanges(ctx context.Context, p string, src stack.Source, f io.ReaderAt, size, off, n int64) error {
	fs, plain := src.(*stack.FileSource)
	if plain {
		f = fs.File // an *os.File goes out through sendfile
	}
	base, end := int64(0), size
	if off >= 0 {
		base, end = off, off
		if off < size {
			end = off + min(n, size-off) // n may be near MaxInt64
		}
	}
	var segs []gridftp.Range
	switch {
	case ss.restSet && !ss.restRanges.Empty():
		segs = ss.restRanges.Missing(base, end)
	case ss.restSet:
		segs = []gridftp.Range{{Start: min(base+ss.restOffset, end), End: end}}
	default:
		segs = []gridftp.Range{{Start: base, End: end}}
	}
	var live *hashingReader
	if h := ss.liveHash(); h != nil && plain && ss.modeE && !ss.striped() && ss.stripe.count <= 1 && len(segs) == 1 {
		live, f = hashing(f, h, segs[0].Start) // the streams read the blocks in order (gridftp.OrderedReaderAt)
	}
	err := ss.sendData(ctx, f, segs, base, end)
	if err == nil && live != nil && !live.broken && live.next == segs[0].End {
		ss.remember(p, segs[0].Start, segs[0].Len(), live.h)
	}
	return err
}

// sendStream sends src, read from start to end, as one whole transfer.
func (ss *session) sendStream(ctx context.Context, src io.Reader) error {
	return ss.sendOut(ctx, func(c net.Conn) (int64, error) {
		return io.Copy(c, src)
	}, func(streams []*gridftp.Stream, sent *atomic.Int64) error {
		return gridftp.SendStream(ctx, streams, src, ss.buffers, sent)
	})
}

// readyToTransfer checks, before any file is touched, that the data
// channel is set up and no ABOR came first; if not it replies.
func (ss *session) readyToTransfer(ctx context.Context) bool {
	switch {
	case ctx.Err() != nil:
		ss.reply(gridftp.CodeTransferAborted, "Transfer aborted.")
	case ss.data.ln == nil && len(ss.data.active) == 0:
		ss.reply(gridftp.CodeCantOpenData, "Can't open data connection: send PASV or PORT first.")
	default:
		return true
	}
	return false
}

// finish sends a transfer's final reply. After a failure the data
// connections are dropped, once the reply has told the peer why: their
// state is unknown. A stream-mode connection closes before a 226, since
// its end marks the end of the file. After a failed receive the sender's
// data is drained before the reply, for a moment (lingerTime): a
// stream-mode connection's here (drainStream), MODE E streams' up to
// their EODs in the Receiver (Drain). Then the connections are cut, so
// that a sender not done by then sees its writes fail, not succeed into
// a drain while it waits for an end it may never send (cutStream).
func (ss *session) finish(ctx context.Context, op string, err error, receiving bool) {
	ss.moved = 0 // a listing's too
	if err != nil {
		// Connections that came during the failed transfer are its own; a
		// sender that reads the reply below connects anew for the next.
		ss.data.dropPending()
	}
	switch {
	case err == nil:
		ss.endStream()
	case receiving && ctx.Err() == nil:
		if ss.data.drainStream(lingerTime) {
			ss.endStream()
		} else {
			defer ss.endStream()
			defer ss.data.cutStream()
		}
		defer ss.data.cutCache()
	default:
		defer ss.endStream()
		defer ss.data.dropCache()
	}
	switch {
	case err == nil:
		ss.reply(gridftp.CodeTransferComplete, "Transfer Complete.")
	case errors.Is(err, errNoDataSetup):
		ss.reply(gridftp.CodeCantOpenData, "Can't open data connection: send PASV or PORT first.")
	case ss.aborted(ctx):
		ss.reply(gridftp.CodeTransferAborted, "Transfer aborted.")
	default:
		ss.errorReply(op, err)
	}
}

// aborted reports whether the transfer of ctx was aborted (ABOR), not
// ended with its session.
func (ss *session) aborted(ctx context.Context) bool { return ctx.Err() != nil && ss.ctx.Err() == nil }

// endTransfer counts the end of a file transfer, and the bytes it moved
// (ss.moved), in the server's Stats, then sends its final reply (finish).
func (ss *session) endTransfer(ctx context.Context, op string, err error, receiving bool) {
	ss.srv.Stats.transfer(receiving, ss.moved, err, ss.aborted(ctx))
	ss.finish(ctx, op, err, receiving)
}

// sendData sends segs, of the region [base, end), of src over the data
// channel. In MODE E, block offsets are relative to base. A mover sends
// only its stripe's part (SITE STRIPE), and a send to several receiving
// stripes goes out as striping has it (mover.go).
func (ss *session) sendData(ctx context.Context, src io.ReaderAt, segs []gridftp.Range, base, end int64) error {
	if ss.striped() {
		return ss.sendStriped(ctx, src, segs, base, end)
	}
	if ss.modeE && ss.stripe.count > 1 {
		segs = ss.layout.Split(segs, base, end, ss.stripe.index, ss.stripe.count)
	}
	return ss.sendOut(ctx, func(c net.Conn) (int64, error) {
		var total int64
		for _, s := range segs {
			total += s.Len()
		}
		n, err := copyRange(c, src, segs)
		if err == nil && n != total {
			err = fmt.Errorf("sent %d of %d bytes: source changed", n, total)
		}
		return n, err
	}, func(streams []*gridftp.Stream, sent *atomic.Int64) error {
		plan := gridftp.NewPlan(segs, ss.srv.blockSize())
		g := ss.growth(len(streams))
		if g == nil {
			return gridftp.Send(ctx, streams, plan, src, base, ss.buffers, sent)
		}
		res, err := gridftp.SendGrowing(ctx, streams, plan, src, base, ss.buffers, sent, g)
		ss.grown(len(streams), res)
		return err
	})
}

// sendOut runs one sending transfer: stream over the stream-mode
// connection, or modeE over the MODE E streams, after the 150 (or 125)
// reply and with the performance markers the client asked for. What it
// sent is added to ss.moved.
func (ss *session) sendOut(ctx context.Context, stream func(net.Conn) (int64, error), modeE func([]*gridftp.Stream, *atomic.Int64) error) error {
	if !ss.modeE {
		c, err := ss.streamConn(ctx)
		if err != nil {
			return err
		}
		tune(c, ss.retrBuf)
		stop := closeOnCancel(ctx, c)
		defer stop()
		n, err := stream(c)
		ss.moved += n
		return ss.dataErr(ctx, err)
	}
	if len(ss.data.active) == 0 && ss.data.ln == nil {
		return errNoDataSetup
	}
	streams, reused, err := ss.senderStreams(ctx)
	if err != nil {
		return err
	}
	ss.beginReply(reused)
	var sent atomic.Int64
	if ss.retrMarks > 0 {
		stop := ss.markers(ss.retrMarks, &sent, nil)
		defer stop()
	}
	err = modeE(streams, &sent)
	ss.moved += sent.Load()
	return ss.dataErr(ctx, err)
}

// beginReply sends 150, or 125 when cached streams carry the transfer.
func (ss *session) beginReply(reused bool) {
	if reused {
		ss.reply(gridftp.CodeReusingData, "Beginning transfer; reusing existing data connection.")
	} else {
		ss.reply(gridftp.CodeOpeningData, "Beginning transfer.")
	}
}

// dataErr turns an error of the data path into the one the reply reports.
func (ss *session) dataErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return errAborted
	}
	return err
}

// streamConn opens the data connection of one stream-mode transfer and
// sends the preliminary reply. finish closes it.
func (ss *session) streamConn(ctx context.Context) (net.Conn, error) {
	if ss.data.ln == nil && len(ss.data.active) == 0 {
		return nil, errNoDataSetup
	}
	ss.reply(gridftp.CodeOpeningData, "Beginning transfer.")
	var c net.Conn
	var err error
	if ss.data.ln != nil {
		c, err = ss.acceptOne(ctx)
	} else {
		c, err = ss.dial(ctx, 0)
	}
	ss.data.stream = c
	return c, err
}

// endStream closes a stream-mode connection; a passive listener serves one
// stream-mode transfer, as with the peers.
func (ss *session) endStream() {
	if ss.data.stream == nil {
		return
	}
	ss.data.stream.Close()
	ss.data.stream = nil
	if ss.data.ln != nil {
		ss.data.close()
	}
}

// closeOnCancel closes c when ctx ends before stop is called.
func closeOnCancel(ctx context.Context, c net.Conn) (stop func()) {
	s := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	return func() { s() }
}

// copyRange writes the segments of src to w; a file source goes through
// sendfile.
func copyRange(w io.Writer, src io.ReaderAt, segs []gridftp.Range) (int64, error) {
	var total int64
	for _, s := range segs {
		var r io.Reader
		if f, ok := src.(*os.File); ok {
			if _, err := f.Seek(s.Start, io.SeekStart); err != nil {
				return total, err
			}
			r = io.LimitReader(f, s.Len())
		} else {
			r = io.NewSectionReader(src, s.Start, s.Len())
		}
		n, err := io.Copy(w, r)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// senderStreams returns the MODE E streams for sending: the cached ones,
// shrunk or grown to the requested parallelism. In MODE E the sender
// normally connects; after PASV (FEAT PASVSEND) it takes the streams the
// receiver connects instead, as many as the parallelism, which the
// receiver was given too: a receiver that accepts no connections (ferry
// connect) connects out to it.
func (ss *session) senderStreams(ctx context.Context) (streams []*gridftp.Stream, reused bool, err error) {
	want := max(ss.parallel, ss.grow.kept, 1)
	reused = len(ss.data.cache) > 0
	for len(ss.data.cache) > want {
		ss.data.cache[len(ss.data.cache)-1].Close()
		ss.data.cache = ss.data.cache[:len(ss.data.cache)-1]
	}
	if ss.data.ln == nil && len(ss.data.cache) < want {
		have := len(ss.data.cache)
		conns, err := gridftp.DialAll(ctx, want-have, func(ctx context.Context, i int) (net.Conn, error) {
			return ss.dial(ctx, have+i)
		})
		if err != nil {
			return nil, false, err
		}
		for _, c := range conns {
			tune(c, ss.retrBuf)
			ss.data.cache = append(ss.data.cache, gridftp.NewStream(c))
		}
	}
	for len(ss.data.cache) < want {
		c, err := ss.acceptOne(ctx)
		if err != nil {
			return nil, false, err
		}
		tune(c, ss.retrBuf)
		ss.data.cache = append(ss.data.cache, gridftp.NewStream(c))
	}
	return ss.data.cache, reused, nil
}

func (ss *session) handleSTOR(arg string) bool {
	p := ss.path(arg)
	switch {
	case ss.restSet:
		ss.store(p, storage.Keep, 0, false, "")
	case ss.partStor:
		ss.store(partname.For(p), storage.Truncate, 0, false, p)
	default:
		ss.store(p, storage.Truncate, 0, false, "")
	}
	return true
}

func (ss *session) handleAPPE(arg string) bool {
	ss.store(ss.path(arg), storage.Keep, 0, true, "")
	return true
}

// handleESTO stores "ESTO A <offset> <path>": block offsets are shifted by
// offset and the file keeps what it holds.
func (ss *session) handleESTO(arg string) bool {
	if p, off, ok := ss.estoArgs(arg); ok {
		ss.store(p, storage.Keep, off, false, "")
	}
	return true
}

// estoArgs reads "A <offset> <path>", or replies why not.
func (ss *session) estoArgs(arg string) (p string, off int64, ok bool) {
	f := strings.SplitN(arg, " ", 3)
	if len(f) != 3 || !strings.EqualFold(f[0], "A") || f[2] == "" {
		ss.reply(gridftp.CodeBadArguments, "ESTO: expected A OFFSET PATH.")
		return "", 0, false
	}
	if off, ok = ss.sizeArg(f[1], "write", "ESTO: bad offset."); !ok {
		return "", 0, false
	}
	return ss.path(f[2]), off, true
}

// store receives a file at p; block offsets are shifted by base (ESTO) or
// by the current size (APPE). Through a layer that can only be written
// from start to end, only a whole transfer. With final set, p is final's
// temporary name (SITE PARTSTOR), renamed over final once the transfer
// succeeded, before its reply; left as it is when it failed.
func (ss *session) store(p string, flag storage.OpenFlag, base int64, appendMode bool, final string) {
	defer ss.clearRest()
	want := ss.scks
	ss.scks = nil
	ctx, done := ss.transferContext()
	defer done()
	if !ss.readyToTransfer(ctx) {
		return // before the file is opened, so that nothing is truncated
	}
	t, reported := ss.transferFor(p)
	t.Flag = flag
	sink, err := ss.sessionStack().Create(ctx, t)
	if err != nil {
		reported()
		ss.srv.Stats.transfer(true, 0, err, false)
		ss.errorReply("open", err)
		// The sender of a third-party transfer may be sending this
		// file already, on cached streams or ones it connects now:
		// what they hold is this transfer's, and must not be read as
		// the next one's. Drain them for a moment and close them, as
		// after any failed receive; in MODE E, where a sender streams
		// ahead, close the passive listener too, so that one still
		// connecting (not yet accepted, as a refusal before the sender
		// connects leaves it) is refused, not taken by the next
		// transfer: that one needs a new PASV.
		ss.data.dropPending()
		ss.data.linger()
		if ss.modeE {
			ss.data.closeListener()
		}
		return
	}
	f, plain := sink.(storage.File)
	_, seekable := sink.(io.WriterAt)
	if ss.modeE {
		sink = stack.InOrder(sink) // MODE E blocks come in any order
	}
	rcv, err := ss.receiveInto(ctx, p, sink, f, plain, seekable, flag, base, appendMode)
	if rcv != nil && !plain && err == nil {
		// A layer may take long to finish after the data (forward waits
		// for its children's replies and checksums): markers go on, so
		// that the client's wait for the reply does not time out.
		stop := ss.markers(ss.srv.markerInterval(), rcv.Counter(), nil)
		err = stack.End(sink, err)
		stop()
	} else {
		err = stack.End(sink, err)
	}
	if sm, ok := sink.(stack.Summer); ok && err == nil && !plain && ss.liveAlg != "" {
		if sum, n, ok := sm.Sum(ss.liveAlg); ok {
			ss.srv.sums.put(sumKey{path: p, off: 0, n: n, alg: ss.liveAlg}, sum)
		}
	}
	reported()
	if err == nil && want != nil && plain {
		err = ss.verify(ctx, p, want)
	}
	if err == nil && final != "" {
		err = ss.rename(p, final)
	}
	ss.endTransfer(ctx, "write", err, true)
}

// receiveInto receives one transfer into sink, which is the file f when
// plain; one that is not seekable takes only whole transfers. In MODE E it
// returns the receiver.
func (ss *session) receiveInto(ctx context.Context, p string, sink stack.Sink, f storage.File, plain, seekable bool, flag storage.OpenFlag, base int64, appendMode bool) (*gridftp.Receiver, error) {
	if !seekable && (appendMode || base != 0 || ss.restSet) {
		return nil, stack.ErrNotSeekable
	}
	if appendMode {
		info, err := ss.srv.FS.Stat(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("stat: %w", err)
		}
		base = info.Size
	}
	if !ss.modeE && ss.restSet {
		base += ss.restOffset
	}
	if err := ss.checkSize(base); err != nil {
		return nil, err
	}
	if !plain {
		// A layer may write the file (forward) or files below it (tar):
		// the sums computed while they were written before are stale.
		ss.srv.sums.forget(p, 0, -1)
		return ss.receiveData(ctx, sink, base)
	}
	if flag == storage.Truncate {
		ss.srv.sums.forget(p, 0, -1)
	} else {
		ss.srv.sums.forget(p, base, -1)
	}
	rcv, err := ss.receiveData(ctx, ss.capWrites(f), base)
	if rcv != nil {
		for _, r := range rcv.Ranges().List() {
			ss.srv.sums.forget(p, r.Start, r.Len())
		}
		if sum, n, ok := rcv.Sum(); ok && err == nil {
			ss.srv.sums.put(sumKey{path: p, off: base, n: n, alg: ss.liveAlg}, hex.EncodeToString(sum))
		}
	}
	return rcv, err
}

// verify checks a stored file against the SCKS value that preceded it.
func (ss *session) verify(ctx context.Context, p string, want *expectedSum) error {
	info, err := ss.srv.FS.Stat(ctx, p)
	if err != nil {
		return err
	}
	got, err := ss.sum(ctx, want.alg, p, 0, info.Size)
	if err != nil {
		return err
	}
	if got != want.sum {
		return fmt.Errorf("%s of %s is %s, expected %s: %w", want.alg, p, got, want.sum, errChecksumMismatch)
	}
	return nil
}

// receiveData reads one transfer from the data channel into sink at base:
// a file, or a layer written in order (in MODE E, behind stack.InOrder).
// In MODE E it returns the receiver, which knows the ranges written
// and, with live checksums on a file, their hash.
func (ss *session) receiveData(ctx context.Context, sink stack.Sink, base int64) (*gridftp.Receiver, error) {
	f, plain := sink.(storage.File)
	if !ss.modeE {
		c, err := ss.streamConn(ctx)
		if err != nil {
			return nil, err
		}
		tune(c, ss.storBuf)
		stop := closeOnCancel(ctx, c)
		defer stop()
		var w io.Writer
		switch x := sink.(type) {
		case io.WriterAt:
			w = io.NewOffsetWriter(x, base)
		default:
			w = sink.(io.Writer)
		}
		if plain {
			if of, ok := storageFile(f).(*os.File); ok {
				if _, err := of.Seek(base, io.SeekStart); err != nil {
					return nil, err
				}
				w = of // os.File.ReadFrom splices from the socket
			}
		}
		n, err := ss.copyCapped(w, c, base)
		ss.moved += n
		if errors.Is(err, errTooLarge) {
			return nil, err
		}
		return nil, ss.dataErr(ctx, err)
	}
	if ss.data.ln == nil && len(ss.data.active) == 0 {
		return nil, errNoDataSetup
	}
	reused := len(ss.data.cache) > 0
	if !reused && ss.data.ln == nil {
		// An active receiver connects as many streams as the sender will
		// send on: the parallelism, which the sender was given too.
		conns, err := gridftp.DialAll(ctx, max(ss.parallel, 1), ss.dial)
		if err != nil {
			return nil, err
		}
		for _, c := range conns {
			tune(c, ss.storBuf)
			ss.data.cache = append(ss.data.cache, gridftp.NewStream(c))
		}
	}
	ss.beginReply(reused)
	rcv := &gridftp.Receiver{Dst: sink.(io.WriterAt), Base: base, Pool: ss.buffers, Timeout: ss.srv.dataTimeout(), MaxStreams: ss.srv.maxStreams(), Drain: lingerTime}
	if a, ok := sink.(stack.Aborter); ok {
		rcv.OnFailure = a.Abort
	}
	if h := ss.liveHash(); h != nil && plain {
		// Through a storage driver that may alter data (a wrapper, a
		// layer that encodes), hash what the file holds, read back after
		// each write, not what the network brought. A plain file's write
		// is a copy of the buffer into the page cache, which a read-back
		// would only copy out again: there the buffer is hashed (as GCT
		// does), saving ~0.1-0.2 CPU-s/GiB (BenchmarkReceiveLive).
		_, osFile := storageFile(f).(*os.File)
		rcv.Hash, rcv.ReadBack = h, !osFile
	}
	stopMarkers := ss.markers(ss.srv.markerInterval(), rcv.Counter(), rcv)
	streams, err := rcv.Run(ctx, ss.data.cache, ss.data.accepted, func(c net.Conn) { tune(c, ss.storBuf) })
	ss.moved += rcv.Counter().Load()
	stopMarkers()
	ss.data.cache = streams
	return rcv, ss.dataErr(ctx, err)
}
