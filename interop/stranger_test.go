//go:build interop

package interop

// Strangers on the data channels the service and its agents listen on: a
// connection from an address the transfer does not expect is closed
// before it carries a byte, and what arrives is the server's.

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/gridftp"
)

// strangerIP is where strangers connect from: loopback, so the test needs
// no network of its own, but no address any server or client of a test
// uses (they use 127.0.0.1 or a namespace's).
const strangerIP = "127.0.0.2"

// strangerWait bounds how long a stranger waits for its connection to be
// closed: far longer than a refusal takes, so only a connection that was
// taken in waits this long.
const strangerWait = 15 * time.Second

// ftpTap is a TCP proxy in front of a clear-text FTP server that shows the
// test each PORT its clients send, before the server gets it.
type ftpTap struct {
	t      *testing.T
	target string
	ln     net.Listener
	// onPort is called with the address of each PORT, which goes on to
	// the server only when it returns.
	onPort func(netip.AddrPort)
}

// startFTPTap proxies a port of 127.0.0.1 to target until the test ends.
func startFTPTap(t *testing.T, target string, onPort func(netip.AddrPort)) *ftpTap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tap := &ftpTap{t: t, target: target, ln: ln, onPort: onPort}
	t.Cleanup(func() { ln.Close() })
	go tap.serve()
	return tap
}

// Addr is the tap's address, which endpoints name as their server's.
func (tap *ftpTap) Addr() string { return tap.ln.Addr().String() }

func (tap *ftpTap) serve() {
	for {
		c, err := tap.ln.Accept()
		if err != nil {
			return
		}
		go tap.relay(c)
	}
}

// relay carries one control connection, looking at each line the client
// sends.
func (tap *ftpTap) relay(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", tap.target)
	if err != nil {
		return
	}
	defer s.Close()
	go func() {
		io.Copy(c, s)
		c.Close()
	}()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if verb, arg, _ := strings.Cut(strings.TrimSpace(line), " "); strings.EqualFold(verb, "PORT") {
			if ap, err := gridftp.ParseHostPort(arg); err == nil {
				tap.onPort(ap)
			}
		}
		if _, err := io.WriteString(s, line); err != nil {
			return
		}
	}
}

// modeEBlock is one MODE E block: its header, whose Count is the
// payload's length, and the payload.
type modeEBlock struct {
	gridftp.Header
	payload []byte
}

// block is the block of payload at offset with descriptor desc (in an EOF
// block, offset is the EOD count).
func block(desc byte, offset uint64, payload []byte) modeEBlock {
	return modeEBlock{gridftp.Header{Desc: desc, Count: uint64(len(payload)), Offset: offset}, payload}
}

// encode is the blocks as a sender puts them on a data connection.
func encode(blocks ...modeEBlock) []byte {
	var out []byte
	for _, b := range blocks {
		var h [gridftp.HeaderLen]byte
		b.Put(h[:])
		out = append(append(out, h[:]...), b.payload...)
	}
	return out
}

