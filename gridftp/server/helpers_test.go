package server_test

// A real server on 127.0.0.1:0 over a posix tree in a temporary directory,
// and a minimal control-channel client that reads replies with
// gridftp.ReadReply, in the manner of fclairamb/ftpserverlib's tests.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/server"
	"ferry/storage/posix"
)

// replyTimeout bounds every wait for a reply; a hung server fails the test
// instead of the whole run.
const replyTimeout = 10 * time.Second

// testEnv is one running server. The tree it serves is root; outside is a
// sibling directory that no command may reach.
type testEnv struct {
	t       testing.TB
	srv     *server.Server
	addr    string
	root    string
	outside string
}

// startServer starts a server with anonymous logins that may write on a
// fresh tree; configure adjusts it before it serves.
func startServer(t testing.TB, configure ...func(*server.Server)) *testEnv {
	t.Helper()
	return startServerLn(t, nil, configure...)
}

// startServerLn is startServer with the server's listener wrapped by
// wrapLn (nil: not wrapped).
func startServerLn(t testing.TB, wrapLn func(net.Listener) net.Listener, configure ...func(*server.Server)) *testEnv {
	t.Helper()
	parent := t.TempDir()
	env := &testEnv{t: t, root: filepath.Join(parent, "root"), outside: filepath.Join(parent, "outside")}
	for _, d := range []string{env.root, env.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fsys, err := posix.New(env.root)
	if err != nil {
		t.Fatal(err)
	}
	env.srv = &server.Server{
		FS:             fsys,
		Anonymous:      true,
		AnonymousWrite: true,
		DataTimeout:    3 * time.Second,
		IdleTimeout:    time.Minute,
	}
	for _, f := range configure {
		f(env.srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env.addr = ln.Addr().String()
	if wrapLn != nil {
		ln = wrapLn(ln)
	}
	served := make(chan error, 1)
	go func() { served <- env.srv.Serve(ln) }()
	t.Cleanup(func() {
		env.srv.Close()
		if err := <-served; !errors.Is(err, server.ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
		fsys.Close()
	})
	return env
}

// file writes a file in the served tree.
func (e *testEnv) file(name string, data []byte) {
	e.t.Helper()
	p := filepath.Join(e.root, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// content reads a file of the served tree.
func (e *testEnv) content(name string) []byte {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.root, filepath.FromSlash(name)))
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// pollInterval is how often waitSessions and settle look: short, since a
// fuzz input waits for both (a millisecond each halved the rate).
const pollInterval = 50 * time.Microsecond

// waitSessions waits until the server holds n sessions.
func (e *testEnv) waitSessions(n int) {
	e.t.Helper()
	deadline := time.Now().Add(replyTimeout)
	for e.srv.Sessions() != n {
		if time.Now().After(deadline) {
			e.t.Fatalf("server holds %d sessions, want %d", e.srv.Sessions(), n)
		}
		time.Sleep(pollInterval)
	}
}

// settle waits until at most base goroutines run; a leak fails the test
// with the stacks of those still running.
func settle(t testing.TB, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines still running, want at most %d:\n%s", runtime.NumGoroutine(), base, buf)
		}
		time.Sleep(pollInterval)
	}
}

// ctl is a control connection.
type ctl struct {
	t  testing.TB
	c  net.Conn
	br *bufio.Reader
}

// dial connects and checks the 220 banner.
func (e *testEnv) dial() *ctl {
	e.t.Helper()
	c := e.dialRaw()
	if r := c.read(); r.Code != gridftp.CodeReady || !strings.Contains(r.Text(), "GridFTP Server") {
		e.t.Fatalf("banner %q", r.String())
	}
	return c
}

// dialRaw connects without reading anything.
func (e *testEnv) dialRaw() *ctl {
	e.t.Helper()
	return e.dialFrom("")
}

// dialFrom connects from a local address of the loopback network
// ("127.0.0.2"; "" for any), without reading anything: each is a client
// address of its own to the server.
func (e *testEnv) dialFrom(ip string) *ctl {
	e.t.Helper()
	d := net.Dialer{Timeout: replyTimeout}
	if ip != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(ip)}
	}
	c, err := d.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	cc := &ctl{t: e.t, c: c, br: bufio.NewReader(c)}
	e.t.Cleanup(func() { c.Close() })
	return cc
}

// login dials and logs in anonymously.
func (e *testEnv) login() *ctl {
	e.t.Helper()
	c := e.dial()
	c.expect("USER anonymous", 331)
	c.expect("PASS ferry@", 230)
	return c
}

// send writes one command line.
func (c *ctl) send(line string) {
	c.t.Helper()
	c.write(line + "\r\n")
}

// write writes raw bytes to the control connection.
func (c *ctl) write(s string) {
	c.t.Helper()
	c.c.SetWriteDeadline(time.Now().Add(replyTimeout))
	if _, err := io.WriteString(c.c, s); err != nil {
		c.t.Fatalf("write %q: %v", trunc(s), err)
	}
}

// read reads one reply.
func (c *ctl) read() gridftp.Reply {
	c.t.Helper()
	r, err := c.tryRead(replyTimeout)
	if err != nil {
		c.t.Fatalf("reading reply: %v", err)
	}
	return r
}

func (c *ctl) tryRead(d time.Duration) (gridftp.Reply, error) {
	c.c.SetReadDeadline(time.Now().Add(d))
	return gridftp.ReadReply(c.br)
}

// final reads replies up to the first that is not preliminary and returns
// both.
func (c *ctl) final() (prelim []gridftp.Reply, last gridftp.Reply) {
	c.t.Helper()
	for {
		r := c.read()
		if !r.Preliminary() {
			return prelim, r
		}
		prelim = append(prelim, r)
	}
}

// expect sends a command and checks the code of its one reply.
func (c *ctl) expect(line string, code int) gridftp.Reply {
	c.t.Helper()
	c.send(line)
	r := c.read()
	if r.Code != code {
		c.t.Fatalf("%s: got %q, want code %d", trunc(line), r.String(), code)
	}
	return r
}

// expectText sends a command and checks its one reply exactly.
func (c *ctl) expectText(line, want string) {
	c.t.Helper()
	c.send(line)
	if r := c.read(); r.String() != want {
		c.t.Fatalf("%s: got %q, want %q", trunc(line), r.String(), want)
	}
}

// expectClosed checks that the server closes the connection.
func (c *ctl) expectClosed() {
	c.t.Helper()
	c.c.SetReadDeadline(time.Now().Add(replyTimeout))
	b, err := io.ReadAll(c.br)
	if err != nil {
		c.t.Fatalf("connection not closed: %v (read %q)", err, b)
	}
	if len(b) > 0 {
		c.t.Fatalf("read %q before the close", b)
	}
}

// pasv sends PASV and returns the address it names.
func (c *ctl) pasv() string {
	c.t.Helper()
	r := c.expect("PASV", gridftp.CodePassive)
	if !strings.HasPrefix(r.Text(), "Entering Passive Mode (") {
		c.t.Fatalf("PASV reply %q", r.String())
	}
	ap, err := gridftp.ParsePassive(r.Text())
	if err != nil {
		c.t.Fatalf("PASV reply %q: %v", r.String(), err)
	}
	return ap.String()
}

// epsv sends EPSV and returns the address it names.
func (c *ctl) epsv() string {
	c.t.Helper()
	r := c.expect("EPSV", gridftp.CodeExtPassive)
	port, err := gridftp.ParseExtPassive(r.Text())
	if err != nil {
		c.t.Fatalf("EPSV reply %q: %v", r.String(), err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// dialData opens a data connection.
func dialData(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, replyTimeout)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(replyTimeout))
	t.Cleanup(func() { c.Close() })
	return c
}

// activeListener is the data listener of a PORT transfer.
type activeListener struct {
	t  testing.TB
	ln net.Listener
}

// port opens a listener and announces it with PORT.
func (c *ctl) port() *activeListener {
	c.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { ln.Close() })
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	c.expectText("PORT "+gridftp.FormatHostPort(ap), "200 PORT Command successful.")
	return &activeListener{t: c.t, ln: ln}
}

// accept waits for the server's next data connection.
func (a *activeListener) accept() net.Conn {
	a.t.Helper()
	a.ln.(*net.TCPListener).SetDeadline(time.Now().Add(replyTimeout))
	c, err := a.ln.Accept()
	if err != nil {
		a.t.Fatalf("accept data connection: %v", err)
	}
	c.SetDeadline(time.Now().Add(replyTimeout))
	a.t.Cleanup(func() { c.Close() })
	return c
}

// readAllAsync reads a data connection to its end in the background.
func readAllAsync(c net.Conn) <-chan []byte {
	ch := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c)
		ch <- b
	}()
	return ch
}

