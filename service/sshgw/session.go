package sshgw

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/term"

	"ferry/service/domain"
)

// exitFailure is the exit status of a session the gateway could not
// begin.
const exitFailure = 1

// prompt is the interactive prompt.
const prompt = "ferry> "

// session is one session channel: a pty (maybe), then one exec or shell.
type session struct {
	srv  *Server
	user domain.User
	addr net.Addr
	ch   ssh.Channel
	idle *idle
	log  *slog.Logger

	mu      sync.Mutex
	pty     bool
	w, h    int
	started bool
	term    *term.Terminal
}

// Request types of a session channel that the gateway grants: a
// terminal, its size, and one command line or prompt. Every other (env,
// subsystem, auth-agent-req@openssh.com, x11-req, signal, ...) is refused.
const (
	reqPty    = "pty-req"
	reqWindow = "window-change"
	reqExec   = "exec"
	reqShell  = "shell"
)

func (s *session) serve(ctx context.Context, reqs <-chan *ssh.Request) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer s.ch.Close()
	done := make(chan struct{})
	for {
		var req *ssh.Request
		select {
		case req = <-reqs:
		case <-done:
			return
		}
		if req == nil {
			return // the client closed the channel
		}
		ok := false
		switch req.Type {
		case reqPty:
			ok = s.setPty(req.Payload)
		case reqWindow:
			ok = s.setSize(req.Payload)
		case reqExec, reqShell:
			line, parsed := "", true
			if req.Type == reqExec {
				line, parsed = sshString(req.Payload)
			}
			s.mu.Lock()
			ok = parsed && !s.started
			s.started = s.started || ok
			s.mu.Unlock()
			if ok {
				go func() {
					defer close(done)
					s.exit(s.run(ctx, cancel, req.Type == reqShell, line))
				}()
			}
		default:
			s.log.Info("ssh: refused a request", "type", req.Type)
		}
		if req.WantReply {
			req.Reply(ok, nil)
		}
	}
}

// run runs the session's command line, or the prompt, and returns the
// exit status.
func (s *session) run(ctx context.Context, cancel context.CancelFunc, shell bool, line string) int {
	run, end, err := s.srv.Login(ctx, s.user, s.addr)
	if err != nil {
		s.log.Error("ssh: session refused", "err", err)
		fmt.Fprintln(s.ch.Stderr(), "ferry: the service cannot take your session now; try again later")
		return exitFailure
	}
	defer end()
	in := &input{r: s.ch, idle: s.idle}
	s.mu.Lock()
	pty := s.pty
	s.mu.Unlock()
	if shell {
		in.tty = true
		return s.prompt(ctx, run, pump(in))
	}
	rw := IO{In: in, Out: s.ch, Err: s.ch.Stderr(), Terminal: pty}
	if pty {
		// The client's terminal is raw: translate as a pty would, and
		// take Ctrl-C as the end of the command.
		in.tty, in.cooked, in.intr = true, true, cancel
		rw.In, rw.Out, rw.Err = pump(in), crlf{s.ch}, crlf{s.ch} // one screen, as a pty has
	}
	s.log.Info("ssh: command", "line", line)
	done := s.idle.busy()
	defer done()
	return run(ctx, rw, line)
}

// prompt reads command lines at "ferry> " with line editing and history,
// and runs each, until exit, quit, Ctrl-D or the end of input. Ctrl-C
// ends a running command, and at the prompt clears the line.
func (s *session) prompt(ctx context.Context, run Runner, in *pumped) int {
	t := term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{in, s.ch}, prompt)
	s.mu.Lock()
	s.term = t
	if s.w > 0 {
		t.SetSize(s.w, s.h)
	}
	s.mu.Unlock()
	fmt.Fprintf(t, "ferry: logged in as %s. Type help for the commands, exit to leave.\r\n", s.user.Name)
	status := 0
	for {
		line, err := t.ReadLine()
		if err != nil {
			return status
		}
		switch strings.TrimSpace(line) {
		case "":
			continue
		case "exit", "quit", "logout":
			return status
		}
		cmdCtx, cancel := context.WithCancel(ctx)
		in.from.setIntr(cancel)
		done := s.idle.busy()
		status = run(cmdCtx, IO{In: &lines{t: t}, Out: t, Err: t, Terminal: true}, line)
		done()
		in.from.setIntr(nil)
		cancel()
		if ctx.Err() != nil {
			return status
		}
	}
}

