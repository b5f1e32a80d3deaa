package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/server"
	"ferry/stack"
)

// pipeLayer is a terminal that can only be written or read from start to
// end, like a program: what STOR writes is kept, RETR reads out.
type pipeLayer struct {
	mu       sync.Mutex
	stored   []*pipeSink
	out      []byte
	closeErr error          // what a sink's Close returns
	hold     chan time.Time // the sinks' hold
}

type pipeSink struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	t       *stack.Transfer
	closed  bool
	aborted error
	err     error
	hold    chan time.Time // when set, Close sends when it starts, then waits for it to close
}

func (p *pipeSink) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.Write(b)
}
func (p *pipeSink) Close() error {
	if p.hold != nil {
		p.hold <- time.Now()
		<-p.hold
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return p.err
}
func (p *pipeSink) Abort(cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.aborted = cause
}

func (p *pipeLayer) Create(_ context.Context, t *stack.Transfer) (stack.Sink, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &pipeSink{t: t, err: p.closeErr, hold: p.hold}
	p.stored = append(p.stored, s)
	return s, nil
}

func (p *pipeLayer) Open(_ context.Context, t *stack.Transfer) (stack.Source, error) {
	for _, m := range t.Members {
		res := stack.Result{Name: m, Size: int64(len(m))}
		if strings.HasPrefix(m, "bad") {
			res = stack.Result{Name: m, Err: &stack.ShownError{Text: "cannot read " + m}}
		}
		t.Report(res)
	}
	return io.NopCloser(bytes.NewReader(p.out)), nil
}

func (p *pipeLayer) last() *pipeSink {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stored[len(p.stored)-1]
}

func withPipe(p *pipeLayer) func(*server.Server) {
	return func(s *server.Server) {
		s.Layers = stack.Kinds()
		s.Layers["pipe"] = stack.Kind{Terminal: func(stack.Entry, stack.Env) (stack.Terminal, error) { return p, nil }}
	}
}

// TestSetDiskStackWire: SITE SETDISKSTACK answers byte for byte as GCT
// does (observed against globus-gridftp-server 13.24).
func TestSetDiskStackWire(t *testing.T) {
	env := startServer(t, withPipe(&pipeLayer{}))
	c := env.login()
	for _, tt := range []struct{ cmd, want string }{
		{"SITE SETDISKSTACK bogus", "500-Setting filesystem driver stack failed.\r\n500-globus_xio: Bad parameter, bogus driver not whitelisted\r\n500 End.\r\n"},
		{"SITE SETDISKSTACK file,bogus:x=1", "500-Setting filesystem driver stack failed.\r\n500-globus_xio: Bad parameter, bogus driver not whitelisted\r\n500 End.\r\n"},
		{"SITE SETDISKSTACK FILE", "500-Setting filesystem driver stack failed.\r\n500-globus_xio: Bad parameter, FILE driver not whitelisted\r\n500 End.\r\n"},
		{"SITE SETDISKSTACK pipe,,ordering", "500-Setting filesystem driver stack failed.\r\n500-globus_xio: Bad parameter,  driver not whitelisted\r\n500 End.\r\n"},
		{"SITE SETDISKSTACK ", "501 Syntax error in parameters or arguments.\r\n"},
		{"SITE SETDISKSTACK pipe,ordering", "250 OK.\r\n"},
		{"SITE SETDISKSTACK default", "250 OK.\r\n"},
		{"SITE SETDISKSTACK DEFAULT", "250 OK.\r\n"},
		{"SITE SETDISKSTACK file:", "250 OK.\r\n"},
	} {
		c.send(tt.cmd)
		var got strings.Builder
		for {
			c.c.SetReadDeadline(time.Now().Add(replyTimeout))
			l, err := c.br.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: %v", tt.cmd, err)
			}
			got.WriteString(l)
			if len(l) > 3 && l[3] == ' ' {
				break
			}
		}
		if got.String() != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.cmd, got.String(), tt.want)
		}
	}
	c.send("FEAT")
	if r := c.read(); !strings.Contains(r.Text(), " DISKSTACK file,ordering,pipe\n") {
		t.Errorf("FEAT does not name the layers: %q", r.Text())
	}
}