// MODE E framing.

func blockHeader(desc byte, count, offset uint64) []byte {
	var b [gridftp.HeaderLen]byte
	gridftp.Header{Desc: desc, Count: count, Offset: offset}.Put(b[:])
	return b[:]
}

// block is one MODE E data block.
func block(offset uint64, payload []byte) []byte {
	return append(blockHeader(0, uint64(len(payload)), offset), payload...)
}

// eod ends a stream's part of a transfer; eof ends the last one.
func eod() []byte            { return blockHeader(gridftp.DescEOD, 0, 0) }
func eof(streams int) []byte { return blockHeader(gridftp.DescEOD|gridftp.DescEOF, 0, uint64(streams)) }

// received is what a MODE E receiver read from one stream of a transfer.
type received struct {
	blocks   []gridftp.Header
	data     map[uint64][]byte
	eofCount int // 0 unless an EOF block came on this stream
	closing  bool
}

// readModeE reads one stream up to its EOD.
func readModeE(r io.Reader) (received, error) {
	rec := received{data: map[uint64][]byte{}}
	for {
		h, err := gridftp.ReadHeader(r)
		if err != nil {
			return rec, err
		}
		if h.Count > 0 {
			p := make([]byte, h.Count)
			if _, err := io.ReadFull(r, p); err != nil {
				return rec, err
			}
			rec.data[h.Offset] = p
			rec.blocks = append(rec.blocks, h)
		}
		if h.Desc&gridftp.DescEOF != 0 {
			rec.eofCount = int(h.Offset)
		}
		if h.Desc&gridftp.DescWillClose != 0 {
			rec.closing = true
		}
		if h.Desc&(gridftp.DescEOD|gridftp.DescWillClose) != 0 {
			return rec, nil
		}
	}
}

