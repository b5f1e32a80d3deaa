package gridftp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

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
