package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ferry/gridftp"
	"ferry/gsi/gss"
	"ferry/stack"
	"ferry/storage"
)

// maxQueued bounds the pipelined commands a session holds; a client that
// sends more waits (TCP flow control) until earlier ones finish.
const maxQueued = 64

// maxLoginFailures ends a session after that many wrong passwords.
const maxLoginFailures = 3

type session struct {
	srv  *Server
	conn net.Conn
	addr string // addressKey of the client
	log  *slog.Logger

	// loggedInOnce is set at the first login: the login deadline no longer
	// applies (read by the command reader).
	loggedInOnce atomic.Bool

	ctx    context.Context // ends with the session
	cancel context.CancelFunc

	wmu    sync.Mutex
	w      *bufio.Writer
	hold   bool        // replies stay in w: a quick command runs and another is queued (batch)
	holdTo *time.Timer // sends what was held, should the next reply be late
	armed  bool        // holdTo runs

	// abort cancels the running transfer (ABOR, lost control channel).
	amu   sync.Mutex
	abort context.CancelFunc
	// aborts counts ABORs read. An ABOR that finds no transfer running
	// leaves its number in pendingAbort: the first transfer command read
	// before it is aborted when it starts, and only that one.
	aborts       atomic.Int64
	pendingAbort atomic.Int64
	seq          int64 // aborts when the running command was read

	// State below is touched only by the command goroutine.
	user       string
	loggedIn   bool
	readOnly   bool // an anonymous session without Server.AnonymousWrite
	anonymous  bool // logged in anonymously
	failures   int
	cwd        string
	modeE      bool
	parallel   int           // OPTS RETR Parallelism
	grow       growth        // and its maximum: streams a send may add
	retrMarks  time.Duration // OPTS RETR Markers
	restOffset int64         // stream REST
	restRanges gridftp.Ranges
	restSet    bool
	partStor   bool // SITE PARTSTOR ON: a whole STOR goes under the file's temporary name (site.go)
	rnfr       string
	scks       *expectedSum
	liveAlg    string // OPTS CKSM Live: hash transfers as they move
	storBuf    int    // SITE STORBUFSIZE
	retrBuf    int    // SITE RETRBUFSIZE
	data       dataChannel
	moved      int64               // bytes the running file transfer sent or received, for Server.Stats
	buffers    *gridftp.BufferPool // the server's, Server.SessionBuffers at a time
	// Data channel security (datasec.go).
	dataCred *gridftp.DataCredential // DCSC P
	dcauA    bool                    // DCAU A: data connections prove dataCred
	protP    bool                    // PROT P: the payload over TLS
	pasvFrom []netip.Addr            // OPTS PASV From: more addresses passive ports admit
	dcsc     string                  // DCSC P's credential as sent, for a front end's movers
	// Striping (mover.go, front.go).
	layout gridftp.Layout // OPTS RETR StripeLayout
	stripe stripeRole     // a mover's part of the next sends (SITE STRIPE)
	client clientView     // a mover's client (SITE CLIENT)
	front  *frontSession  // a front end's sessions with its movers
	// GSI (gsi.go): the exchange and identity, touched by the command
	// goroutine; protected, once set, wraps every reply and is how the
	// reader opens every command.
	gsi       gsiState
	protected atomic.Pointer[gss.Context]
	// The storage side (layers.go).
	disk    *stack.Stack // SITE SETDISKSTACK; nil: the file layer
	members []string     // SITE MEMBERS, for the next transfer
}

type expectedSum struct{ alg, sum string }

func newSession(s *Server, c net.Conn, addr string) *session {
	ctx, cancel := context.WithCancel(context.Background())
	return &session{
		srv:      s,
		conn:     c,
		addr:     addr,
		log:      s.logger().With("remote", c.RemoteAddr().String()),
		ctx:      ctx,
		cancel:   cancel,
		w:        bufio.NewWriterSize(c, 2048),
		cwd:      "/",
		parallel: 1,
		buffers:  s.buffers().Limit(s.sessionBuffers()),
		dataCred: s.DataCred,
	}
}

// kill ends the session from outside: its connection closes, so both of its
// goroutines return.
func (ss *session) kill() {
	ss.cancel()
	ss.conn.Close()
}

// reply sends one reply; safe from any goroutine (markers come from timers).
func (ss *session) reply(code int, lines ...string) {
	ss.send(gridftp.Reply{Code: code, Lines: lines})
}

func (ss *session) replyf(code int, format string, args ...any) {
	ss.reply(code, fmt.Sprintf(format, args...))
}

func (ss *session) send(r gridftp.Reply) {
	ss.srv.Stats.reply(r.Code)
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	ss.conn.SetWriteDeadline(time.Now().Add(ss.srv.dataTimeout()))
	if p := ss.protected.Load(); p != nil {
		b, err := gridftp.SealReply(r, p.Wrap)
		if err != nil {
			ss.cancel()
			return
		}
		ss.w.Write(b)
	} else {
		r.WriteTo(ss.w)
	}
	if ss.hold {
		ss.flushSoon()
		return
	}
	ss.flush()
}

