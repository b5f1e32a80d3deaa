package gridftp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
)

// errNoZeroCopy reports that the kernel will not sendfile or splice
// between these two files: the caller moves the data through a buffer.
var errNoZeroCopy = errors.New("gridftp: no zero-copy path")

// sendFileBlock sends the next block of plan from the file f over the
// plain TCP connection c: its header, then the payload by sendfile, from
// the page cache to the socket with no copy through this process. Where
// the kernel refuses (a file it cannot sendfile from), the payload goes
// through a buffer of pool instead.
func sendFileBlock(c *net.TCPConn, f *os.File, plan *Plan, base int64, pool *BufferPool, limit int) (int, error) {
	off, n, ok := plan.NextUpTo(int64(limit))
	if !ok {
		return 0, io.EOF
	}
	return sendFileRange(c, f, off, n, base, pool)
}

// sendFileRange sends [off, off+n) of f as one block, its offset relative
// to base: by sendfile, the rest through a buffer of pool if the kernel
// refuses.
func sendFileRange(c *net.TCPConn, f *os.File, off, n, base int64, pool *BufferPool) (int, error) {
	var hdr [HeaderLen]byte
	Header{Count: uint64(n), Offset: uint64(off - base)}.Put(hdr[:])
	sent, err := sendFile(c, hdr[:], f, off, n)
	if errors.Is(err, errNoZeroCopy) {
		err = sendRest(c, f, off+sent, n-sent, pool)
	}
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return 0, fmt.Errorf("source shorter than announced: %w", io.ErrUnexpectedEOF)
	case err != nil:
		return 0, fmt.Errorf("%w: %v", ErrDataStream, err)
	}
	return int(n), nil
}

// sumPiece is how much of a block sendSummedBlock reads at a time to hash
// it: little enough to stay in the core's cache for the hash.
const sumPiece = 128 << 10

// sendSummedBlock is sendFileBlock for a source that hashes what it sends
// (a live checksum): under inOrder, so that the hash sees the file in
// order, it takes the next block and hashes it, reading it through a
// buffer of pool; then it sends the block from the file by sendfile. Were
// the file to change between the two, the receiver's sum would differ from
// this one, and the copy would fail its check rather than pass.
func sendSummedBlock(c *net.TCPConn, src FileSummer, inOrder *sync.Mutex, plan *Plan, base int64, pool *BufferPool, limit int) (int, error) {
	bp := pool.Get()
	defer pool.Put(bp)
	inOrder.Lock()
	off, n, ok := plan.NextUpTo(int64(limit))
	var err error
	if ok {
		err = src.Take((*bp)[:min(len(*bp), sumPiece)], off, n)
	}
	inOrder.Unlock()
	switch {
	case !ok:
		return 0, io.EOF
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return 0, fmt.Errorf("source shorter than announced: %w", io.ErrUnexpectedEOF)
	case err != nil:
		return 0, err
	}
	return sendFileRange(c, src.SumFile(), off, n, base, pool)
}

// sendRest writes [off, off+n) of f to c through a buffer of pool.
func sendRest(c net.Conn, f io.ReaderAt, off, n int64, pool *BufferPool) error {
	bp := pool.Get()
	defer pool.Put(bp)
	buf := *bp
	for n > 0 {
		k := min(int64(len(buf)), n)
		if m, err := f.ReadAt(buf[:k], off); int64(m) != k {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if _, err := c.Write(buf[:k]); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

// sameHost reports a connection whose two ends are on this host, where
// nothing queues between them: a sending socket's backlog is left as the
// kernel sizes it (sendBacklog is for a path to another host).
func sameHost(c *net.TCPConn) bool {
	l, lok := c.LocalAddr().(*net.TCPAddr)
	r, rok := c.RemoteAddr().(*net.TCPAddr)
	return lok && rok && (r.IP.IsLoopback() || r.IP.Equal(l.IP))
}

// plainTCP is the TCP connection a data stream is, bare: not one under
// TLS or any other wrapper, whose bytes are not the socket's.
func plainTCP(c net.Conn) (*net.TCPConn, bool) {
	tc, ok := c.(*net.TCPConn)
	return tc, ok
}