// intrude connects to addr from strangerIP, sends data and reports whether
// the other end closed the connection within strangerWait, having sent it
// nothing. It may run on any goroutine.
func intrude(t *testing.T, addr netip.AddrPort, data []byte) (closed bool) {
	t.Helper()
	d := net.Dialer{Timeout: strangerWait, LocalAddr: &net.TCPAddr{IP: net.ParseIP(strangerIP)}}
	c, err := d.Dial("tcp", addr.String())
	if err != nil {
		t.Errorf("the stranger cannot connect to %v: %v", addr, err)
		return false
	}
	defer c.Close()
	c.Write(data) // a refused connection may fail this, or only the read below
	c.SetReadDeadline(time.Now().Add(strangerWait))
	n, err := io.Copy(io.Discard, c)
	if n > 0 {
		t.Errorf("the stranger's connection to %v got %d bytes", addr, n)
	}
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// TestConnectRelayStranger: GCT sends a file to a connect agent; as GCT
// cannot listen as a sender, it connects to the relay's passive listener
// for the agent. A stranger connects there first, from another address,
// and sends a MODE E block that would add 24 bytes to the file: the relay
// closes its connection, and the file arrives whole, with the checksum
// not verified (nothing but the relay keeps the stranger out).
func TestConnectRelayStranger(t *testing.T) {
	needNetns(t)
	needFerry(t)
	needTools(t)
	ns := newFirewalledNS(t, "ferryRly", 47)
	svc := startConnectService(t, ns.hostIP, serviceConfig{Data: t.TempDir(),
		Args: []string{"--endpoint-networks", "0.0.0.0/0,::/0,127.0.0.0/8"}})
	c := newServiceUser(t, svc, "")
	gct := startGCTServer(t)
	const size = 5 << 20
	writeRandomFile(t, gct.Path("big.dat"), size)

	intruded := make(chan bool, 1)
	tap := startFTPTap(t, gct.Addr(), func(ap netip.AddrPort) {
		// The relay's listener for the agent, which GCT connects to once
		// this PORT reaches it: the stranger is there first.
		select {
		case intruded <- intrude(t, ap, encode(block(gridftp.DescEOD, size, []byte("INJECTED BY A STRANGER!!")))):
		default: // a later PORT (a retry): once is enough
		}
	})
	c.ok("", "endpoint", "add", "gct", "--server", "ftp://"+tap.Addr())
	a := newConnectAgent(t, ns, svc.URL(), "laptop")
	a.start(addConnectEndpoint(c, "laptop"))
	a.waitConnected(c, true)

	id := c.transfer("gct:"+epPath(gct, "big.dat"), "laptop:/big.dat", "--no-verify-checksum")
	select {
	case closed := <-intruded:
		if !closed {
			t.Errorf("the relay kept a stranger's connection to the agent's passive listener for %v", strangerWait)
		}
	case <-time.After(time.Minute):
		t.Fatal("the service sent GCT no PORT within a minute")
	}
	c.succeeded(id, 2*time.Minute)
	want, _ := os.ReadFile(gct.Path("big.dat"))
	got, err := os.ReadFile(filepath.Join(a.root, "big.dat"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the agent received %d bytes (%v); want the %d sent, and nothing of the stranger's (%v)",
			len(got), err, len(want), bytes.Contains(got, []byte("STRANGER")))
	}
}

// TestServiceListingStranger: the service lists a directory of a GCT
// endpoint; it listens for the listing (PORT), and a stranger who connects
// there first, from another address, and sends a listing of its own is
// refused: ls shows the server's files.
func TestServiceListingStranger(t *testing.T) {
	needTools(t)
	svc := startService(t, serviceConfig{})
	c := newServiceUser(t, svc, "")
	gct := startGCTServer(t)
	writeFile(t, gct.Path("lsdir/real-file.dat"), []byte("real"))

	fake := []byte("type=file;size=24;modify=20260101000000; stranger-was-here.dat\r\n")
	listing := encode(block(0, 0, fake), block(gridftp.DescEOF|gridftp.DescEOD, 1, nil))
	intruded := make(chan bool, 1)
	tap := startFTPTap(t, gct.Addr(), func(ap netip.AddrPort) {
		select {
		case intruded <- intrude(t, ap, listing):
		default:
		}
	})
	c.ok("", "endpoint", "add", "gct", "--server", "ftp://"+tap.Addr())

	out := c.ok("", "ls", "gct:"+epPath(gct, "lsdir"))
	select {
	case closed := <-intruded:
		if !closed {
			t.Errorf("the service kept a stranger's connection to its listing's data port for %v", strangerWait)
		}
	default:
		t.Fatal("the service listed without a PORT: the stranger had nowhere to go")
	}
	if !strings.Contains(out, "real-file.dat") || strings.Contains(out, "stranger") {
		t.Fatalf("ls shows:\n%s\nwant the server's real-file.dat and nothing of the stranger's", out)
	}
}