// assemble lays the blocks of several streams out as a file of size n;
// it fails on overlaps and on holes.
func assemble(t testing.TB, n int, recs ...received) []byte {
	t.Helper()
	out := make([]byte, n)
	var seen int
	for _, rec := range recs {
		for off, p := range rec.data {
			if int(off)+len(p) > n {
				t.Fatalf("block %d+%d past the end %d", off, len(p), n)
			}
			copy(out[off:], p)
			seen += len(p)
		}
	}
	if seen != n {
		t.Fatalf("blocks hold %d bytes, want %d", seen, n)
	}
	return out
}

// pattern returns n bytes that differ at every offset of a block.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func trunc(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// markers splits the preliminary replies of a transfer.
func markers(t testing.TB, prelim []gridftp.Reply) (begin gridftp.Reply, perf []gridftp.PerfMarker, ranges gridftp.Ranges) {
	t.Helper()
	for _, r := range prelim {
		switch r.Code {
		case gridftp.CodeOpeningData, gridftp.CodeReusingData:
			begin = r
		case gridftp.CodePerfMarker:
			m, err := gridftp.ParsePerfMarker(r)
			if err != nil {
				t.Fatalf("perf marker %q: %v", r.String(), err)
			}
			perf = append(perf, m)
		case gridftp.CodeRestartMarker:
			rs, err := gridftp.ParseRangeMarker(r)
			if err != nil {
				t.Fatalf("range marker %q: %v", r.String(), err)
			}
			ranges.AddAll(rs)
		default:
			t.Fatalf("unexpected preliminary reply %q", r.String())
		}
	}
	return begin, perf, ranges
}

// truncate sets the size of a file of the served tree (sparse).
func truncate(e *testEnv, name string, size int64) error {
	return os.Truncate(filepath.Join(e.root, filepath.FromSlash(name)), size)
}

// with returns the environment bound to another test (a fuzz input's).
func (e *testEnv) with(t testing.TB) *testEnv {
	c := *e
	c.t = t
	return &c
}

// checkOutside fails unless the directory beside the root is empty and the
// root's parent holds nothing else.
func (e *testEnv) checkOutside() {
	e.t.Helper()
	if entries, err := os.ReadDir(e.outside); err != nil || len(entries) != 0 {
		e.t.Fatalf("the directory outside the root holds %v (%v)", entries, err)
	}
	if entries, err := os.ReadDir(filepath.Dir(e.root)); err != nil || len(entries) != 2 {
		e.t.Fatalf("the root's parent holds %v (%v)", entries, err)
	}
}