// TestPipeLayerStore: a layer that can only be written in order gets
// MODE E blocks from three streams in order, and stream mode's bytes; a
// restart, an offset or an append is refused, and so is a MODE E gap.
func TestPipeLayerStore(t *testing.T) {
	p := &pipeLayer{}
	env := startServer(t, withPipe(p))
	c := env.login()
	c.expect("SITE SETDISKSTACK pipe", 250)
	c.expect("MODE E", 200)
	addr := c.pasv()
	data := pattern(20*1000 + 17)
	c.send("STOR /ignored")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("STOR: %q", r.String())
	}
	conns := []net.Conn{dialData(t, addr), dialData(t, addr), dialData(t, addr)}
	for i, part := range spread(data, 1000, 3) { // each stream's blocks backwards
		send(t, conns[i], part)
	}
	finishStreams(t, conns)
	if _, final := c.final(); final.String() != "226 Transfer Complete." {
		t.Fatalf("STOR: %q", final.String())
	}
	if s := p.last(); !bytes.Equal(s.buf.Bytes(), data) || !s.closed || s.aborted != nil || s.t.Name != "/ignored" {
		t.Fatalf("the pipe got %d bytes in order %v, closed %v, aborted %v, name %q", s.buf.Len(), bytes.Equal(s.buf.Bytes(), data), s.closed, s.aborted, s.t.Name)
	}

	// A gap: blocks 0 and 2000 arrive, 1000 never does.
	c.send("STOR /gap")
	if r := c.read(); r.Code != gridftp.CodeReusingData {
		t.Fatalf("STOR /gap: %q", r.String())
	}
	send(t, conns[0], block(0, data[:1000]), eod())
	send(t, conns[1], block(2000, data[2000:3000]), eod())
	send(t, conns[2], eof(3))
	if _, final := c.final(); final.Code/100 != 4 && final.Code/100 != 5 {
		t.Fatalf("STOR with a gap: %q", final.String())
	}
	if s := p.last(); s.aborted == nil {
		t.Fatal("the gap did not abort the pipe")
	}
	for _, cmd := range []string{"ESTO A 10 /x", "APPE /x"} {
		c.send(cmd)
		if _, final := c.final(); final.Code != 504 || !strings.Contains(final.Text(), "cannot seek") {
			t.Fatalf("%s through a pipe: %q", cmd, final.String())
		}
	}

	c.expect("MODE S", 200)
	c.expect("REST 5", 350)
	c.send("STOR /x")
	if _, final := c.final(); final.Code != 504 {
		t.Fatalf("REST then STOR through a pipe: %q", final.String())
	}
	dc := dialData(t, c.pasv())
	c.send("STOR /s")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("STOR /s: %q", r.String())
	}
	send(t, dc, data)
	dc.Close()
	if _, final := c.final(); final.Code != 226 || !bytes.Equal(p.last().buf.Bytes(), data) {
		t.Fatalf("stream mode through a pipe: %q", final.String())
	}

	// The layer's failure at the end, with its words, fails the transfer.
	p.closeErr = &stack.ShownError{Text: "popened program exited with an error (exit code: 2):\ntar: x: Cannot open"}
	dc = dialData(t, c.pasv())
	c.send("STOR /t")
	c.read()
	send(t, dc, data[:10])
	dc.Close()
	_, final := c.final()
	if final.Code/100 != 4 || !strings.Contains(final.Text(), "exit code: 2") || !strings.Contains(final.Text(), "tar: x: Cannot open") {
		t.Fatalf("a failing layer: %q", final.String())
	}
}

// TestLayerCloseKeepsReplyWaitAlive: while a layer finishes after the
// data (forward waits for its children's replies and checksums), 112
// markers go on, so that a client's wait for the reply does not time out.
func TestLayerCloseKeepsReplyWaitAlive(t *testing.T) {
	p := &pipeLayer{hold: make(chan time.Time)}
	env := startServer(t, withPipe(p), func(s *server.Server) { s.MarkerInterval = 20 * time.Millisecond })
	var once sync.Once
	release := func() { once.Do(func() { close(p.hold) }) }
	t.Cleanup(release) // before the server's: it waits for the session
	c := env.login()
	c.expect("SITE SETDISKSTACK pipe", 250)
	c.expect("MODE E", 200)
	dc := dialData(t, c.pasv())
	c.send("STOR /x")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("STOR: %q", r.String())
	}
	send(t, dc, block(0, pattern(1000)), eof(1))
	var closing time.Time
	select {
	case closing = <-p.hold:
	case <-time.After(replyTimeout):
		t.Fatal("the layer was not closed")
	}
	// Markers sent before Close carry an earlier time (to 0.1 s).
	for {
		r := c.read()
		if r.Code != gridftp.CodePerfMarker {
			if r.Code != gridftp.CodeRestartMarker {
				t.Fatalf("while the layer closes: %q", r.String())
			}
			continue
		}
		m, err := gridftp.ParsePerfMarker(r)
		if err != nil {
			t.Fatal(err)
		}
		if m.Time.After(closing.Add(200*time.Millisecond)) && m.Bytes == 1000 {
			break
		}
	}
	release()
	if _, final := c.final(); final.Code != 226 {
		t.Fatalf("STOR: %q", final.String())
	}
}

