package tunnel

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"
)

// Limits of a session.
const (
	// Window is the unread bytes a peer may send on one stream: yamux's
	// initial window, below which it goes no lower.
	Window     = 256 << 10
	MaxStreams = 256 // open streams per session, both sides' together
	maxKind    = 64  // length of a stream kind
	acceptQ    = 64  // streams opened by the peer and not yet accepted

	// KeepAlive is how often each side sends a ping; a session whose ping
	// is not answered within writeTimeout is dead, as is one whose writes
	// stall that long.
	KeepAlive    = 15 * time.Second
	writeTimeout = 30 * time.Second
)

// ErrClosed is returned by the operations of a session closed here.
var ErrClosed = errors.New("tunnel closed")

// config is the yamux configuration of both sides. A stream closed here
// that the peer does not close within writeTimeout is reset, so that a
// peer writing to it learns it is gone; a stream opened here that the
// peer does not take within yamux's StreamOpenTimeout (75 s) ends the
// session (the peer takes every stream at once, and refuses those it
// cannot serve).
func config() *yamux.Config {
	c := yamux.DefaultConfig()
	c.AcceptBacklog = acceptQ
	c.KeepAliveInterval = KeepAlive
	c.ConnectionWriteTimeout = writeTimeout
	c.MaxStreamWindowSize = Window
	c.StreamCloseTimeout = writeTimeout
	c.LogOutput = io.Discard // why a session ended is its Err
	return c
}

// Session multiplexes streams over one connection, with yamux: each
// stream starts with its kind, one length byte and the kind's bytes. The
// client (the agent) opens odd stream IDs, the server (the relay) even
// ones.
type Session struct {
	mux     *yamux.Session
	accepts chan *Stream
	done    chan struct{}
	err     error // why the session ended, once done is closed
}

// Client starts the agent's side of a session over conn.
func Client(conn net.Conn) *Session { return newSession(yamux.Client(boundedWrites{conn}, config())) }

// Server starts the relay's side of a session over conn.
func Server(conn net.Conn) *Session { return newSession(yamux.Server(boundedWrites{conn}, config())) }

// boundedWrites is a session's connection: a write that the peer takes no data
// of for writeTimeout fails, and ends the session.
type boundedWrites struct{ net.Conn }

func (c boundedWrites) Write(p []byte) (int, error) {
	c.SetWriteDeadline(time.Now().Add(writeTimeout))
	return c.Conn.Write(p)
}

func newSession(mux *yamux.Session, err error) *Session {
	if err != nil {
		panic(err) // config is not one yamux.VerifyConfig accepts
	}
	s := &Session{mux: mux, accepts: make(chan *Stream, acceptQ), done: make(chan struct{})}
	go s.accept()
	return s
}

// Done is closed when the session ends; Err then says why.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session ended; nil while it runs.
func (s *Session) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// ended is the error of an operation that failed because the session
// ended: why it did.
func (s *Session) ended() error {
	<-s.done
	return s.err
}

// Close ends the session and every stream.
func (s *Session) Close() error {
	s.mux.Close()
	<-s.done
	return nil
}

// accept takes the streams the peer opens until the session ends,
// refusing those beyond MaxStreams.
func (s *Session) accept() {
	for {
		ys, err := s.mux.AcceptStream()
		if err != nil {
			if errors.Is(err, yamux.ErrSessionShutdown) {
				err = ErrClosed
			} else {
				err = fmt.Errorf("tunnel: %w", err)
			}
			s.err = err
			close(s.done)
			return
		}
		if s.mux.NumStreams() > MaxStreams {
			ys.Close() // the peer reads EOF
			continue
		}
		go s.opened(ys)
	}
}

