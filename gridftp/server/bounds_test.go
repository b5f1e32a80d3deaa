package server_test

// Resource bounds: no size or offset a client sends makes a file larger
// than Server.MaxFileSize (ESTO A 2^50, REST 2^50 + STOR, SITE TRNC 2^62,
// a MODE E block far out made petabyte sparse files); a CKSM hashes no
// more holes than Server.ChecksumHoles and stops with ABOR and with its
// session; a session's data buffers stay bounded whatever parallelism it
// asks for, with peers that do not read.

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/server"
)

const (
	pib = int64(1) << 50
	mib = 1 << 20
)

// wantTooLarge checks a refusal for a size past the server's limit.
func wantTooLarge(t *testing.T, what string, r gridftp.Reply) {
	t.Helper()
	if r.Code != gridftp.CodeBadArguments || r.Lines[0] != "GlobusError: v=1 c=FILE_TOO_LARGE" ||
		!strings.Contains(r.String(), "Larger than the server's maximum file size") {
		t.Errorf("%s: %q, want 501 FILE_TOO_LARGE", what, r.String())
	}
}

// size is the size of a file of the served tree (-1: missing).
func (e *testEnv) size(name string) int64 {
	fi, err := os.Stat(filepath.Join(e.root, filepath.FromSlash(name)))
	if err != nil {
		return -1
	}
	return fi.Size()
}

func TestMaxFileSize(t *testing.T) {
	const limit = 1 * mib
	env := startServer(t, func(s *server.Server) { s.MaxFileSize = limit })
	env.file("f", []byte("hello"))
	c := env.login()

	// Sizes and offsets named in commands.
	for _, line := range []string{
		fmt.Sprint("ALLO ", pib), fmt.Sprint("ALLO ", limit+1), fmt.Sprint("ALLO ", limit+1, " R 512"),
		fmt.Sprint("SITE TRNC ", int64(1)<<62, " f"), fmt.Sprint("SITE TRNC ", limit+1, " f"),
		fmt.Sprint("REST ", pib), fmt.Sprint("REST ", limit+1), fmt.Sprint("REST 0-10,", pib, "-", pib+1),
	} {
		c.send(line)
		wantTooLarge(t, line, c.read())
	}
	c.expectText(fmt.Sprint("ALLO ", limit), "200 ALLO command successful.")
	c.expectText(fmt.Sprint("SITE TRNC ", limit, " f"), "200 Site Command Successful.")
	c.expectText("SITE TRNC 5 f", "200 Site Command Successful.")
	c.expect(fmt.Sprint("REST ", limit), 350)
	c.expect("REST 0", 350)
	if n := env.size("f"); n != 5 {
		t.Fatalf("f is %d bytes", n)
	}

	stor := func(mode, line string, data ...[]byte) gridftp.Reply {
		t.Helper()
		c.expect("MODE "+mode, 200)
		dc := dialData(t, c.pasv())
		c.send(line)
		r := c.read()
		if r.Code != 150 && r.Code != 125 {
			return r
		}
		for _, d := range data {
			dc.Write(d) // the server may stop reading early
		}
		dc.Close()
		_, final := c.final()
		return final
	}
	// ESTO at an offset past the limit is refused before anything opens.
	wantTooLarge(t, "ESTO A 2^50", stor("E", fmt.Sprint("ESTO A ", pib, " esto"), block(0, []byte("x")), eof(1)))
	// A MODE E block past the limit, or reaching past it.
	wantTooLarge(t, "block at 2^50", stor("E", "STOR far", block(uint64(pib), []byte("x")), eof(1)))
	wantTooLarge(t, "block across", stor("E", "STOR across", block(limit-2, []byte("xyz")), eof(1)))
	wantTooLarge(t, "ESTO + block", stor("E", fmt.Sprint("ESTO A ", limit-2, " across2"), block(0, []byte("xyz")), eof(1)))
	// A stream-mode STOR, an APPE and a restarted STOR that run past it.
	wantTooLarge(t, "STOR", stor("S", "STOR big", make([]byte, limit+1)))
	env.file("full", make([]byte, limit-1))
	wantTooLarge(t, "APPE", stor("S", "APPE full", []byte("ab")))
	c.expect(fmt.Sprint("REST ", limit-1), 350)
	wantTooLarge(t, "REST + STOR", stor("S", "STOR f", []byte("ab")))
	for name, max := range map[string]int64{"esto": 0, "far": 0, "across": limit, "across2": limit, "big": limit, "full": limit, "f": limit} {
		if n := env.size(name); n > max {
			t.Errorf("%s is %d bytes, more than %d", name, n, max)
		}
	}
	// Up to the limit is fine.
	if r := stor("E", "STOR exact", block(limit-3, []byte("xyz")), eof(1)); r.Code != 226 {
		t.Fatalf("STOR up to the limit: %q", r.String())
	}
	if r := stor("S", "STOR exact2", make([]byte, limit)); r.Code != 226 {
		t.Fatalf("stream STOR of the limit: %q", r.String())
	}
	c.expect("NOOP", 200)

	// The default limit stops a petabyte.
	d := startServer(t)
	dc := d.login()
	for _, line := range []string{fmt.Sprint("REST ", pib), fmt.Sprint("ALLO ", pib), fmt.Sprint("ESTO A ", pib, " f")} {
		dc.send(line)
		wantTooLarge(t, "default limit: "+line, dc.read())
	}
	if d.size("f") >= 0 {
		t.Errorf("ESTO A 2^50 made a file")
	}
}

