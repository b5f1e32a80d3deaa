package popen

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"ferry/stack"
	"ferry/storage"
)

// Name is the layer's name in a stack.
const Name = "popen"

// Program is a program the server lets clients run: Path, absolute, also
// named by Alias when that is not "".
type Program struct{ Alias, Path string }

// ParseWhitelist reads GCT's -popen-whitelist: "[alias:]path,...", e.g.
// "tar:/bin/tar,/usr/bin/md5sum".
func ParseWhitelist(s string) ([]Program, error) {
	var out []Program
	for _, item := range strings.Split(s, ",") {
		p := Program{Path: item}
		if alias, path, ok := strings.Cut(item, ":"); ok {
			if alias == "" {
				return nil, fmt.Errorf("popen whitelist entry %q: empty alias", item)
			}
			p = Program{Alias: alias, Path: path}
		}
		if !filepath.IsAbs(p.Path) {
			return nil, fmt.Errorf("popen whitelist entry %q: the program must be an absolute path", item)
		}
		out = append(out, p)
	}
	return out, nil
}

// Kind is the popen layer, running the programs of whitelist with env (as
// "KEY=VALUE"; none: an empty environment).
func Kind(whitelist []Program, env []string) stack.Kind {
	return stack.Kind{Terminal: func(e stack.Entry, senv stack.Env) (stack.Terminal, error) {
		return newPopen(e, senv, whitelist, env)
	}}
}

// approvalFailed heads the refusal of a program, as GCT's does.
const approvalFailed = "Approving popen arguments failed."

// popen runs one program per transfer.
type popen struct {
	argv     []string // argv[0] is the program's full path
	dir      string
	env      []string
	readOnly bool
}

func newPopen(e stack.Entry, senv stack.Env, whitelist []Program, env []string) (stack.Terminal, error) {
	var argv []string
	for _, o := range e.Opts {
		switch o.Key {
		case "argv":
			argv = stack.List(o.Value)
		case "env", "pass_env":
			return nil, stack.Refuse(fmt.Sprintf("popen option %s refused: programs get the server's environment.", o.Key))
		case "ignore_errors":
			return nil, stack.Refuse("popen option ignore_errors refused: a failing program fails its transfer.")
		case "blocking":
			// How GCT's driver waits for the program; nothing here.
		default:
			return nil, stack.Refuse(fmt.Sprintf("popen has no option %s.", o.Key))
		}
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, stack.Refuse("popen argv not supplied.")
	}
	path := ""
	for _, p := range whitelist {
		if argv[0] == p.Path || p.Alias != "" && argv[0] == p.Alias {
			path = p.Path
			break
		}
	}
	if path == "" {
		return nil, stack.Refuse(approvalFailed, fmt.Sprintf("program '%s' not whitelisted.", argv[0]))
	}
	if err := syscall.Access(path, 0x4|0x1); err != nil { // R_OK|X_OK, as GCT checks
		return nil, stack.Refuse(approvalFailed, fmt.Sprintf("program '%s' cannot be run: %v.", path, err))
	}
	if senv.Dir == "" {
		return nil, stack.Refuse("popen runs programs only where the served tree is a local directory.")
	}
	if env == nil {
		env = []string{} // exec.Cmd passes the server's own environment on for nil
	}
	return &popen{argv: append([]string{path}, argv[1:]...), dir: senv.Dir, env: env, readOnly: senv.ReadOnly}, nil
}

