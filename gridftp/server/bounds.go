package server

import (
	"context"
	"errors"
	"ferry/internal/connlimit"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"

	"ferry/checksum"
	"ferry/gridftp"
	"ferry/stack"
	"ferry/storage"
)

// Resource bounds: no size or offset a client names or sends makes a file
// larger than Server.MaxFileSize, and a checksum hashes the data a file
// holds plus at most Server.ChecksumHoles of holes, never a sparse
// petabyte of zeros.

// checkSize refuses a size or offset past the largest file the server
// takes.
func (ss *session) checkSize(n int64) error {
	if limit, ok := ss.srv.fileSizeLimit(); ok && n > limit {
		return fmt.Errorf("%d bytes, more than %d: %w", n, limit, errTooLarge)
	}
	return nil
}

// sizeArg reads a size or offset argument of a command: a bad number gets
// usage (501), one past the largest file the reply for op.
func (ss *session) sizeArg(arg, op, usage string) (n int64, ok bool) {
	n, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || n < 0 {
		ss.reply(gridftp.CodeBadArguments, usage)
		return 0, false
	}
	if err := ss.checkSize(n); err != nil {
		ss.errorReply(op, err)
		return 0, false
	}
	return n, true
}

// sizeCapped is a file that refuses writes past limit.
type sizeCapped struct {
	storage.File
	limit int64
}

func (f sizeCapped) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fits(off, int64(len(p))); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

// FileAt is the *os.File under f, for a MODE E receiver to splice n
// bytes into at off, once they fit (gridftp.FileAt); nil for another file.
func (f sizeCapped) FileAt(off, n int64) (*os.File, error) {
	if err := f.fits(off, n); err != nil {
		return nil, err
	}
	of, _ := f.File.(*os.File)
	return of, nil
}

// fits fails a write of n bytes at off that would reach past the limit.
func (f sizeCapped) fits(off, n int64) error {
	if off+n > f.limit {
		return fmt.Errorf("write at %d+%d, past %d: %w", off, n, f.limit, errTooLarge)
	}
	return nil
}

// storageFile is the file a capWrites wrapper holds, or f itself.
func storageFile(f storage.File) storage.File {
	if c, ok := f.(sizeCapped); ok {
		return c.File
	}
	return f
}

// capWrites returns f refusing writes past the largest file the server
// takes.
func (ss *session) capWrites(f storage.File) storage.File {
	if limit, ok := ss.srv.fileSizeLimit(); ok {
		return sizeCapped{File: f, limit: limit}
	}
	return f
}

// copyCapped copies a stream-mode transfer from c to w, which writes at
// base, and fails once the data would reach past the largest file.
func (ss *session) copyCapped(w io.Writer, c net.Conn, base int64) (int64, error) {
	limit, ok := ss.srv.fileSizeLimit()
	if !ok {
		return io.Copy(w, c)
	}
	n, err := io.Copy(w, io.LimitReader(c, limit-base))
	if err != nil {
		return n, err
	}
	var one [1]byte
	if k, _ := c.Read(one[:]); k > 0 {
		return n, fmt.Errorf("stream past %d bytes: %w", limit, errTooLarge)
	}
	return n, nil
}

// sum computes alg over [off, off+n) of the file at p; n is not negative.
// A range whose holes pass Server.ChecksumHoles is refused (errTooSparse)
// before any is hashed.
func (ss *session) sum(ctx context.Context, alg, p string, off, n int64) (string, error) {
	f, err := ss.srv.FS.Open(ctx, p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if limit, ok := ss.srv.checksumHoles(); ok {
		if holes, known := holeBytes(ctx, f, off, n, limit); known && holes > limit {
			return "", fmt.Errorf("%s %d+%d: holes of more than %d bytes: %w", p, off, n, limit, errTooSparse)
		}
	}
	sum, err := checksum.Sum(ctx, f, off, n, alg)
	if err != nil && ctx.Err() != nil {
		return "", errAborted
	}
	return sum, err
}

// whence values of lseek(2) for the data and holes of a sparse file
// (Linux, the BSDs, macOS, Solaris; elsewhere Seek fails and holeBytes
// cannot tell).
const (
	seekData = 3
	seekHole = 4
)

// holeBytes counts the bytes of holes in [off, off+n) of f, stopping once
// they pass limit. known is false when f cannot tell (not a local file,
// or a system without SEEK_DATA). Each step passes over at least one
// block of hole, so the count costs at most limit/4096 steps.
func holeBytes(ctx context.Context, f storage.File, off, n, limit int64) (holes int64, known bool) {
	of, ok := f.(*os.File)
	if !ok {
		return 0, false
	}
	end := off + n
	for pos, step := off, 0; pos < end && holes <= limit; step++ {
		if step%1024 == 1023 && ctx.Err() != nil {
			return 0, false // the checksum reports the abort
		}
		data, err := of.Seek(pos, seekData)
		if errors.Is(err, syscall.ENXIO) {
			data = end // no data from pos on
		} else if err != nil {
			return 0, false
		}
		if data >= end {
			return holes + end - pos, true
		}
		holes += data - pos
		if pos, err = of.Seek(data, seekHole); err != nil {
			return 0, false
		}
	}
	return holes, true
}

// errForwardBusy is a transfer whose connections to other servers would
// pass what the server or the client's address has left.
var errForwardBusy = errors.New("too many connections to other servers")

// reserveFanout counts the connections a layer of the session is about to
// open to other servers for one transfer (stack.Env.Reserve): streams
// data streams against MaxForwardStreams (one transfer) and
// MaxForwardTotal (all sessions), and children control connections, each
// as a session of the client's address, against MaxSessions and
// MaxSessionsPerAddress: a client reaches no further through a hop than
// it could itself.
func (ss *session) reserveFanout(children, streams int) (release func(), err error) {
	s := ss.srv
	if limit, ok := s.forwardStreams(); ok && streams > limit {
		return nil, refuseFanout(gridftp.ErrTooManyStreams, "%d data streams to other servers; this server opens at most %d for one transfer.", streams, limit)
	}
	if err := s.takeFanout(ss.addr, children, streams); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { s.giveFanout(ss.addr, children, streams) }) }, nil
}

// takeFanout counts children and streams in for a session from addr, or
// says which limit they would pass.
func (s *Server) takeFanout(addr string, children, streams int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit, ok := s.forwardTotal(); ok && s.forwards+streams > limit {
		return refuseFanout(errForwardBusy, "%d more data streams to other servers would pass this server's limit of %d at once; try again later.", streams, limit)
	}
	perAddr, _ := s.perAddressLimit() // 0: none
	switch err := s.conns.TakeN(addr, children, s.MaxSessions, perAddr); {
	case errors.Is(err, connlimit.ErrTotal):
		return refuseFanout(errForwardBusy, "%d more connections to other servers would pass this server's limit of %d sessions; try again later.", children, s.MaxSessions)
	case errors.Is(err, connlimit.ErrAddress):
		return refuseFanout(errForwardBusy, "%d more connections to other servers would pass your address's limit of %d sessions; try again later.", children, perAddr)
	}
	s.children += children
	s.forwards += streams
	return nil
}

// refuseFanout is a refusal of reserveFanout: its text for the client's
// reply, its kind for the reply's code.
func refuseFanout(kind error, format string, args ...any) error {
	return &stack.ShownError{Text: fmt.Sprintf(format, args...), Err: kind}
}

// giveFanout counts what takeFanout took out again.
func (s *Server) giveFanout(addr string, children, streams int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns.GiveN(addr, children)
	s.children -= children
	s.forwards -= streams
}