// sparse makes a file of the served tree of size bytes that holds data
// only in its first dataLen bytes (the rest is a hole).
func (e *testEnv) sparse(name string, size, dataLen int64) {
	e.t.Helper()
	e.file(name, pattern(int(dataLen)))
	if err := truncate(e, name, size); err != nil {
		e.t.Fatal(err)
	}
}

func TestChecksumHoles(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.ChecksumHoles = 8 * mib })
	env.sparse("huge", 1<<40, 4096) // a terabyte of nothing
	env.sparse("small", 4*mib, 4096)
	env.file("dense", pattern(16*mib))
	c := env.login()

	// Hashing the holes would take far longer than a read waits
	// (replyTimeout).
	for _, line := range []string{"CKSM MD5 0 -1 huge", "CKSM ADLER32 0 -1 huge", "CKSM MD5 1024 -1 huge",
		fmt.Sprint("CKSM MD5 0 ", 1<<39, " huge")} {
		c.send(line)
		r := c.read()
		if r.Code != gridftp.CodeParamNotSupported || !strings.Contains(r.String(), "c=UNSUPPORTED") ||
			!strings.Contains(r.String(), "sparse") {
			t.Errorf("%s: %q, want a refusal", line, r.String())
		}
	}
	// Holes within the budget, and dense files, are summed.
	c.expect("CKSM MD5 0 -1 small", 213)
	c.expect("CKSM MD5 0 4096 huge", 213)
	c.expect("CKSM MD5 0 -1 dense", 213)

	// SCKS checks a STOR the same way: a restarted STOR that leaves a
	// terabyte hole is refused, not hashed.
	c.expect("SCKS MD5 00000000000000000000000000000000", 200)
	c.expect(fmt.Sprint("REST ", int64(1)<<40), 350)
	dc := dialData(t, c.pasv())
	c.send("STOR holey")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("STOR: %q", r.String())
	}
	dc.Write([]byte("x"))
	dc.Close()
	if _, final := c.final(); final.Code/100 != 5 || !strings.Contains(final.String(), "sparse") {
		t.Errorf("SCKS over a terabyte hole: %q", final.String())
	}
}

