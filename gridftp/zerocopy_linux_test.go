package gridftp

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/md5"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// sliceAt is an io.WriterAt over a byte slice.
type sliceAt []byte

func (s sliceAt) WriteAt(p []byte, off int64) (int, error) { return copy(s[off:], p), nil }

// TestSplicerDrain: when the file refuses a splice, what the pipe holds
// is written at its offset through the buffer, counted, and the caller
// told to go on through buffers (errNoZeroCopy).
func TestSplicerDrain(t *testing.T) {
	sp, err := newSplicer()
	if err != nil {
		t.Fatal(err)
	}
	defer sp.close()
	data := bytes.Repeat([]byte("ferry"), 10_000)
	if n, err := unix.Write(sp.w, data); err != nil || n != len(data) {
		t.Fatalf("pipe write: %d, %v", n, err)
	}
	dst := make(sliceAt, 100+len(data))
	n, err := sp.drain(dst, make([]byte, 4096), 100, len(data))
	if n != int64(len(data)) || !errors.Is(err, errNoZeroCopy) {
		t.Fatalf("drain = %d, %v; want %d, errNoZeroCopy", n, err, len(data))
	}
	if !bytes.Equal(dst[100:], data) {
		t.Error("the destination does not hold what the pipe held")
	}
}

// TestSendFileBlock: a block sent by sendfile arrives as a MODE E header
// and the file's bytes at the block's offset, relative to base; a file
// shorter than the plan fails the block.
func TestSendFileBlock(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 100_000) // 1.6 MB
	f := TempFile(t, "src", data)
	tests := []struct {
		name          string
		start, end    int64
		base          int64
		limit         int
		wantErr       string
		wantN, wantAt int64
	}{
		{name: "a block", start: 1000, end: 1000 + 1<<20, base: 500, wantN: 1 << 20, wantAt: 500},
		{name: "a block cut to the window", start: 1000, end: 1000 + 1<<20, base: 500, limit: 64 << 10, wantN: 64 << 10, wantAt: 500},
		{name: "past the end", start: int64(len(data)) - 10, end: int64(len(data)) + 10, wantErr: "source shorter than announced"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, s := tcpPair(t)
			got := make(chan []byte)
			go func() { b, _ := io.ReadAll(s); got <- b }()
			plan := NewPlan([]Range{{Start: tt.start, End: tt.end}}, 2<<20)
			limit := cmp.Or(tt.limit, math.MaxInt)
			n, err := sendFileBlock(c.(*net.TCPConn), f, plan, tt.base, NewBufferPool(2<<20), limit)
			c.Close()
			b := <-got
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || int64(n) != tt.wantN {
				t.Fatalf("sendFileBlock = %d, %v; want %d", n, err, tt.wantN)
			}
			h, err := ReadHeader(bufio.NewReader(bytes.NewReader(b)))
			if err != nil || h.Count != uint64(tt.wantN) || h.Offset != uint64(tt.wantAt) {
				t.Fatalf("header %+v (%v), want count %d at %d", h, err, tt.wantN, tt.wantAt)
			}
			if end := tt.start + tt.wantN; !bytes.Equal(b[HeaderLen:], data[tt.start:end]) {
				t.Errorf("payload of %d bytes is not the file's [%d, %d)", len(b)-HeaderLen, tt.start, end)
			}
			if off, n, ok := plan.Next(); tt.wantN < tt.end-tt.start && (!ok || off != tt.start+tt.wantN || n != tt.end-off) {
				t.Errorf("after the block the plan hands out %d+%d (%v), want the rest from %d", off, n, ok, tt.start+tt.wantN)
			}
		})
	}
}

