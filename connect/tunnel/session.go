package tunnel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Limits of a session.
const (
	Window     = 64 << 10 // unread bytes a peer may send on one stream
	MaxStreams = 256      // open streams per session, both sides' together
	maxFrame   = 16 << 10 // payload of one frame
	maxKind    = 64       // length of a stream kind
	acceptQ    = 64       // streams opened by the peer and not yet accepted

	// KeepAlive is how often each side sends a ping; a session that
	// receives nothing for three times as long is dead.
	KeepAlive    = 15 * time.Second
	writeTimeout = 30 * time.Second
)

// Frame types. A frame is a 9-byte header — type, stream ID, payload length
// (both big-endian) — and the payload.
const (
	frameOpen   = 1 // payload: the stream's kind
	frameData   = 2
	frameWindow = 3 // payload: a 4-byte window increment
	frameClose  = 4 // the sender is done with the stream, both ways
	framePing   = 5 // stream 0
)

const headerLen = 9

// ErrClosed is returned by the operations of a closed session.
var ErrClosed = errors.New("tunnel closed")

var errProtocol = errors.New("tunnel: protocol violation")

// Session multiplexes streams over one connection. The client (the agent)
// opens odd stream IDs, the server (the relay) even ones.
type Session struct {
	conn    net.Conn
	accepts chan *Stream
	done    chan struct{}

	wmu  sync.Mutex
	wbuf []byte

	mu      sync.Mutex
	streams map[uint32]*Stream
	next    uint32
	err     error
}

// Client starts the agent's side of a session over conn.
func Client(conn net.Conn) *Session { return newSession(conn, 1) }

// Server starts the relay's side of a session over conn.
func Server(conn net.Conn) *Session { return newSession(conn, 2) }

func newSession(conn net.Conn, first uint32) *Session {
	s := &Session{conn: conn, accepts: make(chan *Stream, acceptQ), done: make(chan struct{}),
		wbuf: make([]byte, headerLen+maxFrame), streams: map[uint32]*Stream{}, next: first}
	go s.read()
	go s.ping()
	return s
}

// Done is closed when the session ends; Err then says why.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session ended; nil while it runs.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the session and every stream.
func (s *Session) Close() error {
	s.fail(ErrClosed)
	return nil
}

// fail ends the session once, with err.
func (s *Session) fail(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	streams := s.streams
	s.streams = map[uint32]*Stream{}
	close(s.done)
	s.mu.Unlock()
	s.conn.Close()
	for _, st := range streams {
		st.broken(err)
	}
}

// Open opens a stream of the given kind. The peer may refuse it, which the
// stream's first Read reports as EOF.
func (s *Session) Open(kind string) (*Stream, error) {
	if len(kind) > maxKind {
		return nil, fmt.Errorf("tunnel: stream kind %q too long", kind)
	}
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return nil, s.err
	}
	if len(s.streams) >= MaxStreams {
		s.mu.Unlock()
		return nil, fmt.Errorf("tunnel: %d streams open", MaxStreams)
	}
	st := newStream(s, s.next, kind)
	s.streams[st.id] = st
	s.next += 2
	s.mu.Unlock()
	if err := s.write(frameOpen, st.id, []byte(kind)); err != nil {
		return nil, err
	}
	return st, nil
}

// Accept returns the next stream the peer opened.
func (s *Session) Accept() (*Stream, error) {
	select {
	case st := <-s.accepts:
		return st, nil
	case <-s.done:
		return nil, s.Err()
	}
}

// write sends one frame.
func (s *Session) write(typ byte, id uint32, payload []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	select {
	case <-s.done:
		return s.Err()
	default:
	}
	b := s.wbuf[:headerLen]
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:5], id)
	binary.BigEndian.PutUint32(b[5:9], uint32(len(payload)))
	b = append(b, payload...)
	s.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := s.conn.Write(b); err != nil {
		s.fail(fmt.Errorf("tunnel write: %w", err))
		return s.Err()
	}
	return nil
}

// ping keeps the session alive, and lets the peer see that it is.
func (s *Session) ping() {
	t := time.NewTicker(KeepAlive)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.write(framePing, 0, nil)
		}
	}
}

