package gridftp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sendFile writes hdr to c, then [off, off+n) of f by sendfile. hdr goes
// with MSG_MORE, so that it shares a segment with the payload. It returns
// the payload bytes sent; errNoZeroCopy when the kernel refuses
// sendfile from f (then the rest is the caller's), io.ErrUnexpectedEOF
// when f ends first.
func sendFile(c *net.TCPConn, hdr []byte, f *os.File, off, n int64) (sent int64, err error) {
	sock, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	file, err := f.SyscallConn()
	if err != nil {
		return 0, errNoZeroCopy
	}
	var opErr error
	cerr := file.Control(func(fd uintptr) {
		err = sock.Write(func(s uintptr) bool {
			for len(hdr) > 0 {
				k, e := unix.SendmsgN(int(s), hdr, nil, nil, unix.MSG_MORE)
				if e == unix.EINTR {
					continue
				}
				if e != nil {
					opErr = e
					return e != unix.EAGAIN
				}
				hdr = hdr[k:]
			}
			for sent < n {
				k, e := unix.Sendfile(int(s), int(fd), &off, int(min(n-sent, 1<<30)))
				if k > 0 {
					sent += int64(k)
				}
				switch {
				case e == unix.EINTR:
					continue
				case e == unix.EAGAIN:
					opErr = nil
					return false
				case e == unix.EINVAL || e == unix.ENOSYS || e == unix.EOPNOTSUPP:
					opErr = errNoZeroCopy
					return true
				case e != nil:
					opErr = e
					return true
				case k == 0:
					opErr = io.ErrUnexpectedEOF
					return true
				}
			}
			opErr = nil
			return true
		})
	})
	if cerr != nil {
		return sent, cerr
	}
	if err != nil {
		return sent, err
	}
	if errors.Is(opErr, unix.EAGAIN) {
		opErr = nil
	}
	return sent, opErr
}

// spliceMax is the pipe a splicer asks for: one MODE E block, so that a
// block goes in two splices when the socket has it all.
const spliceMax = 1 << 20

// splicer moves payload from a socket into a file through a pipe of its
// own: splice(2) from the socket hands the pipe the socket's pages, and
// splice(2) into the file copies them once, into the page cache, with no
// copy through this process.
type splicer struct {
	r, w int // the pipe's ends
	size int // its capacity
}

// newSplicer makes a splicer, or returns errNoZeroCopy.
func newSplicer() (*splicer, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, errNoZeroCopy
	}
	sp := &splicer{r: p[0], w: p[1], size: 64 << 10}
	if n, err := unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, spliceMax); err == nil {
		sp.size = n
	}
	return sp, nil
}

// close closes the pipe.
func (sp *splicer) close() {
	unix.Close(sp.r)
	unix.Close(sp.w)
}

// splice moves up to n bytes (at most the pipe's capacity) from c into f
// at off and returns how many it moved and how many it took from c: as
// many, unless f failed, when what f did not take is left in the pipe. A
// failure of c (cut, or ended first) is an ErrDataStream. When f will not
// take a splice, what the pipe holds is written to dst at off through buf
// instead, counted, and the error is errNoZeroCopy: the caller goes on
// through buffers.
func (sp *splicer) splice(c *net.TCPConn, f *os.File, dst io.WriterAt, buf []byte, off, n int64) (moved, taken int64, err error) {
	sock, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var got int64
	var opErr error
	err = sock.Read(func(s uintptr) bool {
		for {
			got, opErr = unix.Splice(int(s), nil, sp.w, nil, int(min(n, int64(sp.size))), unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			if opErr != unix.EINTR {
				return opErr != unix.EAGAIN
			}
		}
	})
	switch {
	case err != nil:
		return 0, 0, fmt.Errorf("%w: cut inside a block: %v", ErrDataStream, err)
	case opErr != nil:
		return 0, 0, fmt.Errorf("%w: cut inside a block: %v", ErrDataStream, opErr)
	case got <= 0:
		return 0, 0, fmt.Errorf("%w: cut inside a block: %v", ErrDataStream, io.ErrUnexpectedEOF)
	}
	file, err := f.SyscallConn()
	if err != nil {
		m, err := sp.drain(dst, buf, off, int(got))
		return m, got, err
	}
	left := got
	var werr error
	cerr := file.Control(func(fd uintptr) {
		for left > 0 {
			k, e := unix.Splice(sp.r, nil, int(fd), &off, int(left), unix.SPLICE_F_MOVE)
			if e == unix.EINTR {
				continue
			}
			if e != nil || k <= 0 {
				werr = e
				return
			}
			left -= k
		}
	})
	if left == 0 {
		return got, got, nil
	}
	if cerr == nil && werr != nil && !errors.Is(werr, unix.EINVAL) && !errors.Is(werr, syscall.EOPNOTSUPP) {
		return got - left, got, &os.PathError{Op: "write", Path: f.Name(), Err: werr}
	}
	m, err := sp.drain(dst, buf, off, int(left))
	return got - left + m, got, err
}

// drain writes the n bytes the pipe holds to dst at off through buf and
// returns them counted, with errNoZeroCopy, or the error that stopped it.
func (sp *splicer) drain(dst io.WriterAt, buf []byte, off int64, n int) (int64, error) {
	var done int64
	for n > 0 {
		k, err := unix.Read(sp.r, buf[:min(len(buf), n)])
		if err == unix.EINTR {
			continue
		}
		if err != nil || k <= 0 {
			return done, errors.Join(errors.New("gridftp: splice pipe lost data"), err)
		}
		if _, err := dst.WriteAt(buf[:k], off); err != nil {
			return done, err
		}
		off, n, done = off+int64(k), n-k, done+int64(k)
	}
	return done, errNoZeroCopy
}

// setLowat sets the SO_RCVLOWAT of the socket fd to n bytes, kept to at
// most an eighth of its receive buffer (so that the window always lets
// that much in), and returns the value set; 0 when it could not.
func setLowat(fd uintptr, n int) int {
	if n > 1 {
		buf, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		if err != nil {
			return 0
		}
		n = max(1, min(n, buf/8))
	}
	if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, n) != nil {
		return 0
	}
	return n
}

