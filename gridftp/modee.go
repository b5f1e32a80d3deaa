package gridftp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// MODE E block descriptor bits (GFD.20 section 3.4).
const (
	DescEOR       byte = 0x80 // end of record (unused)
	DescEOF       byte = 0x40 // end of file; the offset field holds the EOD count
	DescErrors    byte = 0x20 // suspected errors (unused)
	DescRestart   byte = 0x10 // restart marker (unused)
	DescEOD       byte = 0x08 // end of data on this stream
	DescWillClose byte = 0x04 // the sender closes this stream after this block
)

// HeaderLen is the size of a MODE E block header.
const HeaderLen = 17

// Header is one MODE E block header: descriptor, payload byte count and
// offset. In an EOF block Offset is the number of EODs the receiver must see.
type Header struct {
	Desc   byte
	Count  uint64
	Offset uint64
}

// ErrBadHeader reports a MODE E header no peer can have meant.
var ErrBadHeader = errors.New("gridftp: bad MODE E block header")

// Put encodes h into b, which must hold HeaderLen bytes.
func (h Header) Put(b []byte) {
	b[0] = h.Desc
	binary.BigEndian.PutUint64(b[1:9], h.Count)
	binary.BigEndian.PutUint64(b[9:17], h.Offset)
}

// ParseHeader decodes and checks a header: counts and offsets must fit in
// an int64 together, and an EOF block carries no payload.
func ParseHeader(b []byte) (Header, error) {
	h := Header{Desc: b[0], Count: binary.BigEndian.Uint64(b[1:9]), Offset: binary.BigEndian.Uint64(b[9:17])}
	switch {
	case h.Count > math.MaxInt64 || h.Offset > math.MaxInt64 || h.Count+h.Offset > math.MaxInt64:
		return h, fmt.Errorf("%w: count %d offset %d", ErrBadHeader, h.Count, h.Offset)
	case h.Desc&DescEOF != 0 && h.Count != 0:
		return h, fmt.Errorf("%w: EOF block with %d payload bytes", ErrBadHeader, h.Count)
	case h.Desc&DescEOF != 0 && h.Offset > MaxStreams:
		return h, fmt.Errorf("%w: EOD count %d", ErrBadHeader, h.Offset)
	}
	return h, nil
}

// ReadHeader reads one header from r.
func ReadHeader(r io.Reader) (Header, error) {
	var b [HeaderLen]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return Header{}, err
	}
	return ParseHeader(b[:])
}

// MaxStreams bounds the parallel data streams of one transfer.
const MaxStreams = 1024
