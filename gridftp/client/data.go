package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ferry/gridftp"
)

// Options shape the data transfers of a Conn.
type Options struct {
	Parallel  int                 // MODE E streams per transfer; < 1 means 1
	BlockSize int                 // MODE E block size when sending; 0: 1 MiB
	Pool      *gridftp.BufferPool // shared block buffers; nil: one per Conn
	// Dial opens the data connections to the address the server's answer
	// to PASV names; nil: TCP. A server that relays to servers a client
	// named (a multicast hop) passes its target policy here, since a
	// hostile server may answer with any address.
	Dial DialFunc
}

// data is the client side of the data channel, cached across transfers as
// the server caches its side.
type data struct {
	modeE    bool
	parallel int // last OPTS RETR Parallelism sent

	// receiving (RETR/MLSD): our listener, announced with PORT.
	ln       net.Listener
	accepted chan net.Conn
	rstreams []*gridftp.Stream

	// sending (STOR): streams to the server's PASV address.
	pasv     netip.AddrPort
	sstreams []*gridftp.Stream

	// The data channels' credential (DCSC P, DCAU A) and PROT P; nil
	// for DCAU N.
	cred    *gridftp.DataCredential
	private bool
}

// securityCommands are the commands that give the server cred for its
// data channels (DCAU A, and PROT P when private), or take it back (nil);
// none when the session has them already.
func (c *Conn) securityCommands(cred *gridftp.DataCredential, private bool) ([]string, error) {
	switch {
	case cred == c.data.cred && private == c.data.private:
		return nil, nil
	case cred == nil && c.sec != nil:
		return []string{"DCAU N"}, nil // a GSI session's default is DCAU A
	case cred == nil:
		return []string{"DCSC D"}, nil
	case cred.PeerChecked():
		// A grid credential the server got at login (delegated): it
		// needs only DCAU A, and PROT.
		if private {
			return []string{"DCAU A", "PROT P"}, nil
		}
		return []string{"DCAU A", "PROT C"}, nil
	}
	blob, err := cred.DCSC()
	if err != nil {
		return nil, err
	}
	prot := "PROT C"
	if private {
		prot = "PROT P"
	}
	return []string{"DCSC P " + blob, "DCAU A", prot}, nil
}

// secured records what securityCommands asked for, once the server took
// it; the server dropped the data channel.
func (c *Conn) secured(cred *gridftp.DataCredential, private bool) {
	if cred != c.data.cred || private != c.data.private {
		c.dropData()
		c.data.cred, c.data.private = cred, private
	}
}

// SecureData authenticates the session's data channels with cred from now
// on (the server must offer FEAT DATATLS), and encrypts them when private;
// a nil cred goes back to DCAU N.
func (c *Conn) SecureData(ctx context.Context, cred *gridftp.DataCredential, private bool) error {
	cmds, err := c.securityCommands(cred, private)
	if err != nil || len(cmds) == 0 {
		return err
	}
	if err := c.write(cmds...); err != nil {
		return err
	}
	if _, err := c.finals(ctx, len(cmds)); err != nil {
		return err
	}
	c.secured(cred, private)
	return nil
}

// ownCredLifetime is how long the credential a session makes for its own
// data connections (ownSecurity) is valid: longer than any session.
const ownCredLifetime = 7 * 24 * time.Hour

// ownSecurity authenticates the data connections a ferry server (FEAT
// DATATLS) makes to this client's listener, when nothing else does: it
// makes the session a credential and returns the commands that hand it
// over (DCSC P, DCAU A, PROT C), to go before PORT. The server's
// connection then proves it, wherever it comes from: a connect agent is
// reached through a relay, maybe another process's, at no address this
// client knows. None for any other server, whose connections admit
// checks by address.
func (c *Conn) ownSecurity() ([]string, error) {
	if _, ok := c.Feature("DATATLS"); !ok || c.data.cred != nil || c.sec != nil {
		return nil, nil
	}
	cred, err := gridftp.NewDataCredential(ownCredLifetime)
	if err != nil {
		return nil, err
	}
	cmds, err := c.securityCommands(cred, false)
	if err != nil {
		return nil, err
	}
	// As secured, but before the replies: a refusal closes the session.
	c.closeData()
	c.data.cred, c.data.private = cred, false
	return cmds, nil
}

