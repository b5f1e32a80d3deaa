package gridftp

import (
	"bufio"
	"errors"
	"net"
	"time"
)

// ErrDataStream reports a MODE E data stream that failed: cut, reset, or
// silent for longer than allowed.
var ErrDataStream = errors.New("gridftp: data stream failed")

// ErrTooManyStreams reports a sender that opened more streams than the
// receiver takes (Receiver.MaxStreams).
var ErrTooManyStreams = errors.New("gridftp: too many data streams")

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

// Close ends a stream the way a sender shrinking its set does: a header
// with the will-close bit, then the connection closes.
func (s *Stream) Close() error {
	var hdr [HeaderLen]byte
	Header{Desc: DescWillClose}.Put(hdr[:])
	s.Conn.SetWriteDeadline(time.Now().Add(time.Second))
	s.Conn.Write(hdr[:])
	return s.Conn.Close()
}
