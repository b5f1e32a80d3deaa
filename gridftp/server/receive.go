package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"ferry/gridftp"
	"ferry/storage"
)

// recvState is one MODE E receive: the file, the ranges written so far and
// the byte count, shared by the stream readers and the marker timer.
type recvState struct {
	srv   *Server
	f     storage.File
	base  int64
	bytes atomic.Int64

	mu      sync.Mutex
	ranges  gridftp.Ranges // written during this transfer, absolute offsets
	pending gridftp.Ranges // not yet reported in a 111 marker
}

func (rs *recvState) written(start, end int64) {
	rs.mu.Lock()
	rs.ranges.Add(start, end)
	rs.pending.Add(start, end)
	rs.mu.Unlock()
}

// takePending returns the ranges written since the last marker.
func (rs *recvState) takePending() gridftp.Ranges {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	p := rs.pending
	rs.pending = gridftp.Ranges{}
	return p
}

// streamEvent is what a stream reader reports.
type streamEvent struct {
	dc       *dataConn
	eofCount int  // > 0: an EOF block announced this many EODs
	done     bool // the reader returned; fields below are final
	eod      bool // the stream reached EOD
	closing  bool // the sender closes the stream
	idle     bool // the transfer ended before the stream carried anything
	err      error
}

// receiveBlocks reads MODE E blocks from every cached stream and from
// streams that connect during the transfer, until as many EODs as the EOF
// block announced have arrived.
func (ss *session) receiveBlocks(ctx context.Context, rs *recvState) error {
	events := make(chan streamEvent, 8)
	var finished atomic.Bool
	running := map[*dataConn]bool{}
	start := func(dc *dataConn) {
		running[dc] = true
		go ss.readStream(dc, rs, events, &finished)
	}
	for _, dc := range ss.data.cache {
		start(dc)
	}
	eods, want := 0, -1
	var failure error
	progress := time.NewTimer(ss.srv.dataTimeout())
	defer progress.Stop()
	lastBytes := int64(-1)
	accepted := ss.data.accepted // nil when active: a nil channel never fires
	wake := func() {
		finished.Store(true)
		for dc := range running {
			dc.c.SetReadDeadline(time.Unix(1, 0))
		}
	}
	for len(running) > 0 || (failure == nil && (want < 0 || eods < want)) {
		if failure == nil && want >= 0 && eods >= want && !finished.Load() {
			wake()
		}
		if failure == nil && len(running) == 0 && accepted == nil && (want < 0 || eods < want) {
			failure = fmt.Errorf("all data streams ended before EOF: %w", errDataConn)
			break
		}
		select {
		case c, ok := <-accepted:
			if !ok {
				accepted = nil
				continue
			}
			if failure != nil || finished.Load() {
				c.Close()
				continue
			}
			tune(c, ss.storBuf)
			dc := &dataConn{c: c, br: bufio.NewReaderSize(c, streamReadBuffer)}
			ss.data.cache = append(ss.data.cache, dc)
			start(dc)
		case ev := <-events:
			if ev.eofCount > 0 {
				want = ev.eofCount
			}
			if !ev.done {
				continue
			}
			delete(running, ev.dc)
			switch {
			case ev.err != nil && failure == nil && !(finished.Load() && ev.idle):
				failure = ev.err
				wake()
			case ev.eod:
				eods++
			}
			if ev.closing || (ev.err != nil && !ev.idle) {
				ev.dc.c.Close()
				ss.data.cache = slices.DeleteFunc(ss.data.cache, func(d *dataConn) bool { return d == ev.dc })
			}
		case <-ctx.Done():
			if failure == nil {
				failure = errAborted
				wake()
			}
		case <-progress.C:
			if n := rs.bytes.Load(); n == lastBytes && failure == nil {
				failure = fmt.Errorf("no data for %v: %w", ss.srv.dataTimeout(), errDataConn)
				wake()
			} else {
				lastBytes = n
			}
			progress.Reset(ss.srv.dataTimeout())
		}
	}
	for _, dc := range ss.data.cache {
		dc.c.SetReadDeadline(time.Time{})
	}
	return failure
}

// readStream reads one stream of one transfer up to its EOD. Before each
// header it peeks, so that a stream the sender leaves unused can be woken by
// a past deadline without losing a byte.
func (ss *session) readStream(dc *dataConn, rs *recvState, events chan<- streamEvent, finished *atomic.Bool) {
	ev := streamEvent{dc: dc, done: true}
	defer func() { events <- ev }()
	var bp *[]byte
	defer func() {
		if bp != nil {
			ss.srv.putBuffer(bp)
		}
	}()
	carried := false
	for {
		if _, err := dc.br.Peek(1); err != nil {
			if finished.Load() && !carried && errors.Is(err, os.ErrDeadlineExceeded) {
				ev.idle, ev.err = true, err
				return
			}
			if err == io.EOF {
				err = fmt.Errorf("data stream closed before EOD: %w", errDataConn)
			}
			ev.err = err
			return
		}
		if finished.Load() && !carried {
			ev.idle = true // the bytes waiting belong to the next transfer
			return
		}
		carried = true
		h, err := gridftp.ReadHeader(dc.br)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("data stream cut inside a header: %w", errDataConn)
			}
			ev.err = err
			return
		}
		if h.Desc&gridftp.DescEOF != 0 {
			if h.Offset == 0 {
				ev.err = fmt.Errorf("%w: EOF with EOD count 0", gridftp.ErrBadHeader)
				return
			}
			events <- streamEvent{dc: dc, eofCount: int(h.Offset)}
		} else if h.Count > 0 {
			if bp == nil {
				bp = ss.srv.buffer()
			}
			if err := rs.readBlock(dc.br, h, *bp); err != nil {
				ev.err = err
				return
			}
		}
		if h.Desc&gridftp.DescEOD != 0 {
			ev.eod = true
		}
		if h.Desc&gridftp.DescWillClose != 0 {
			ev.closing = true
		}
		if ev.eod || ev.closing {
			return
		}
	}
}

// readBlock copies one block's payload to the file.
func (rs *recvState) readBlock(r io.Reader, h gridftp.Header, buf []byte) error {
	start := rs.base + int64(h.Offset)
	pos, left := start, int64(h.Count)
	for left > 0 {
		n := min(int64(len(buf)), left)
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("data stream cut inside a block: %w", errDataConn)
			}
			return err
		}
		if _, err := rs.f.WriteAt(buf[:n], pos); err != nil {
			return err
		}
		pos += n
		left -= n
		rs.bytes.Add(n)
	}
	rs.written(start, pos)
	return nil
}

// markers sends 112 performance markers every interval while data moves;
// with rs (a receive) it also sends one at the start and 111 range markers,
// and the final pair when stopped.
func (ss *session) markers(interval time.Duration, bytes *atomic.Int64, rs *recvState) (stop func()) {
	perf := func() {
		ss.send(gridftp.PerfMarker{Time: time.Now(), Bytes: bytes.Load(), StripeCount: 1}.Reply())
	}
	ranges := func() {
		if rs != nil {
			if p := rs.takePending(); !p.Empty() {
				ss.send(gridftp.RangeMarkerReply(p))
			}
		}
	}
	if rs != nil {
		perf()
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				perf()
				ranges()
			case <-quit:
				return
			}
		}
	}()
	return func() {
		close(quit)
		wg.Wait()
		if rs != nil {
			perf()
			ranges()
		}
	}
}