// read dispatches the peer's frames until the session ends.
func (s *Session) read() {
	hdr := make([]byte, headerLen)
	payload := make([]byte, maxFrame)
	for {
		s.conn.SetReadDeadline(time.Now().Add(3 * KeepAlive))
		if _, err := io.ReadFull(s.conn, hdr); err != nil {
			s.fail(fmt.Errorf("tunnel read: %w", err))
			return
		}
		typ, id, n := hdr[0], binary.BigEndian.Uint32(hdr[1:5]), binary.BigEndian.Uint32(hdr[5:9])
		if n > maxFrame {
			s.fail(errProtocol)
			return
		}
		p := payload[:n]
		if _, err := io.ReadFull(s.conn, p); err != nil {
			s.fail(fmt.Errorf("tunnel read: %w", err))
			return
		}
		if err := s.dispatch(typ, id, p); err != nil {
			s.fail(err)
			return
		}
	}
}

func (s *Session) dispatch(typ byte, id uint32, p []byte) error {
	if typ == framePing {
		return nil
	}
	if typ == frameOpen {
		return s.opened(id, string(p))
	}
	s.mu.Lock()
	st := s.streams[id]
	s.mu.Unlock()
	if st == nil {
		return nil // closed here; the peer learns it from our close
	}
	switch typ {
	case frameData:
		return st.received(p)
	case frameWindow:
		if len(p) != 4 {
			return errProtocol
		}
		st.credit(int(binary.BigEndian.Uint32(p)))
	case frameClose:
		if st.remoteClosed() {
			s.forget(st)
		}
	default:
		return errProtocol
	}
	return nil
}

// opened takes a stream the peer opened, or refuses it when too many are.
func (s *Session) opened(id uint32, kind string) error {
	s.mu.Lock()
	if id%2 == s.next%2 || s.streams[id] != nil || len(kind) > maxKind {
		s.mu.Unlock()
		return errProtocol
	}
	if len(s.streams) >= MaxStreams {
		s.mu.Unlock()
		go s.write(frameClose, id, nil)
		return nil
	}
	st := newStream(s, id, kind)
	select {
	case s.accepts <- st:
		s.streams[id] = st
		s.mu.Unlock()
	default:
		s.mu.Unlock()
		go s.write(frameClose, id, nil) // nobody accepts: refused
	}
	return nil
}

// forget removes a stream closed at both ends.
func (s *Session) forget(st *Stream) {
	s.mu.Lock()
	if s.streams[st.id] == st {
		delete(s.streams, st.id)
	}
	s.mu.Unlock()
}

// Streams is the number of open streams.
func (s *Session) Streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams)
}

// Stream is one multiplexed connection; it is a net.Conn whose addresses
// are the session's.
type Stream struct {
	s    *Session
	id   uint32
	kind string

	mu       sync.Mutex
	buf      []byte // received, unread
	unacked  int    // read but not yet credited back to the peer
	sendWin  int
	rclosed  bool  // the peer closed
	lclosed  bool  // closed here
	err      error // the session's end
	readable chan struct{}
	writable chan struct{}
	rdl, wdl deadline
}

var _ net.Conn = (*Stream)(nil)

func newStream(s *Session, id uint32, kind string) *Stream {
	return &Stream{s: s, id: id, kind: kind, sendWin: Window,
		readable: make(chan struct{}, 1), writable: make(chan struct{}, 1),
		rdl: newDeadline(), wdl: newDeadline()}
}

// Kind is what the stream is for (KindGridFTP ...).
func (st *Stream) Kind() string { return st.kind }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// received queues data from the peer; more than the window allows is a
// protocol violation.
func (st *Stream) received(p []byte) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.lclosed || st.rclosed {
		return nil
	}
	if len(st.buf)+st.unacked+len(p) > Window {
		return errProtocol
	}
	st.buf = append(st.buf, p...)
	signal(st.readable)
	return nil
}

func (st *Stream) credit(n int) {
	st.mu.Lock()
	st.sendWin += n
	st.mu.Unlock()
	signal(st.writable)
}

// remoteClosed marks the peer's close; true when the stream is closed here
// too.
func (st *Stream) remoteClosed() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.rclosed = true
	signal(st.readable)
	signal(st.writable)
	return st.lclosed
}