// admit is the accept step of this client's data listener: the TLS
// handshake when the data channels are authenticated, else the address
// rule: only the server's control connection's address is admitted, and
// a stranger's connection is closed, so that it never becomes a listing
// or a file.
func (c *Conn) admit() func(net.Conn) (net.Conn, error) {
	cred, private, timeout := c.data.cred, c.data.private, c.timeout()
	if cred != nil {
		return func(conn net.Conn) (net.Conn, error) {
			return gridftp.SecureData(context.Background(), conn, cred, false, private, timeout)
		}
	}
	server := gridftp.AddrIP(c.c.RemoteAddr())
	return func(conn net.Conn) (net.Conn, error) {
		if ip := gridftp.AddrIP(conn.RemoteAddr()); ip != server {
			return conn, fmt.Errorf("client: data connection from %v refused: not the server (%v)", ip, server)
		}
		return conn, nil
	}
}

// SetOptions sets the transfer options.
func (c *Conn) SetOptions(o Options) {
	if o.BlockSize <= 0 {
		o.BlockSize = 1 << 20
	}
	if o.Pool == nil || o.Pool.BlockSize() != o.BlockSize {
		o.Pool = gridftp.NewBufferPool(o.BlockSize)
	}
	c.opts = o
}

func (c *Conn) options() Options {
	if c.opts.Pool == nil {
		c.SetOptions(c.opts)
	}
	return c.opts
}

// ModeE switches the session to extended block mode (once).
func (c *Conn) ModeE(ctx context.Context) error {
	if c.data.modeE {
		return nil
	}
	if _, err := c.Do(ctx, "MODE E"); err != nil {
		return err
	}
	c.data.modeE = true
	return nil
}

// closeData drops every cached data connection.
func (c *Conn) closeData() {
	if c.data.ln != nil {
		c.data.ln.Close()
		for conn := range c.data.accepted {
			conn.Close()
		}
		c.data.ln, c.data.accepted = nil, nil
	}
	for _, s := range c.data.rstreams {
		s.Conn.Close()
	}
	for _, s := range c.data.sstreams {
		s.Conn.Close()
	}
	c.data.rstreams, c.data.sstreams, c.data.pasv = nil, nil, netip.AddrPort{}
}

// receiveSetup makes sure the server will connect to us (MODE E, the
// parallelism, the credential it proves, ownSecurity, a listener of ours
// and PORT) and sends the transfer command
// cmd, all in one write: a listing or a retrieval on a fresh session costs
// one round trip, not one per command. It reads the setup commands'
// replies; the caller reads cmd's. A refused setup leaves cmd's reply
// unread: the session is closed, and the error says why.
func (c *Conn) receiveSetup(ctx context.Context, cmd string) error {
	var lines []string
	if !c.data.modeE {
		lines = append(lines, "MODE E")
	}
	want := max(c.options().Parallel, 1)
	if c.data.parallel != want {
		lines = append(lines, fmt.Sprintf("OPTS RETR Parallelism=%d,%d,%d;", want, want, want))
	}
	sec, err := c.ownSecurity()
	if err != nil {
		return err
	}
	lines = append(lines, sec...)
	if c.data.ln == nil {
		c.closeData()
		local, err := netip.ParseAddrPort(c.c.LocalAddr().String())
		if err != nil {
			return err
		}
		lc := net.ListenConfig{Control: gridftp.DataControl}
		ln, err := lc.Listen(context.Background(), "tcp", netip.AddrPortFrom(local.Addr().Unmap(), 0).String())
		if err != nil {
			return err
		}
		c.data.ln, c.data.accepted = ln, make(chan net.Conn, gridftp.MaxStreams)
		go gridftp.Accept(ln, c.data.accepted, nil, c.admit()) // closeData drains it
		ap, _ := netip.ParseAddrPort(ln.Addr().String())
		lines = append(lines, portCommand(ap))
	}
	n := len(lines)
	if err := c.write(append(lines, cmd)...); err != nil {
		return err
	}
	if _, err := c.finals(ctx, n); err != nil {
		c.Close()
		return err
	}
	c.data.modeE, c.data.parallel = true, want
	return nil
}

// transferResult reads the replies of a running transfer command (150/125,
// markers) up to its final reply, while recv moves the data. Both must
// succeed; a failure of either aborts the other.
func (c *Conn) transferResult(ctx context.Context, move func(context.Context) error) error {
	return c.awaitTransfer(ctx, move, false)
}