// tcpInfo is the kernel's TCP_INFO of a data stream's TCP connection.
func tcpInfo(c net.Conn) (*unix.TCPInfo, bool) {
	tc, ok := TCPConn(c)
	if !ok {
		return nil, false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil, false
	}
	var info *unix.TCPInfo
	rc.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	return info, err == nil && info != nil
}

// streamRTT is the smoothed round trip of a data stream's TCP
// connection; 0 when it has none.
func streamRTT(c net.Conn) time.Duration {
	if info, ok := tcpInfo(c); ok {
		return time.Duration(info.Rtt) * time.Microsecond
	}
	return 0
}

// streamAcked is how many bytes the other end of a data stream's TCP
// connection has acknowledged (what it received, not what sits in the
// send buffer); false when that is not known.
func streamAcked(c net.Conn) (int64, bool) {
	if info, ok := tcpInfo(c); ok {
		return int64(info.Bytes_acked), true
	}
	return 0, false
}

// holdBack makes a data stream's socket take more data only while what
// it holds unsent is under n bytes (TCP_NOTSENT_LOWAT).
func holdBack(c net.Conn, n int) {
	tc, ok := TCPConn(c)
	if !ok {
		return
	}
	if rc, err := tc.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, n)
		})
	}
}

// congestionControl names a data stream's TCP congestion control; "" when
// it is not known.
func congestionControl(c net.Conn) string {
	tc, ok := TCPConn(c)
	if !ok {
		return ""
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return ""
	}
	var name string
	rc.Control(func(fd uintptr) {
		name, _ = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	})
	return name
}

// DataControl is the Control of a net.Dialer or net.ListenConfig that
// makes data connections. A socket to or on a loopback address gets a
// congestion control that does not pace what it sends (cubic, else reno),
// before it connects: one that paces (bbr, a common default) sends each
// few segments at a timer's expiry, which on loopback, where nothing
// queues, only costs (2 GiB into tmpfs, median of 7: 1.39 s sent under
// bbr, 1.02 s under cubic; bench/LOG.md, issue 17). Set after the
// handshake it would be too late: the socket keeps pacing. Elsewhere the
// system's choice stands. It never fails a dial or a listen.
func DataControl(network, address string, c syscall.RawConn) error {
	if !loopbackAddress(address) {
		return nil
	}
	c.Control(func(fd uintptr) {
		for _, name := range unpaced {
			if unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, name) == nil {
				return
			}
		}
	})
	return nil
}

// loopbackAddress reports a "host:port" whose host is a loopback IP.
func loopbackAddress(address string) bool {
	ap, err := netip.ParseAddrPort(address)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// unpaced are the congestion controls DataControl tries, in turn: ones
// that do not pace, of which the kernel always has reno.
var unpaced = []string{"cubic", "reno"}

// windowGauge reads a sending stream's congestion window (TCP_INFO) into
// storage of its own, so that a read costs one system call and no
// allocation.
type windowGauge struct {
	rc   syscall.RawConn
	info unix.TCPInfo
	ok   bool
	read func(fd uintptr) // g.readFd, bound once
}

// newWindowGauge is a gauge of c's window; nil when c cannot say.
func newWindowGauge(c *net.TCPConn) *windowGauge {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	g := &windowGauge{rc: rc}
	g.read = g.readFd
	return g
}

func (g *windowGauge) readFd(fd uintptr) {
	n := uint32(unix.SizeofTCPInfo)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.IPPROTO_TCP, unix.TCP_INFO,
		uintptr(unsafe.Pointer(&g.info)), uintptr(unsafe.Pointer(&n)), 0)
	g.ok = e == 0
}

// window is the stream's congestion window in bytes; 0 when not known.
func (g *windowGauge) window() int {
	if g == nil || g.rc.Control(g.read) != nil || !g.ok {
		return 0
	}
	return int(g.info.Snd_cwnd) * int(g.info.Snd_mss)
}