// TestPipeLayerAbortWakes: a block too far ahead waits in the ordering
// layer; ABOR wakes it, the transfer ends and the pipe hears why.
func TestPipeLayerAbortWakes(t *testing.T) {
	p := &pipeLayer{}
	env := startServer(t, withPipe(p))
	c := env.login()
	c.expect("SITE SETDISKSTACK pipe", 250)
	c.expect("MODE E", 200)
	dc := dialData(t, c.pasv())
	c.send("STOR /x")
	c.read()
	big := make([]byte, stack.OrderingWindow+3<<20)
	go dc.Write(append(blockHeader(0, uint64(len(big)), 1000), big...))
	time.Sleep(300 * time.Millisecond)
	c.send("ABOR")
	_, final := c.final()
	if final.Code != 426 {
		t.Fatalf("STOR after ABOR: %q", final.String())
	}
	if r := c.read(); r.Code != 226 {
		t.Fatalf("ABOR: %q", r.String())
	}
	if s := p.last(); s.aborted == nil {
		t.Fatal("the pipe was not aborted")
	}
}

// TestPipeLayerRetrieve: a source read from start to end goes out whole
// in stream mode and over three MODE E streams; a restart is refused; the
// members named for it are reported in 113 replies before 226.
func TestPipeLayerRetrieve(t *testing.T) {
	p := &pipeLayer{out: pattern(10*1000 + 1)}
	env := startServer(t, withPipe(p), func(s *server.Server) { s.BlockSize = 1000 })
	c := env.login()
	c.expect("SITE SETDISKSTACK pipe", 250)
	dc := dialData(t, c.pasv())
	got := readAllAsync(dc)
	c.send("RETR /x")
	if _, final := c.final(); final.Code != 226 {
		t.Fatalf("RETR: %q", final.String())
	}
	if b := <-got; !bytes.Equal(b, p.out) {
		t.Fatalf("stream mode: %d bytes, want %d", len(b), len(p.out))
	}

	c.expect("MODE E", 200)
	c.expect("OPTS RETR Parallelism=3;", 200)
	a := c.port()
	c.expect("SITE MEMBERS a b%20c bad%25one", 200)
	c.send("RETR /x")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("RETR: %q", r.String())
	}
	conns := []net.Conn{a.accept(), a.accept(), a.accept()}
	recs := retrModeE(t, conns)
	prelim, final := c.final()
	if final.Code != 226 {
		t.Fatalf("RETR: %q", final.String())
	}
	if got := assemble(t, len(p.out), recs...); !bytes.Equal(got, p.out) || eofTotal(t, recs) != 3 {
		t.Fatal("MODE E from a pipe differs")
	}
	var members []gridftp.Member
	for _, r := range prelim {
		if r.Code == gridftp.CodeMembers {
			ms, err := gridftp.ParseMembers(r)
			if err != nil {
				t.Fatal(err)
			}
			members = append(members, ms...)
		}
	}
	want := "a 1 <nil>|b c 3 <nil>|bad%one 0 451 GlobusError: v=1 c=INTERNAL_ERROR: cannot read bad%one"
	var b []string
	for _, m := range members {
		fault := "<nil>"
		if m.Fault != nil {
			fault = fmt.Sprintf("%d %s", m.Fault.Code, m.Fault.Text())
		}
		b = append(b, fmt.Sprintf("%s %d %s", m.Name, m.Size, fault))
	}
	if strings.Join(b, "|") != want {
		t.Fatalf("members %q, want %q", strings.Join(b, "|"), want)
	}

	// The members were for that transfer only.
	c.send("RETR /x")
	c.read()
	recs = retrModeE(t, conns)
	prelim, final = c.final()
	for _, r := range prelim {
		if r.Code == gridftp.CodeMembers {
			t.Fatalf("members reported again: %q", r.String())
		}
	}
	if final.Code != 226 || !bytes.Equal(assemble(t, len(p.out), recs...), p.out) {
		t.Fatalf("RETR: %q", final.String())
	}

	c.expect("REST 0-10", 350)
	c.send("RETR /x")
	if _, final := c.final(); final.Code != 504 {
		t.Fatalf("a restart from a pipe: %q", final.String())
	}
}