// receiveResult is transferResult for data the client receives: while
// the receiver runs, the final reply is awaited beyond the session's
// timeout. The receiver fails by itself once its data channel is quiet
// for that long (gridftp.Receiver's Timeout), but not while what it
// hands the data to holds it: a listing of millions of entries that its
// reader takes in as it can (ListEach) keeps the server waiting on the
// data channel, its final reply unsent, for as long as that takes.
func (c *Conn) receiveResult(ctx context.Context, move func(context.Context) error) error {
	return c.awaitTransfer(ctx, move, true)
}

func (c *Conn) awaitTransfer(ctx context.Context, move func(context.Context) error, receiving bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	moved := make(chan error, 1)
	running := make(chan struct{})
	go func() {
		err := move(ctx)
		close(running)
		moved <- err
	}()
	if receiving {
		kept := c.keepAwaiting(ctx, running)
		defer func() { cancel(); <-kept }()
	}
	_, rerr := c.Final(ctx, nil)
	if rerr != nil {
		cancel()
	}
	merr := <-moved
	if rerr != nil {
		return rerr
	}
	return merr
}

// keepAwaiting pushes the control channel's read deadline on, a session
// timeout ahead (or ctx's deadline, if sooner), until running is closed
// or ctx ends; the returned channel is closed when it stopped. A deadline
// it sets after ctx ended is undone, so that a canceled read still ends
// at once (next).
func (c *Conn) keepAwaiting(ctx context.Context, running <-chan struct{}) <-chan struct{} {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(c.timeout() / 4)
		defer tick.Stop()
		for {
			select {
			case <-running:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			deadline := time.Now().Add(c.timeout())
			if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
				deadline = d
			}
			c.c.SetReadDeadline(deadline)
			if ctx.Err() != nil {
				c.c.SetReadDeadline(time.Unix(1, 0))
				return
			}
		}
	}()
	return stopped
}

// Get retrieves path into dst in MODE E: the whole file when length < 0,
// else the section [off, off+length) (ERET), written at its own offsets.
func (c *Conn) Get(ctx context.Context, path string, dst io.WriterAt, off, length int64) (int64, error) {
	cmd := "RETR " + path
	if length >= 0 {
		cmd = fmt.Sprintf("ERET P %d %d %s", off, length, path)
	}
	if err := c.receiveSetup(ctx, cmd); err != nil {
		return 0, err
	}
	base := int64(0)
	if length >= 0 {
		base = off
	}
	rcv := &gridftp.Receiver{Dst: dst, Base: base, Pool: c.options().Pool, Timeout: c.timeout()}
	err := c.receiveResult(ctx, func(ctx context.Context) error {
		streams, err := rcv.Run(ctx, c.data.rstreams, c.data.accepted, nil)
		c.data.rstreams = streams
		return err
	})
	if err != nil {
		c.dropData()
	}
	return rcv.Bytes(), err
}

// dropData closes the data channel: after a failed transfer its streams
// are in an unknown state, and the server drops its side too; a session
// that joins a Pair no longer moves data to or from this client.
func (c *Conn) dropData() {
	c.closeData()
	c.data.parallel = 0
}

// Put stores size bytes of src at path in MODE E over the server's
// passive address, with block offsets shifted by off (ESTO A off) when
// off > 0.
func (c *Conn) Put(ctx context.Context, path string, src io.ReaderAt, off, size int64) (int64, error) {
	plan := gridftp.NewPlan([]gridftp.Range{{Start: 0, End: size}}, c.options().BlockSize)
	return c.put(ctx, path, off, size, func(ctx context.Context, streams []*gridftp.Stream, sent *atomic.Int64) error {
		return gridftp.Send(ctx, streams, plan, src, 0, c.options().Pool, sent)
	})
}

// PutFunc stores at path in MODE E the blocks next hands out (as
// gridftp.SendFunc takes them), of a size not known in advance: a relay
// that sends blocks on as they arrive. next fills at most a block of the
// Conn's BlockSize; a next that waits for blocks must give up when its ctx
// is done (the server ended the transfer).
func (c *Conn) PutFunc(ctx context.Context, path string, next func(ctx context.Context, payload []byte) (off int64, n int, err error)) (int64, error) {
	return c.put(ctx, path, 0, -1, func(ctx context.Context, streams []*gridftp.Stream, sent *atomic.Int64) error {
		return gridftp.SendFunc(ctx, streams, func(p []byte) (int64, int, error) { return next(ctx, p) }, c.options().Pool, sent)
	})
}

