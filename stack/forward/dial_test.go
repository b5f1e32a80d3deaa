package forward

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/gridftp/server"
)

// syncBuffer is a log a server writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fakeChild is a child that speaks just enough FTP for a hop to start a
// STOR on it, and answers PASV with an address of the test's choosing:
// what a hostile server a client names as a destination can do.
type fakeChild struct {
	addr string
	pasv netip.AddrPort
	// stored is closed once the STOR's data reached where PASV pointed
	// (listenSink); nil when nothing listens there.
	stored <-chan struct{}
}

// startFakeChild serves fake children on 127.0.0.1 that answer PASV with
// pasv.
func startFakeChild(t *testing.T, pasv netip.AddrPort, stored <-chan struct{}) *fakeChild {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f := &fakeChild{addr: ln.Addr().String(), pasv: pasv, stored: stored}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

// serve answers one control connection until it ends.
func (f *fakeChild) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(bound))
	fmt.Fprint(c, "220 fake\r\n")
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		verb, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch strings.ToUpper(verb) {
		case "USER":
			fmt.Fprint(c, "331 password\r\n")
		case "PASS":
			fmt.Fprint(c, "230 in\r\n")
		case "FEAT":
			fmt.Fprint(c, "211-Features:\r\n PARALLEL\r\n211 End.\r\n")
		case "PASV":
			a := f.pasv.Addr().As4()
			fmt.Fprintf(c, "227 Entering Passive Mode (%d,%d,%d,%d,%d,%d)\r\n", a[0], a[1], a[2], a[3], f.pasv.Port()>>8, f.pasv.Port()&0xff)
		case "STOR":
			fmt.Fprint(c, "150 Opening data connection.\r\n")
			if f.stored != nil { // else the hop gives up on this child
				<-f.stored
				fmt.Fprint(c, "226 Transfer complete.\r\n")
			}
		case "CKSM":
			fmt.Fprint(c, "500 no checksums here\r\n")
		default:
			fmt.Fprint(c, "200 OK.\r\n")
		}
	}
}

// listenSink listens on addr and counts the bytes the first connection to
// it brings; done is closed when it brought want or ended (a MODE E
// sender keeps its streams open after the file).
func listenSink(t *testing.T, addr string, want int) (ap netip.AddrPort, got func() int, done <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skip("cannot listen on", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	n := 0
	ended := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(bound))
		buf := make([]byte, 64<<10)
		var once sync.Once
		defer once.Do(func() { close(ended) })
		for {
			k, err := c.Read(buf)
			mu.Lock()
			n += k
			all := n >= want
			mu.Unlock()
			if all {
				once.Do(func() { close(ended) })
			}
			if err != nil {
				return
			}
		}
	}()
	return ln.Addr().(*net.TCPAddr).AddrPort(), func() int { mu.Lock(); defer mu.Unlock(); return n }, ended
}

// TestChildDataOutsideTargetPolicy: a child's answer to PASV is where the
// hop connects its data streams, so it passes the server's target policy
// as a PORT does. A fake child on the client's address (which the policy
// allows) points the hop at another address: a port of this host the
// policy does not allow (the test listens there, and must get nothing),
// a system port, a link-local or cloud metadata address (refused before
// any connection is tried, never reached off this host). The hop drops
// the child and names it; its own copy is whole.
func TestChildDataOutsideTargetPolicy(t *testing.T) {
	data := payload(1 << 20)
	// Only the client's own address and 192.0.2.0/24: 127.0.0.2 is out.
	allowOnly := func(s *server.Server) {
		s.TargetPolicy.Allow = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	}
	for _, tc := range []struct {
		name   string
		pasv   string // "" for a listener of the test's on 127.0.0.2
		policy func(*server.Server)
		why    string // in the hop's log
	}{
		{"another loopback address", "", allowOnly, "outside the networks"},
		{"a system port", "127.0.0.2:80", func(*server.Server) {}, "port 80 is a system port"},
		{"link-local", "169.254.1.1:8080", func(*server.Server) {}, "link-local"},
		{"cloud metadata", "169.254.169.254:80", func(*server.Server) {}, "port 80 is a system port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log syncBuffer
			a := start(t, func(s *server.Server) {
				tc.policy(s)
				s.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
			})
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("the hop's log:\n%s", log.String())
				}
			})
			got := func() int { return 0 }
			var pasv netip.AddrPort
			var stored <-chan struct{}
			if tc.pasv == "" {
				pasv, got, stored = listenSink(t, "127.0.0.2:0", len(data))
			} else {
				pasv = netip.MustParseAddrPort(tc.pasv)
			}
			child := startFakeChild(t, pasv, stored)
			url := "ftp://" + child.addr + "/f?"
			names(t, upload(t, a, mcStack("cc=1", url), "f", bytes.NewReader(data), int64(len(data))), url)
			if n := got(); n > 0 {
				t.Errorf("the hop sent %d bytes to %v, where its target policy forbids", n, pasv)
			}
			if !strings.Contains(log.String(), tc.why) {
				t.Errorf("the hop's log does not say %q", tc.why)
			}
			if !bytes.Equal(a.content(t, "f"), data) {
				t.Error("the hop's own copy differs")
			}
		})
	}
}