// flush sends the replies in the buffer. Called with wmu held.
func (ss *session) flush() {
	if ss.armed {
		ss.armed = false
		ss.holdTo.Stop()
	}
	if err := ss.w.Flush(); err != nil {
		ss.cancel()
	}
}

// heldFor bounds how long held replies wait once no more come (batch).
const heldFor = time.Millisecond

// flushSoon has the replies held go out heldFor after the last of them,
// unless a reply sent meanwhile takes them along. Called with wmu held.
func (ss *session) flushSoon() {
	ss.armed = true
	if ss.holdTo != nil {
		ss.holdTo.Reset(heldFor)
		return
	}
	ss.holdTo = time.AfterFunc(heldFor, func() {
		ss.wmu.Lock()
		defer ss.wmu.Unlock()
		if ss.armed {
			ss.flush()
		}
	})
}

// batch sets whether the replies sent from now on are held in the buffer.
// The command loop holds the replies of a quick command when another is
// queued behind it: a client's pipelined commands (renames, lookups, and
// the transfer behind them) then cost one write for many replies, not one
// each. What is held goes out with the first reply sent once the hold
// ends, or heldFor after the last reply held: a burst of quick commands
// answers as one, and a held reply never waits on a slow command, nor on
// the rest of a line that is late.
func (ss *session) batch(hold bool) {
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	ss.hold = hold
}

type queued struct {
	cmd gridftp.Command
	err error
	seq int64 // ABORs read before this command
	// more: the next command's bytes had arrived as this one was read
	// (a client's pipelined commands).
	more bool
	// handled, when set, is closed once the command ran: the reader
	// waits for it after AUTH and ADAT, whose outcome says how the
	// next line is to be read.
	handled chan struct{}
}

func (ss *session) serve() {
	defer func() {
		if v := recover(); v != nil {
			ss.log.Error("session panic", "panic", v, "stack", string(debug.Stack()))
		}
	}()
	defer ss.kill()
	defer ss.data.close()
	defer ss.closeFront()
	ss.log.Debug("session start")
	if ss.srv.Mover && !ss.handshakeMover() {
		return
	}
	ss.replyf(gridftp.CodeReady, "%s GridFTP Server ferry %s ready.", "ferry", Version)
	q := make(chan queued, maxQueued)
	go ss.readCommands(q)
	for item := range q {
		if ss.ctx.Err() != nil {
			return // killed, or the client vanished
		}
		ss.batch(item.err == nil && commands[item.cmd.Verb].quick && (item.more || len(q) > 0))
		if item.err != nil {
			switch {
			case errors.Is(item.err, errUnprotected):
				ss.reply(gridftp.CodeProtDenied, "Command protection level denied: send every command wrapped (ENC).")
				continue
			case errors.Is(item.err, gridftp.ErrProtection):
				ss.reply(gridftp.CodeSyntaxError, "Cannot open the protected command.")
				continue
			}
			if errors.Is(item.err, gridftp.ErrLineTooLong) {
				ss.reply(gridftp.CodeSyntaxError, "Command line too long.")
				return
			}
			ss.reply(gridftp.CodeSyntaxError, "Syntax error, command unrecognized.")
			continue
		}
		ss.seq = item.seq
		goOn := ss.dispatch(item.cmd)
		if item.handled != nil {
			close(item.handled)
		}
		if !goOn {
			return
		}
	}
	ss.log.Debug("session end")
}

// readCommands reads control lines into q until EOF, an error, or QUIT.
// ABOR interrupts the running transfer at once, then takes its place in the
// queue so that its reply comes in order.
func (ss *session) readCommands(q chan<- queued) {
	defer close(q)
	quit := false // the session ends in order: queued commands run
	defer func() {
		if !quit {
			// A client that vanishes aborts its transfer, and the commands
			// it queued behind it are dropped: nobody reads their replies.
			ss.cancel()
		}
	}()
	lr := gridftp.LineReader{R: bufio.NewReaderSize(ss.conn, 1024)}
	// A connection that does not log in in time is closed, however it
	// trickles bytes: the deadline runs from the connection's start.
	loginBy := time.Now().Add(ss.srv.loginTimeout())
	for {
		deadline := time.Now().Add(ss.srv.idleTimeout())
		login := !ss.loggedInOnce.Load() && loginBy.Before(deadline)
		if login {
			deadline = loginBy
		}
		ss.conn.SetReadDeadline(deadline)
		line, err := lr.ReadLine()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				switch {
				case login && !ss.loggedInOnce.Load():
					ss.reply(gridftp.CodeNotAvailable, "Login timeout: closing control connection.")
				case login || ss.busy() || len(q) > 0:
					continue // logged in meanwhile; or a long transfer keeps the session alive
				default:
					ss.reply(gridftp.CodeNotAvailable, "Idle timeout: closing control connection.")
				}
			}
			if errors.Is(err, gridftp.ErrLineTooLong) {
				quit = true // the session ends once it says why
				q <- queued{err: err}
			}
			return
		}
		if p := ss.protected.Load(); p != nil {
			inner, ok, perr := gridftp.OpenCommand(line, p.Unwrap)
			switch {
			case !ok:
				perr = errUnprotected
			case perr == nil:
				line = inner
			}
			if perr != nil {
				select {
				case q <- queued{err: perr}:
					continue
				case <-ss.ctx.Done():
					return
				}
			}
		}
		cmd, err := gridftp.ParseCommand(line)
		seq := ss.aborts.Load()
		if err == nil && cmd.Verb == "ABOR" {
			seq = ss.aborts.Add(1)
			if !ss.abortTransfer() {
				ss.pendingAbort.Store(seq)
			}
		}
		var handled chan struct{}
		if err == nil && (cmd.Verb == "AUTH" || cmd.Verb == "ADAT") {
			handled = make(chan struct{})
		}
		select {
		case q <- queued{cmd: cmd, err: err, seq: seq, more: lr.R.Buffered() > 0, handled: handled}:
		case <-ss.ctx.Done():
			return
		}
		if handled != nil {
			select {
			case <-handled:
			case <-ss.ctx.Done():
				return
			}
		}
		if cmd.Verb == "QUIT" {
			quit = true
			return
		}
	}
}