// put stores at path (ESTO A off when off > 0; ALLO size when size >= 0)
// what move sends over the data streams.
func (c *Conn) put(ctx context.Context, path string, off, size int64, move func(context.Context, []*gridftp.Stream, *atomic.Int64) error) (int64, error) {
	if err := c.ModeE(ctx); err != nil {
		return 0, err
	}
	if c.data.ln != nil || !c.data.pasv.IsValid() {
		c.closeData()
		ap, err := c.Passive(ctx)
		if err != nil {
			return 0, err
		}
		c.data.pasv = ap
	}
	want := max(c.options().Parallel, 1)
	for len(c.data.sstreams) > want {
		c.data.sstreams[len(c.data.sstreams)-1].Close()
		c.data.sstreams = c.data.sstreams[:len(c.data.sstreams)-1]
	}
	var err error
	if size >= 0 {
		if _, err = c.Do(ctx, "ALLO %d", size); err != nil {
			return 0, err
		}
	}
	if off > 0 {
		err = c.Send("ESTO A %d %s", off, path)
	} else {
		err = c.Send("STOR %s", path)
	}
	if err != nil {
		return 0, err
	}
	var sent atomic.Int64
	err = c.transferResult(ctx, func(ctx context.Context) error {
		if have := len(c.data.sstreams); have < want {
			conns, err := gridftp.DialAll(ctx, want-have, c.dialData)
			if err != nil {
				return err
			}
			for _, conn := range conns {
				c.data.sstreams = append(c.data.sstreams, gridftp.NewStream(conn))
			}
		}
		return move(ctx, c.data.sstreams, &sent)
	})
	if err != nil {
		c.dropData()
	}
	return sent.Load(), err
}

// List returns the entries of a directory (MLSD), without "." and "..".
func (c *Conn) List(ctx context.Context, path string) ([]gridftp.Entry, error) {
	var out []gridftp.Entry
	err := c.ListEach(ctx, path, func(e gridftp.Entry) error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListEach lists a directory (MLSD) and calls fn with each entry, without
// "." and "..", as the listing arrives: a directory of millions of entries
// costs the memory of a few blocks, not of its listing. fn is called from
// one goroutine at a time. An error from fn stops the listing (the data
// channel is dropped) and is returned.
func (c *Conn) ListEach(ctx context.Context, path string, fn func(gridftp.Entry) error) error {
	if err := c.receiveSetup(ctx, "MLSD "+path); err != nil {
		return err
	}
	lw := &lineWriter{line: func(line string) error {
		e, err := gridftp.ParseEntry(line)
		if err != nil {
			return fmt.Errorf("MLSD %s: %w", path, err)
		}
		if e.Type == "cdir" || e.Type == "pdir" || e.Name == "." || e.Name == ".." {
			return nil
		}
		return fn(e)
	}}
	rcv := &gridftp.Receiver{Dst: lw, Pool: c.options().Pool, Timeout: c.timeout()}
	err := c.receiveResult(ctx, func(ctx context.Context) error {
		streams, err := rcv.Run(ctx, c.data.rstreams, c.data.accepted, nil)
		c.data.rstreams = streams
		return err
	})
	if err == nil {
		err = lw.flush()
	}
	if lw.err != nil {
		err = lw.err
	}
	if err != nil {
		c.dropData()
	}
	return err
}

// lineWriter is an io.WriterAt that hands a listing to line one line at a
// time as its bytes arrive: in order at once, out of order (MODE E over
// several streams) once the bytes before them came. What it holds waiting
// is bounded, as is a line, so that a hostile server cannot exhaust memory.
type lineWriter struct {
	mu      sync.Mutex
	line    func(string) error
	next    int64            // the offset of the first byte not yet taken
	partial []byte           // the start of a line not yet ended
	ahead   map[int64][]byte // blocks that came before their turn
	held    int64            // bytes in ahead
	err     error            // the first error of line: the listing stops
}

// maxLine bounds one line of a listing (its facts and name).
const maxLine = 64 << 10

var (
	errLineTooLong = errors.New("listing line longer than 64 KiB")
	errGap         = fmt.Errorf("%w: the listing has a gap", gridftp.ErrDataStream)
)

func (w *lineWriter) WriteAt(p []byte, off int64) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	switch {
	case off > w.next:
		if w.held+int64(len(p)) > maxListing {
			return 0, errListingTooLarge
		}
		if w.ahead == nil {
			w.ahead = map[int64][]byte{}
		}
		w.ahead[off] = bytes.Clone(p)
		w.held += int64(len(p))
		return len(p), nil
	case off+int64(len(p)) <= w.next: // a block sent again
		return len(p), nil
	}
	n := len(p)
	if err := w.take(p[w.next-off:]); err != nil { // what is new of it
		return 0, err
	}
	for {
		b, ok := w.ahead[w.next]
		if !ok {
			break
		}
		delete(w.ahead, w.next)
		w.held -= int64(len(b))
		if err := w.take(b); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// take consumes the bytes at w.next. Called with w.mu held.
func (w *lineWriter) take(p []byte) error {
	w.next += int64(len(p))
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(w.partial)+len(p) > maxLine {
				w.err = errLineTooLong
				return w.err
			}
			w.partial = append(w.partial, p...)
			return nil
		}
		line := p[:i]
		if len(w.partial) > 0 {
			w.partial = append(w.partial, line...)
			line = w.partial
		}
		p = p[i+1:]
		if err := w.emit(line); err != nil {
			return err
		}
		w.partial = w.partial[:0]
	}
	return nil
}

// emit hands one line, without its line end, to w.line.
func (w *lineWriter) emit(line []byte) error {
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 {
		return nil
	}
	if err := w.line(string(line)); err != nil {
		w.err = err
		return err
	}
	return nil
}

// flush hands the last line, if the listing did not end with a line end.
func (w *lineWriter) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held > 0 {
		return errGap
	}
	err := w.emit(w.partial)
	w.partial = nil
	return err
}