// TestHoldBack: a sending stream's socket is told to take data only while
// it holds less than sendBacklog unsent (TCP_NOTSENT_LOWAT), also under
// TLS; and the round trip, the acknowledged bytes and the congestion
// control of a stream are read from the kernel.
func TestHoldBack(t *testing.T) {
	c, s := tcpPair(t)
	holdBack(wrapped{c}, sendBacklog)
	rc, _ := c.(*net.TCPConn).SyscallConn()
	var got int
	var err error
	rc.Control(func(fd uintptr) { got, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT) })
	if err != nil || got != sendBacklog {
		t.Fatalf("TCP_NOTSENT_LOWAT = %d, %v; want %d", got, err, sendBacklog)
	}
	payload := bytes.Repeat([]byte("x"), 100_000)
	c.Write(payload)
	io.ReadFull(s, make([]byte, len(payload)))
	if n, ok := streamAcked(wrapped{c}); !ok || n < int64(len(payload)) || n > int64(len(payload))+1 { // the SYN counts one
		t.Errorf("streamAcked = %d, %v; want %d", n, ok, len(payload))
	}
	if rtt := streamRTT(c); rtt <= 0 {
		t.Errorf("streamRTT = %v", rtt)
	}
	// Only a loss-based congestion control's streams grow.
	for _, cc := range []struct {
		name string
		grow bool
	}{{"reno", true}, {"bbr", false}} {
		var err error
		rc.Control(func(fd uintptr) { err = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc.name) })
		if err != nil {
			t.Logf("%s: %v (not allowed here)", cc.name, err)
			continue
		}
		if got := lossBound(wrapped{c}); got != cc.grow || congestionControl(c) != cc.name {
			t.Errorf("under %s (read %q): lossBound = %v, want %v", cc.name, congestionControl(c), got, cc.grow)
		}
	}
}

// TestWindowGauge: a stream's congestion window is read from the kernel
// (at least the initial window of 10 segments), without allocating.
func TestWindowGauge(t *testing.T) {
	c, s := tcpPair(t)
	payload := bytes.Repeat([]byte("x"), 100_000)
	c.Write(payload)
	io.ReadFull(s, make([]byte, len(payload)))
	g := newWindowGauge(c.(*net.TCPConn))
	info, err := unix.GetsockoptTCPInfo(fd(t, c), unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := g.window(), int(info.Snd_cwnd*info.Snd_mss); got != want || got < 10*int(info.Snd_mss) {
		t.Errorf("window = %d, want cwnd × mss = %d (%d × %d)", got, want, info.Snd_cwnd, info.Snd_mss)
	}
	if n := testing.AllocsPerRun(100, func() { g.window() }); n != 0 {
		t.Errorf("a reading allocates %v times", n)
	}
	var none *windowGauge
	if none.window() != 0 {
		t.Error("no gauge reads a window")
	}
}

// fd is c's descriptor, for reading what the kernel says of it.
func fd(t *testing.T, c net.Conn) int {
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	rc.Control(func(f uintptr) { n = int(f) })
	return n
}

// wrapped is a connection under another layer (as TLS is), which names
// the one below.
type wrapped struct{ net.Conn }

func (w wrapped) NetConn() net.Conn { return w.Conn }

// TestDataControl: a data socket on loopback sends under a congestion
// control that does not pace, whatever the dialer or listener chose before
// (bbr here, where the kernel has it), in either direction; a socket to
// another host keeps what it had.
func TestDataControl(t *testing.T) {
	for _, tt := range []struct {
		address string
		want    bool
	}{
		{"127.0.0.1:2811", true},
		{"127.0.0.9:0", true},
		{"[::1]:2811", true},
		{"[::ffff:127.0.0.1]:2811", true},
		{"192.0.2.7:2811", false},
		{"[2001:db8::1]:2811", false},
		{"localhost:2811", false}, // names are resolved before a dial's Control
		{"", false},
	} {
		if got := loopbackAddress(tt.address); got != tt.want {
			t.Errorf("loopbackAddress(%q) = %v, want %v", tt.address, got, tt.want)
		}
	}

	// pacing first chooses bbr, as a system whose default it is would.
	pacing := func(network, address string, c syscall.RawConn) error {
		c.Control(func(fd uintptr) { unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, "bbr") })
		return DataControl(network, address, c)
	}
	lc := net.ListenConfig{Control: pacing}
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := net.Dialer{Control: pacing}
	a, err := d.DialContext(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for side, c := range map[string]net.Conn{"dialed": a, "accepted": b} {
		if got := congestionControl(c); !slices.Contains(unpaced, got) {
			t.Errorf("%s loopback socket sends under %q, want one of %q", side, got, unpaced)
		}
	}

	// To another host the choice stands: a socket about to dial out.
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "socket")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var before, after string
	rc.Control(func(fd uintptr) { before, _ = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION) })
	DataControl("tcp4", "192.0.2.7:2811", rc)
	rc.Control(func(fd uintptr) { after, _ = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION) })
	if before != after {
		t.Errorf("a socket to another host went from %q to %q", before, after)
	}
}