// TestChecksumStops: a CKSM that hashes a long hole (allowed here) stops
// at ABOR, and when its client goes away.
func TestChecksumStops(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.ChecksumHoles = -1 })
	env.sparse("huge", 1<<40, 4096)
	c := env.login()
	c.send("CKSM MD5 0 -1 huge")
	time.Sleep(100 * time.Millisecond)
	c.send("ABOR") // a CKSM that does not stop fails the reads (replyTimeout)
	r := c.read()
	if r.Code != gridftp.CodeTransferAborted {
		t.Fatalf("CKSM after ABOR: %q", r.String())
	}
	if r := c.read(); r.String() != "226 ABOR command successful." {
		t.Fatalf("ABOR: %q", r.String())
	}

	// A hash that goes on after its client left is a goroutine that
	// does not end.
	base := runtime.NumGoroutine()
	busy := env.login()
	busy.send("CKSM SHA512 0 -1 huge")
	time.Sleep(100 * time.Millisecond)
	busy.c.Close()
	env.waitSessions(1)
	settle(t, base)
}

// heapInUse is the live heap after collections (two: buffers a
// sync.Pool keeps survive one).
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// TestSessionMemory: OPTS RETR Parallelism=256 and receivers that never
// read; the session sends on at most MaxStreams streams (64) and holds at
// most SessionBuffers block buffers (32 of 1 MiB), not a buffer a stream.
// A STOR whose 64 streams each stall in the middle of a block holds no
// more; a 65th stream fails the transfer.
func TestSessionMemory(t *testing.T) {
	env := startServer(t) // 1 MiB blocks, the default limits
	env.sparse("huge", 1<<36, 0)
	c := env.login()
	c.expect("MODE E", 200)
	base := heapInUse()
	c.expectText("OPTS RETR Parallelism=256,256,256;", "200 OPTS Command Successful.")
	a := c.port()
	c.send("RETR huge")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("RETR: %q", r.String())
	}
	var conns []net.Conn
	for {
		a.ln.(*net.TCPListener).SetDeadline(time.Now().Add(time.Second))
		dc, err := a.ln.Accept()
		if err != nil {
			break
		}
		defer dc.Close()
		conns = append(conns, dc) // never read
	}
	time.Sleep(500 * time.Millisecond) // every sender blocks on its full socket
	grown := heapInUse() - base
	t.Logf("RETR over %d streams that nobody reads: heap +%d MiB", len(conns), grown>>20)
	if len(conns) != 64 {
		t.Errorf("the server opened %d data connections, want 64", len(conns))
	}
	if grown > 48*mib {
		t.Errorf("the session's heap grew by %d MiB, want at most 32 MiB of buffers and change", grown>>20)
	}
	c.send("ABOR")
	if _, final := c.final(); final.Code != gridftp.CodeTransferAborted {
		t.Fatalf("RETR after ABOR: %q", final.String())
	}
	if r := c.read(); r.Code != 226 { // ABOR's own reply
		t.Fatalf("ABOR: %q", r.String())
	}

	// Receiving: 64 streams each stop inside a block.
	s := startServer(t).login()
	s.expect("MODE E", 200)
	addr := s.pasv()
	s.send("STOR in")
	if r := s.read(); r.Code != 150 {
		t.Fatalf("STOR: %q", r.String())
	}
	base = heapInUse()
	for i := range 64 {
		dc := dialData(t, addr)
		send(t, dc, blockHeader(0, mib, uint64(i)*mib), make([]byte, 1000))
	}
	time.Sleep(500 * time.Millisecond)
	grown = heapInUse() - base
	t.Logf("STOR over 64 stalled streams: heap +%d MiB", grown>>20)
	if grown > 48*mib {
		t.Errorf("the session's heap grew by %d MiB, want at most 32 MiB of buffers and change", grown>>20)
	}
	dialData(t, addr) // one too many
	if _, final := s.final(); final.Code/100 != 5 || !strings.Contains(final.String(), "c=TOO_MANY_STREAMS") {
		t.Errorf("STOR over 65 streams: %q", final.String())
	}
}