// Stat describes one path (MLST).
func (c *Conn) Stat(ctx context.Context, path string) (gridftp.Entry, error) {
	rep, err := c.Do(ctx, "MLST %s", path)
	if err != nil {
		return gridftp.Entry{}, err
	}
	return mlstEntry(path, rep)
}

// StatAll looks up several paths in about one round trip: the MLST
// commands go out pipelined (DoAll) and their replies are read in order. Each path gets its
// entry or the server's refusal in errs; err is for the session as a
// whole (after it, the session is in an unknown state: close it).
func (c *Conn) StatAll(ctx context.Context, paths []string) (entries []gridftp.Entry, errs []error, err error) {
	cmds := make([]string, len(paths))
	for i, p := range paths {
		cmds[i] = "MLST " + p
	}
	reps, errs, err := c.DoAll(ctx, cmds)
	if err != nil {
		return nil, nil, err
	}
	entries = make([]gridftp.Entry, len(paths))
	for i, p := range paths {
		if errs[i] == nil {
			entries[i], errs[i] = mlstEntry(p, reps[i])
		}
	}
	return entries, errs, nil
}

// mlstEntry reads the facts line of an MLST reply.
func mlstEntry(path string, rep gridftp.Reply) (gridftp.Entry, error) {
	for _, l := range rep.Lines[1:] {
		if strings.HasPrefix(l, " ") {
			return gridftp.ParseEntry(l)
		}
	}
	return gridftp.Entry{}, fmt.Errorf("MLST %s: %w: no facts line", path, gridftp.ErrBadFacts)
}

// memFile is an in-memory io.WriterAt for listings; its size is bounded so
// that a hostile server cannot exhaust memory.
type memFile struct{ b []byte }

const maxListing = 256 << 20

var errListingTooLarge = errors.New("listing larger than 256 MiB")

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	if end > maxListing {
		return 0, errListingTooLarge
	}
	if int64(len(m.b)) < end {
		m.b = append(m.b, bytes.Repeat([]byte{0}, int(end)-len(m.b))...)
	}
	copy(m.b[off:], p)
	return len(p), nil
}

// dialData opens a data connection to the server's passive address
// (through Options.Dial when set), and authenticates it when the
// session's data channels are.
func (c *Conn) dialData(ctx context.Context, _ int) (net.Conn, error) {
	dial := c.options().Dial
	if dial == nil {
		dial = (&net.Dialer{Control: gridftp.DataControl}).DialContext
	}
	conn, err := dial(ctx, "tcp", c.data.pasv.String())
	if err != nil {
		return nil, fmt.Errorf("%w: connect %v: %v", gridftp.ErrDataStream, c.data.pasv, err)
	}
	if c.data.cred == nil {
		return conn, nil
	}
	return gridftp.SecureData(ctx, conn, c.data.cred, true, c.data.private, c.timeout())
}
