//go:build !linux

package gridftp

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// sendFile: elsewhere than on Linux the payload goes through a buffer.
func sendFile(c *net.TCPConn, hdr []byte, f *os.File, off, n int64) (int64, error) {
	if _, err := c.Write(hdr); err != nil {
		return 0, err
	}
	return 0, errNoZeroCopy
}

// splicer is Linux's; elsewhere there is none.
type splicer struct{}

func newSplicer() (*splicer, error) { return nil, errNoZeroCopy }

func (sp *splicer) close() {}

func (sp *splicer) splice(c *net.TCPConn, f *os.File, dst io.WriterAt, buf []byte, off, n int64) (moved, taken int64, err error) {
	return 0, 0, errNoZeroCopy
}

// setLowat is Linux's; elsewhere a reader wakes for every segment.
func setLowat(fd uintptr, n int) int { return 0 }

// streamRTT: elsewhere than on Linux the round trip is not known.
func streamRTT(net.Conn) time.Duration { return 0 }

// streamAcked: nor what the other end acknowledged.
func streamAcked(net.Conn) (int64, bool) { return 0, false }

// holdBack: elsewhere than on Linux the socket takes what fits.
func holdBack(net.Conn, int) {}

// congestionControl: elsewhere than on Linux it is not known.
func congestionControl(net.Conn) string { return "" }

// DataControl: elsewhere than on Linux the system's congestion control
// stands.
func DataControl(network, address string, c syscall.RawConn) error { return nil }

// windowGauge: elsewhere than on Linux a stream's window is not known,
// and every block is whole.
type windowGauge struct{}

func newWindowGauge(*net.TCPConn) *windowGauge { return nil }

func (*windowGauge) window() int { return 0 }
