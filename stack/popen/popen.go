package popen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
// named by Alias when that is not "", with the arguments Args approves
// (nil: those of the built-in profile of Path's base name, if any, else
// none).
type Program struct {
	Alias, Path string
	Args        Policy
}

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

// Declare sets the arguments a program of programs takes from an
// operator's "NAME=PATTERN", NAME its alias or path (see ParsePattern).
func Declare(programs []Program, decl string) error {
	name, pat, ok := strings.Cut(decl, "=")
	if !ok {
		return fmt.Errorf("popen arguments %q: want NAME=PATTERN", decl)
	}
	policy, err := ParsePattern(pat)
	if err != nil {
		return fmt.Errorf("popen arguments of %s: %w", name, err)
	}
	for i, p := range programs {
		if name == p.Path || p.Alias != "" && name == p.Alias {
			programs[i].Args = policy
			return nil
		}
	}
	return fmt.Errorf("popen arguments of %s: not a whitelisted program", name)
}

// Config is what the server lets sessions run.
type Config struct {
	Programs []Program
	// Env is the programs' environment, "KEY=VALUE"; none: an empty one.
	Env []string
	// Anonymous lets anonymous sessions, and sessions that may only read,
	// run programs too.
	Anonymous bool
	// User is who programs run as, when the server runs as root, for
	// sessions that map to no local account (anonymous and password
	// logins); "": nobody.
	User string
}

// Kind is the popen layer, running the programs of c.
func Kind(c Config) stack.Kind {
	if c.Env == nil {
		c.Env = []string{} // exec.Cmd passes the server's own environment on for nil
	}
	iso := &isolator{}
	return stack.Kind{Terminal: func(e stack.Entry, senv stack.Env) (stack.Terminal, error) {
		return newPopen(e, senv, c, iso)
	}}
}

// approvalFailed heads the refusal of a program, as GCT's does.
const approvalFailed = "Approving popen arguments failed."

// popen runs one program per transfer.
type popen struct {
	path     string
	args     []string // the client's
	policy   Policy
	tree     tree
	env      []string
	run      runAs
	iso      *isolator
	readOnly bool
	log      *slog.Logger
}

func newPopen(e stack.Entry, senv stack.Env, c Config, iso *isolator) (stack.Terminal, error) {
	argv, err := parseOpts(e)
	if err != nil {
		return nil, err
	}
	if (senv.Anonymous || senv.ReadOnly) && !c.Anonymous {
		return nil, stack.Refuse("popen is not offered to anonymous or read-only sessions.")
	}
	prog, err := c.program(argv[0])
	if err != nil {
		return nil, err
	}
	if senv.Dir == "" || senv.FS == nil {
		return nil, stack.Refuse("popen runs programs only where the served tree is a local directory.")
	}
	dir, err := filepath.Abs(senv.Dir) // absolute paths become dir's, for programs run in dir
	if err != nil {
		return nil, fmt.Errorf("popen: %w", err)
	}
	run, err := runAsFor(senv.User, c.User)
	if err != nil {
		return nil, stack.Refuse(approvalFailed, err.Error()+".")
	}
	log := senv.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &popen{
		path: prog.Path, args: argv[1:], policy: prog.Args,
		tree: tree{fs: senv.FS, dir: dir},
		env:  c.Env, run: run, iso: iso, readOnly: senv.ReadOnly, log: log,
	}
	if _, err := p.command(context.Background()); err != nil {
		return nil, err
	}
	return p, nil
}

// parseOpts reads a popen entry's options: its argv, never empty.
func parseOpts(e stack.Entry) ([]string, error) {
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
	return argv, nil
}

// program is the whitelisted program name names (its alias or path),
// with its policy: its own, else its base name's profile.
func (c Config) program(name string) (Program, error) {
	for _, p := range c.Programs {
		if name != p.Path && (p.Alias == "" || name != p.Alias) {
			continue
		}
		if err := syscall.Access(p.Path, 0x4|0x1); err != nil { // R_OK|X_OK, as GCT checks
			return Program{}, stack.Refuse(approvalFailed, fmt.Sprintf("program '%s' cannot be run: %v.", p.Path, err))
		}
		if p.Args == nil {
			p.Args = Profile(p.Path)
		}
		return p, nil
	}
	return Program{}, stack.Refuse(approvalFailed, fmt.Sprintf("program '%s' not whitelisted.", name))
}