// Create runs the program with the transfer's bytes as its standard
// input; its output is discarded.
func (p *popen) Create(ctx context.Context, _ *stack.Transfer) (stack.Sink, error) {
	if p.readOnly {
		return nil, fmt.Errorf("popen %s: a read-only session cannot feed a program: %w", p.argv[0], storage.ErrPermission)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	pr, err := p.start(ctx, r, nil)
	if err != nil {
		w.Close()
		return nil, err
	}
	return &Sink{proc: pr, stdin: w}, nil
}

// Open runs the program with the transfer's bytes read from its standard
// output; its standard input is empty.
func (p *popen) Open(ctx context.Context, _ *stack.Transfer) (stack.Source, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	pr, err := p.start(ctx, nil, w)
	if err != nil {
		r.Close()
		return nil, err
	}
	return &Source{proc: pr, stdout: r}, nil
}

// Limits on what of a failed program's standard error is kept and shown.
const (
	stderrBytes = 4 << 10
	stderrLines = 10
)

// exitGrace is how long a write that the program refused waits for the
// program to end, to report its exit status rather than a broken pipe.
const exitGrace = time.Second

// pipeGrace is how long, after the program ended, its standard error may
// stay open (held by a process it left behind) before it is closed.
const pipeGrace = time.Second

// proc is a running program.
type proc struct {
	name   string // argv[0]
	cmd    *exec.Cmd
	stderr head
	exited chan struct{} // closed once the program is reaped
	stop   func() bool   // ends the watch on the transfer's context

	mu    sync.Mutex
	cause error // why it was aborted
}

// start runs p's program with stdin and stdout (nil: /dev/null) in a
// process group of its own, which is killed when ctx ends first.
func (p *popen) start(ctx context.Context, stdin, stdout *os.File) (*proc, error) {
	pr := &proc{name: p.argv[0], exited: make(chan struct{})}
	pr.cmd = &exec.Cmd{
		Path:        p.argv[0],
		Args:        p.argv,
		Dir:         p.dir,
		Env:         p.env,
		Stderr:      &pr.stderr,
		SysProcAttr: sysProcAttr(),
		WaitDelay:   pipeGrace,
	}
	if stdin != nil {
		pr.cmd.Stdin = stdin
	}
	if stdout != nil {
		pr.cmd.Stdout = stdout
	}
	if err := pr.cmd.Start(); err != nil {
		return nil, fmt.Errorf("popen %s: %w", p.argv[0], err)
	}
	go func() {
		pr.cmd.Wait() // its status is in cmd.ProcessState
		close(pr.exited)
	}()
	pr.stop = context.AfterFunc(ctx, func() { pr.Abort(context.Cause(ctx)) })
	return pr, nil
}

// Abort kills the program and everything it started in its process
// group, and waits until it is reaped.
func (pr *proc) Abort(cause error) {
	pr.mu.Lock()
	if pr.cause == nil {
		pr.cause = cause
	}
	pr.mu.Unlock()
	select {
	case <-pr.exited:
	default:
		syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGKILL)
		<-pr.exited
	}
}

// end waits for the program to exit and says how it fared.
func (pr *proc) end() error {
	<-pr.exited
	pr.stop()
	pr.mu.Lock()
	cause := pr.cause
	pr.mu.Unlock()
	if cause != nil {
		return cause
	}
	return pr.status()
}

// status is nil for a program that exited with 0, else its exit code or
// signal and the start of its standard error, for the client.
func (pr *proc) status() error {
	st := pr.cmd.ProcessState
	if st.Success() {
		return nil
	}
	what := fmt.Sprintf("exited with an error (exit code: %d)", st.ExitCode())
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		what = fmt.Sprintf("was terminated by a signal (%v)", ws.Signal())
	}
	text := "popened program " + what
	if msg := pr.stderr.lines(); msg != "" {
		text += ":\n" + msg
	}
	return &stack.ShownError{Text: text, Err: &exec.ExitError{ProcessState: st}}
}

// broken is why a write to the program failed: its exit status, when it
// ends within exitGrace and failed, else err (a broken pipe).
func (pr *proc) broken(err error) error {
	select {
	case <-pr.exited:
		if e := pr.status(); e != nil {
			return e
		}
	case <-time.After(exitGrace):
	}
	return fmt.Errorf("popen %s: %w", pr.name, err)
}

// Sink is a program fed a transfer's bytes in order.
type Sink struct {
	*proc
	stdin *os.File
}

func (s *Sink) Write(b []byte) (int, error) {
	n, err := s.stdin.Write(b)
	if err != nil {
		err = s.broken(err)
	}
	return n, err
}

// Close ends the program's input and waits for it to exit.
func (s *Sink) Close() error {
	s.stdin.Close()
	return s.end()
}

// Source is a program's output, read from start to end.
type Source struct {
	*proc
	stdout *os.File
}

func (s *Source) Read(b []byte) (int, error) { return s.stdout.Read(b) }

// Close waits for the program to exit; if it is still writing, it is
// told no one reads (SIGPIPE).
func (s *Source) Close() error {
	s.stdout.Close()
	return s.end()
}

// head keeps the first stderrBytes written to it.
type head struct {
	mu sync.Mutex
	b  []byte
}

func (h *head) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := stderrBytes - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// lines is the first stderrLines lines kept, without the last newline.
func (h *head) lines() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ls := strings.SplitAfterN(string(h.b), "\n", stderrLines+1)
	return strings.TrimRight(strings.Join(ls[:min(len(ls), stderrLines)], ""), "\n")
}

var (
	_ stack.Aborter = (*Sink)(nil)
	_ stack.Aborter = (*Source)(nil)
)