// busy reports whether a transfer or checksum is running.
func (ss *session) busy() bool {
	ss.amu.Lock()
	defer ss.amu.Unlock()
	return ss.abort != nil
}

// abortTransfer cancels the running transfer; false when none runs.
func (ss *session) abortTransfer() bool {
	ss.amu.Lock()
	defer ss.amu.Unlock()
	if ss.abort == nil {
		return false
	}
	ss.abort()
	return true
}

// transferContext returns a context that ABOR or a lost control channel
// cancels; done must be called when the transfer ends.
func (ss *session) transferContext() (ctx context.Context, done func()) {
	ctx, cancel := context.WithCancel(ss.ctx)
	ss.amu.Lock()
	ss.abort = cancel
	ss.amu.Unlock()
	if p := ss.pendingAbort.Load(); p > ss.seq && ss.pendingAbort.CompareAndSwap(p, 0) {
		cancel() // an ABOR came after this command was read, before it ran
	}
	return ctx, func() {
		ss.amu.Lock()
		ss.abort = nil
		ss.amu.Unlock()
		cancel()
	}
}

// dispatch runs one command; false ends the session.
func (ss *session) dispatch(cmd gridftp.Command) bool {
	h, ok := commands[cmd.Verb]
	if !ok {
		ss.reply(gridftp.CodeSyntaxError, "Command not supported.")
		return true
	}
	if !ss.loggedIn && !h.open {
		ss.reply(gridftp.CodeNotLoggedIn, "Please login with USER and PASS.")
		return true
	}
	if h.arg == argRequired && strings.TrimSpace(cmd.Arg) == "" {
		ss.replyf(gridftp.CodeBadArguments, "%s needs an argument.", cmd.Verb)
		return true
	}
	if h.arg == argNone && cmd.Arg != "" {
		ss.replyf(gridftp.CodeBadArguments, "%s takes no argument.", cmd.Verb)
		return true
	}
	if h.write && ss.refuseWrite(cmd.Verb) {
		return true
	}
	if ss.log.Enabled(ss.ctx, slog.LevelDebug) {
		arg := gridftp.Redact(cmd.Arg) // a stack's destinations may carry passwords
		if cmd.Verb == "PASS" {
			arg = "***"
		}
		ss.log.Debug("command", "verb", cmd.Verb, "arg", arg)
	}
	if f, ok := frontCommands[cmd.Verb]; ok && len(ss.srv.Movers) > 0 {
		return f(ss, cmd.Arg) // a front end moves data through its movers (front.go)
	}
	if cmd.Verb != "RNFR" && cmd.Verb != "RNTO" {
		ss.rnfr = "" // RNTO must follow RNFR at once
	}
	return h.fn(ss, cmd.Arg)
}

// refuseWrite refuses a verb that changes the tree in a read-only session,
// as GCT refuses a path the user may not write; it reports whether it did.
func (ss *session) refuseWrite(verb string) bool {
	if !ss.readOnly {
		return false
	}
	ss.errorReply(strings.ToLower(verb), fmt.Errorf("%s: anonymous sessions only read: %w", verb, storage.ErrPermission))
	return true
}

func (ss *session) clearRest() {
	ss.restSet, ss.restOffset, ss.restRanges = false, 0, gridftp.Ranges{}
}

// path resolves a client path against the working directory.
func (ss *session) path(p string) string { return storage.Clean(ss.cwd, p) }

// errorReply reports err the way GCT does, with a GlobusError line that
// grid clients parse. The code comes from the one table in errors.go.
func (ss *session) errorReply(op string, err error) {
	if ctxErr := ss.ctx.Err(); ctxErr != nil {
		return
	}
	ss.send(errorReply(op, err))
	if replyFor(err).code == gridftp.CodeLocalError {
		ss.log.Warn("command failed", "op", op, "err", err)
	} else {
		ss.log.Debug("command failed", "op", op, "err", err)
	}
}

var errAborted = errors.New("transfer aborted")