// opened reads the kind of a stream the peer opened and queues it for
// Accept, or refuses it when nobody accepts.
func (s *Session) opened(ys *yamux.Stream) {
	ys.SetReadDeadline(time.Now().Add(writeTimeout))
	var n [1]byte
	_, err := io.ReadFull(ys, n[:])
	kind := make([]byte, n[0])
	if err == nil && len(kind) <= maxKind {
		_, err = io.ReadFull(ys, kind)
	}
	ys.SetReadDeadline(time.Time{})
	if err != nil || len(kind) > maxKind {
		ys.Close()
		return
	}
	select {
	case s.accepts <- &Stream{s: s, ys: ys, kind: string(kind)}:
	default:
		ys.Close() // nobody accepts: refused
	}
}

// Open opens a stream of the given kind. The peer may refuse it, which the
// stream's first Read reports as EOF.
func (s *Session) Open(kind string) (*Stream, error) {
	if len(kind) > maxKind {
		return nil, fmt.Errorf("tunnel: stream kind %q too long", kind)
	}
	if s.mux.NumStreams() >= MaxStreams {
		return nil, fmt.Errorf("tunnel: %d streams open", MaxStreams)
	}
	ys, err := s.mux.OpenStream()
	if err != nil {
		if s.mux.IsClosed() {
			return nil, s.ended()
		}
		return nil, err
	}
	st := &Stream{s: s, ys: ys, kind: kind}
	if _, err := st.Write(append([]byte{byte(len(kind))}, kind...)); err != nil {
		ys.Close()
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
		return nil, s.err
	}
}

// Streams is the number of open streams.
func (s *Session) Streams() int { return s.mux.NumStreams() }

// Stream is one multiplexed connection; it is a net.Conn whose addresses
// are the session's.
type Stream struct {
	s      *Session
	ys     *yamux.Stream
	kind   string
	closed atomic.Bool
}

var _ net.Conn = (*Stream)(nil)

// Kind is what the stream is for (KindGridFTP ...).
func (st *Stream) Kind() string { return st.kind }

// Read reads data the peer sent; io.EOF once the peer closed the stream
// and everything it sent is read.
func (st *Stream) Read(p []byte) (int, error) {
	if st.closed.Load() {
		return 0, net.ErrClosed
	}
	n, err := st.ys.Read(p)
	return n, st.fix(err)
}

// Write sends p, waiting for window when the peer is behind. A peer that
// closed the stream takes up to a window more, and resets the stream
// writeTimeout after its Close: then Write fails.
func (st *Stream) Write(p []byte) (int, error) {
	if st.closed.Load() {
		return 0, net.ErrClosed
	}
	n, err := st.ys.Write(p)
	return n, st.fix(err)
}

// fix turns yamux's errors into those of a net.Conn: net.ErrClosed once
// closed here, os.ErrDeadlineExceeded past a deadline, and the session's
// end when it ended.
func (st *Stream) fix(err error) error {
	switch {
	case err == nil:
		return nil
	case st.closed.Load():
		return net.ErrClosed
	case errors.Is(err, yamux.ErrTimeout):
		return os.ErrDeadlineExceeded
	case st.s.mux.IsClosed():
		return st.s.ended()
	}
	return err
}

// Close closes the stream: a Read or Write here fails at once, and the
// peer reads EOF after what was sent.
func (st *Stream) Close() error {
	if st.closed.Swap(true) {
		return nil
	}
	st.ys.SetDeadline(time.Unix(1, 0)) // wakes a blocked Read or Write
	st.ys.Close()
	return nil
}

func (st *Stream) LocalAddr() net.Addr  { return st.ys.LocalAddr() }
func (st *Stream) RemoteAddr() net.Addr { return st.ys.RemoteAddr() }

func (st *Stream) SetDeadline(t time.Time) error      { return st.ys.SetDeadline(t) }
func (st *Stream) SetReadDeadline(t time.Time) error  { return st.ys.SetReadDeadline(t) }
func (st *Stream) SetWriteDeadline(t time.Time) error { return st.ys.SetWriteDeadline(t) }