// command is what the program runs with: the client's arguments as its
// policy approves them now (the tree may have changed since the stack
// was set), after the program's path.
func (p *popen) command(ctx context.Context) (command, error) {
	t := p.tree
	t.ctx = ctx
	c, err := approve(p.policy, p.args, &t)
	if err != nil {
		return command{}, stack.Refuse(approvalFailed, fmt.Sprintf("program '%s': %v.", p.path, err))
	}
	c.args = append([]string{p.path}, c.args...)
	return c, nil
}

// Create runs the program with the transfer's bytes as its standard
// input; its output is discarded.
func (p *popen) Create(ctx context.Context, _ *stack.Transfer) (stack.Sink, error) {
	if p.readOnly {
		return nil, fmt.Errorf("popen %s: a read-only session cannot feed a program: %w", p.path, storage.ErrPermission)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	pr, c, err := p.start(ctx, r, nil)
	if err != nil {
		w.Close()
		return nil, err
	}
	s := &Sink{proc: pr, stdin: w}
	if c.input != nil {
		s.guard = newGuard(c.input)
	}
	return s, nil
}

// Open runs the program with the transfer's bytes read from its standard
// output; its standard input is empty.
func (p *popen) Open(ctx context.Context, _ *stack.Transfer) (stack.Source, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	pr, _, err := p.start(ctx, nil, w)
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
	name     string // argv[0]
	cmd      *exec.Cmd
	isolated bool // the program leads a PID namespace, not only a group
	stderr   head
	exited   chan struct{} // closed once the program is reaped
	stop     func() bool   // ends the watch on the transfer's context

	mu    sync.Mutex
	cause error // why it was aborted
}

// start runs p's program with stdin and stdout (nil: /dev/null), as the
// user p runs programs as, in a process tree of its own (startTree),
// which is killed when ctx ends first.
func (p *popen) start(ctx context.Context, stdin, stdout *os.File) (*proc, command, error) {
	c, err := p.command(ctx)
	if err != nil {
		var r *stack.Refusal
		errors.As(err, &r)
		return nil, c, &stack.ShownError{Text: strings.Join(r.Lines, "\n"), Err: storage.ErrPermission}
	}
	pr := &proc{name: p.path, exited: make(chan struct{})}
	newCmd := func(attr *syscall.SysProcAttr) *exec.Cmd {
		cmd := &exec.Cmd{
			Path:        p.path,
			Args:        c.args,
			Dir:         p.tree.dir,
			Env:         p.env,
			Stderr:      &pr.stderr,
			SysProcAttr: attr,
			WaitDelay:   pipeGrace,
		}
		if stdin != nil {
			cmd.Stdin = stdin
		}
		if stdout != nil {
			cmd.Stdout = stdout
		}
		return cmd
	}
	if pr.cmd, pr.isolated, err = p.iso.startTree(newCmd, p.run.cred, p.log); err != nil {
		return nil, c, fmt.Errorf("popen %s: %w", p.path, err)
	}
	go func() {
		pr.cmd.Wait() // its status is in cmd.ProcessState
		close(pr.exited)
	}()
	pr.stop = context.AfterFunc(ctx, func() { pr.Abort(context.Cause(ctx)) })
	return pr, c, nil
}

// Abort kills the program and everything it started (its process tree,
// or its process group where the tree cannot be told), and waits until
// it is reaped.
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

// Sink is a program fed a transfer's bytes in order, each checked first
// when the program's input must be (guard).
type Sink struct {
	*proc
	stdin *os.File
	guard *guard // nil: none
}

func (s *Sink) Write(b []byte) (int, error) {
	if s.guard != nil {
		if err := s.guard.Check(b); err != nil {
			err = &stack.ShownError{Text: fmt.Sprintf("popen %s refused its input: %v.", s.name, err), Err: storage.ErrPermission}
			s.Abort(err)
			return 0, err
		}
	}
	n, err := s.stdin.Write(b)
	if err != nil {
		err = s.broken(err)
	}
	return n, err
}

// Close ends the program's input and waits for it to exit.
func (s *Sink) Close() error {
	if s.guard != nil {
		s.guard.Close()
	}
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