// broken ends the stream with its session.
func (st *Stream) broken(err error) {
	st.mu.Lock()
	st.err = err
	st.mu.Unlock()
	signal(st.readable)
	signal(st.writable)
}

// Read reads data the peer sent; io.EOF once the peer closed the stream
// and everything it sent is read.
func (st *Stream) Read(p []byte) (int, error) {
	for {
		select {
		case <-st.rdl.wait():
			return 0, timeoutError{}
		default:
		}
		st.mu.Lock()
		switch {
		case st.lclosed:
			st.mu.Unlock()
			return 0, net.ErrClosed
		case len(st.buf) > 0:
			n := copy(p, st.buf)
			st.buf = st.buf[n:]
			if len(st.buf) == 0 {
				st.buf = nil
			}
			st.unacked += n
			inc := 0
			if st.unacked >= Window/2 && !st.rclosed {
				inc, st.unacked = st.unacked, 0
			}
			st.mu.Unlock()
			if inc > 0 {
				var b [4]byte
				binary.BigEndian.PutUint32(b[:], uint32(inc))
				st.s.write(frameWindow, st.id, b[:])
			}
			return n, nil
		case st.rclosed:
			st.mu.Unlock()
			return 0, io.EOF
		case st.err != nil:
			err := st.err
			st.mu.Unlock()
			return 0, err
		}
		st.mu.Unlock()
		select {
		case <-st.readable:
		case <-st.rdl.wait():
		}
	}
}

// Write sends p, waiting for window when the peer is behind.
func (st *Stream) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		select {
		case <-st.wdl.wait():
			return n, timeoutError{}
		default:
		}
		st.mu.Lock()
		switch {
		case st.lclosed:
			st.mu.Unlock()
			return n, net.ErrClosed
		case st.rclosed:
			st.mu.Unlock()
			return n, io.ErrClosedPipe
		case st.err != nil:
			err := st.err
			st.mu.Unlock()
			return n, err
		case st.sendWin > 0:
			k := min(len(p)-n, st.sendWin, maxFrame)
			st.sendWin -= k
			st.mu.Unlock()
			if err := st.s.write(frameData, st.id, p[n:n+k]); err != nil {
				return n, err
			}
			n += k
			continue
		}
		st.mu.Unlock()
		select {
		case <-st.writable:
		case <-st.wdl.wait():
		}
	}
	return n, nil
}

// Close closes the stream both ways.
func (st *Stream) Close() error {
	st.mu.Lock()
	if st.lclosed {
		st.mu.Unlock()
		return nil
	}
	st.lclosed = true
	remote, failed := st.rclosed, st.err != nil
	st.buf = nil
	st.mu.Unlock()
	signal(st.readable)
	signal(st.writable)
	st.rdl.stop()
	st.wdl.stop()
	if failed {
		return nil
	}
	if remote {
		st.s.forget(st)
	}
	st.s.write(frameClose, st.id, nil)
	return nil
}

func (st *Stream) LocalAddr() net.Addr  { return st.s.conn.LocalAddr() }
func (st *Stream) RemoteAddr() net.Addr { return st.s.conn.RemoteAddr() }

func (st *Stream) SetDeadline(t time.Time) error {
	st.rdl.set(t)
	st.wdl.set(t)
	return nil
}

func (st *Stream) SetReadDeadline(t time.Time) error  { st.rdl.set(t); return nil }
func (st *Stream) SetWriteDeadline(t time.Time) error { st.wdl.set(t); return nil }

// timeoutError is a passed deadline, as net reports it.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
func (timeoutError) Unwrap() error   { return errDeadline }

var errDeadline = errors.New("deadline exceeded")

// deadline is a channel closed when a settable time passes.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	passed chan struct{}
}

func newDeadline() deadline { return deadline{passed: make(chan struct{})} }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	closed := false
	select {
	case <-d.passed:
		closed = true
	default:
	}
	switch {
	case t.IsZero():
		if closed {
			d.passed = make(chan struct{})
		}
	case !time.Now().Before(t):
		if !closed {
			close(d.passed)
		}
	default:
		if closed {
			d.passed = make(chan struct{})
		}
		c := d.passed
		d.timer = time.AfterFunc(time.Until(t), func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			select {
			case <-c: // set closed it meanwhile
			default:
				close(c)
			}
		})
	}
}

func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}

func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.passed
}