// summer is a FileSummer over a file that hashes what Take reads, as a
// live checksum does, and then spoils the buffer it read through: a block
// sent from that buffer would arrive spoiled.
type summer struct {
	*os.File
	h       hash.Hash
	next    int64
	biggest int
}

func (s *summer) ReadsInOrder()     {}
func (s *summer) SumFile() *os.File { return s.File }
func (s *summer) Take(p []byte, off, n int64) error {
	if off != s.next {
		return fmt.Errorf("take at %d, want %d", off, s.next)
	}
	s.biggest = max(s.biggest, len(p))
	for n > 0 {
		k := min(int64(len(p)), n)
		if _, err := s.ReadAt(p[:k], off); err != nil {
			return err
		}
		s.h.Write(p[:k])
		clear(p[:k])
		off, n, s.next = off+k, n-k, off+k
	}
	return nil
}

// TestSendSummedBlock: a hashed file's blocks go out by sendfile, not
// from the buffer they were hashed through (which the summer spoils), in
// pieces of at most sumPiece, and the hash covers the range in order; a
// file shorter than the plan fails the block.
func TestSendSummedBlock(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 200_000) // 3.2 MB
	f := TempFile(t, "src", data)
	c, s := tcpPair(t)
	got := make(chan []byte)
	go func() { b, _ := io.ReadAll(s); got <- b }()
	src := &summer{File: f, h: md5.New(), next: 1000}
	plan := NewPlan([]Range{{Start: 1000, End: int64(len(data)) + 10}}, 1<<20)
	var inOrder sync.Mutex
	pool := NewBufferPool(1 << 20)
	var sent int64
	for {
		n, err := sendSummedBlock(c.(*net.TCPConn), src, &inOrder, plan, 1000, pool, math.MaxInt)
		if err != nil {
			if !strings.Contains(err.Error(), "source shorter than announced") {
				t.Fatalf("the block past the end failed with %v, want one saying the source is shorter", err)
			}
			break
		}
		sent += int64(n)
	}
	c.Close()
	b := <-got
	r := bufio.NewReader(bytes.NewReader(b))
	var payload []byte
	for {
		h, err := ReadHeader(r)
		if err != nil {
			break
		}
		if int64(h.Offset) != int64(len(payload)) {
			t.Fatalf("block at %d, want %d", h.Offset, len(payload))
		}
		p := make([]byte, h.Count)
		io.ReadFull(r, p)
		payload = append(payload, p...)
	}
	want := data[1000 : 1000+sent]
	if sent < 3<<20 || !bytes.Equal(payload, want) {
		t.Fatalf("received %d bytes, %d sent; not the file's", len(payload), sent)
	}
	if sum := md5.Sum(want); !bytes.Equal(src.h.Sum(nil), sum[:]) {
		t.Error("the hash is not the sent range's")
	}
	if src.biggest > sumPiece {
		t.Errorf("hashed through %d bytes at a time, want at most %d", src.biggest, sumPiece)
	}
}