// exit sends the exit status and ends the session.
func (s *session) exit(code int) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(code))
	s.ch.SendRequest("exit-status", false, b[:])
	s.ch.CloseWrite()
	s.ch.Close()
}

// setPty takes a pty-req: TERM, width, height (characters), pixels, modes.
func (s *session) setPty(p []byte) bool {
	var r struct {
		Term         string
		W, H, PW, PH uint32
		Modes        string
	}
	if ssh.Unmarshal(p, &r) != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return false
	}
	s.pty, s.w, s.h = true, int(r.W), int(r.H)
	return true
}

// setSize takes a window-change: width, height, pixels.
func (s *session) setSize(p []byte) bool {
	var r struct{ W, H, PW, PH uint32 }
	if ssh.Unmarshal(p, &r) != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w, s.h = int(r.W), int(r.H)
	if s.term != nil {
		s.term.SetSize(s.w, s.h)
	}
	return true
}

// sshString reads the one string of an exec or subsystem request.
func sshString(p []byte) (string, bool) {
	var r struct{ S string }
	if ssh.Unmarshal(p, &r) != nil {
		return "", false
	}
	return r.S, true
}

// input is a session's standard input. Reading from it counts as
// activity. On a terminal (tty) Ctrl-C calls intr (the running command's
// cancel) rather than reaching the reader, and with cooked it also does
// what a pty's line discipline would: a CR is a newline, Ctrl-D the end
// of input.
type input struct {
	r           io.Reader
	idle        *idle
	tty, cooked bool
	eof         bool
	mu          sync.Mutex
	intr        func()
}

func (in *input) setIntr(f func()) {
	in.mu.Lock()
	in.intr = f
	in.mu.Unlock()
}

func (in *input) Read(p []byte) (int, error) {
	if in.eof {
		return 0, io.EOF
	}
	for {
		n, err := in.r.Read(p)
		in.idle.touch()
		if !in.tty || n == 0 {
			return n, err
		}
		out := p[:0]
		for _, b := range p[:n] {
			switch b {
			case 3: // Ctrl-C
				in.mu.Lock()
				intr := in.intr
				in.mu.Unlock()
				if intr != nil {
					intr()
					continue
				}
				b = 0x15 // at the prompt: Ctrl-U, clear the line
			case 4: // Ctrl-D
				if in.cooked {
					in.eof = true
					return len(out), nil
				}
			case '\r':
				if in.cooked {
					b = '\n'
				}
			}
			out = append(out, b)
		}
		if len(out) > 0 || err != nil {
			return len(out), err
		}
	}
}

// pumped is a terminal's input, read as it comes, so that a Ctrl-C
// reaches the input's intr while the command reads nothing.
type pumped struct {
	*io.PipeReader
	from *input
}

func pump(in *input) *pumped {
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, in)
		pw.CloseWithError(err)
	}()
	return &pumped{pr, in}
}

// lines is a command's standard input at the prompt: what is typed, a
// line at a time, until Ctrl-D. It is not echoed, nor kept in the
// prompt's history: it may be a password.
type lines struct {
	t    *term.Terminal
	left []byte // of the last line, what the last Read had no room for
}

func (l *lines) Read(p []byte) (int, error) {
	if len(l.left) == 0 {
		s, err := l.t.ReadPassword("")
		if err != nil {
			return 0, err
		}
		l.left = []byte(s + "\n")
	}
	n := copy(p, l.left)
	l.left = l.left[n:]
	return n, nil
}

// crlf writes to a raw terminal: each newline as CR LF.
type crlf struct{ w io.Writer }

func (c crlf) Write(p []byte) (int, error) {
	if _, err := c.w.Write(bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}