// countingListener counts the connections made to it and answers none.
func countingListener(t *testing.T) (addr string, count func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			defer c.Close() // held open, unanswered, until the test ends
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// TestFanoutCaps: a transfer whose fan-out passes the server's caps is
// refused with a clear reply before the hop connects to any child or
// writes anything: more data streams to children than one transfer may
// open (cc × P, one STOR with cc=330;P=64 once opened some 16,000
// connections), more than the server has left for all its hops, or more
// children than the client's address has sessions left.
func TestFanoutCaps(t *testing.T) {
	for _, tc := range []struct {
		name      string
		configure func(*server.Server)
		opts      string
		children  int
		code      int
		want      string
	}{
		{"one transfer", func(*server.Server) {}, "cc=5;P=64", 5, 501,
			"320 data streams to other servers; this server opens at most 256 for one transfer"},
		{"one transfer, the operator's cap", func(s *server.Server) { s.MaxForwardStreams = 4 }, "cc=3;P=2", 3, 501,
			"6 data streams to other servers; this server opens at most 4 for one transfer"},
		{"the server", func(s *server.Server) { s.MaxForwardTotal = 4 }, "cc=2;P=4", 2, 451,
			"8 more data streams to other servers would pass this server's limit of 4 at once"},
		{"sessions of the address", func(s *server.Server) { s.MaxSessionsPerAddress = 3 }, "cc=3", 3, 451,
			"3 more connections to other servers would pass your address's limit of 3 sessions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := start(t, tc.configure)
			addr, count := countingListener(t)
			var urls []string
			for i := range tc.children {
				urls = append(urls, fmt.Sprintf("ftp://%s/f%d?", addr, i))
			}
			data := payload(1 << 20)
			err := upload(t, a, mcStack(tc.opts, urls...), "f", bytes.NewReader(data), int64(len(data)))
			if text := shown(t, err); !strings.Contains(text, tc.want) {
				t.Errorf("reply does not say %q", tc.want)
			}
			if ge, _ := errors.AsType[*gridftp.Error](err); ge.Reply.Code != tc.code {
				t.Errorf("reply code %d, want %d", ge.Reply.Code, tc.code)
			}
			if n := count(); n > 0 {
				t.Errorf("the hop connected %d times to its children", n)
			}
			if fileExists(filepath.Join(a.root, "f")) {
				t.Error("the refused transfer made the hop's own file")
			}
		})
	}
}

// TestFanoutReleased: what a transfer took of the server's caps is given
// back when it ends: transfers one after the other, each at the cap, all
// succeed.
func TestFanoutReleased(t *testing.T) {
	a := start(t, func(s *server.Server) { s.MaxForwardTotal = 2 })
	b := start(t)
	data := payload(1 << 20)
	for i := range 3 {
		if err := upload(t, a, mcStack("cc=1;P=2", b.url("f", "")), "f", bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatalf("transfer %d: %v", i, err)
		}
	}
	if !bytes.Equal(b.content(t, "f"), data) {
		t.Error("the child's copy differs")
	}
}

// listenEOF listens on 127.0.0.1 for one MODE E stream and reads it; eof is
// closed once the sender's EOF came, which a hop sends its child when its
// sink is closed, after the last block.
func listenEOF(t *testing.T) (ap netip.AddrPort, eof <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	came := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(bound))
		r := bufio.NewReader(c)
		for {
			h, err := gridftp.ReadHeader(r)
			if err != nil {
				return
			}
			if h.Desc&gridftp.DescEOF != 0 {
				close(came)
			}
			if _, err := io.CopyN(io.Discard, r, int64(h.Count)); err != nil {
				return
			}
		}
	}()
	return ln.Addr().(*net.TCPAddr).AddrPort(), came
}

// TestServerCloseWhileHopWaits: a server that closes its sessions (as
// SIGTERM does once its drain is over) while a hop waits for a child's
// reply after the data ends that session at once, instead of waiting
// for the child as long as the child may take (ReplyTimeout and more).
func TestServerCloseWhileHopWaits(t *testing.T) {
	a := start(t)
	pasv, eof := listenEOF(t)
	never := make(chan struct{}) // the child takes the data and never answers the STOR
	t.Cleanup(func() { close(never) })
	child := startFakeChild(t, pasv, never)
	data := payload(1 << 20)
	put := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		c, err := client.Dial(ctx, a.addr)
		if err != nil {
			put <- err
			return
		}
		defer c.Close()
		if err = c.Login(ctx, "anonymous", "x@"); err == nil {
			err = c.SetDiskStack(ctx, mcStack("cc=1", "ftp://"+child.addr+"/f?"))
		}
		if err == nil {
			_, err = c.Put(ctx, "/f", bytes.NewReader(data), 0, int64(len(data)))
		}
		put <- err
	}()
	select {
	case <-eof: // the hop's sink is closed: it waits for the child's reply
	case err := <-put:
		t.Fatalf("the upload ended before the hop sent its child the EOF: %v", err)
	case <-time.After(bound):
		t.Fatalf("the hop sent its child no EOF within %v", bound)
	}
	closed := make(chan struct{})
	go func() {
		a.srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("the server's Close did not end within 20 s the session of a hop that waits for its child")
	}
	<-put
}
