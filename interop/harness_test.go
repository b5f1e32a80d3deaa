//go:build interop

package interop

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ferry/internal/interoptest"
	"ferry/internal/pgtest"
)

// ferryBin is the ferry binary built once by TestMain; ferryBuildErr says why
// it could not be built (tests that need it then fail with that message).
var (
	ferryBin      string
	ferryBuildErr error
)

func TestMain(m *testing.M) {
	// GCT serves anonymous sessions as `nobody`: everything the tests create
	// must be readable and writable by it, so files get 0666 and dirs 0777.
	syscall.Umask(0)
	dir, err := os.MkdirTemp("", "ferry-interop-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		os.Exit(2)
	}
	ferryBin = filepath.Join(dir, "ferry")
	ferryBuildErr = buildFerry(ferryBin)
	code := pgtest.Run(m) // a PostgreSQL cluster only if a test asks for one
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildFerry(out string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", out, "ferry/cmd/ferry")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ferry/cmd/ferry: %v\n%s", err, b)
	}
	return nil
}

// toolPath finds a program on PATH, or in the sbin directories that a
// non-root PATH lacks (globus-gridftp-server lives in /usr/sbin).
func toolPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH", name)
}

// needTools skips the test (fails it under FERRY_INTEROP=required) unless
// globus-url-copy, globus-gridftp-server and the named extra programs exist.
func needTools(t testing.TB, extra ...string) {
	t.Helper()
	for _, name := range append([]string{"globus-url-copy", "globus-gridftp-server"}, extra...) {
		if _, err := toolPath(name); err != nil {
			msg := fmt.Sprintf("%v: interop tests need the GCT programs and gfal2/lftp/curl "+
				"(Debian: globus-gridftp-server-progs globus-gass-copy-progs libglobus-xio-popen-driver gfal2-util-scripts "+
				"python3-gfal2-util gfal2-plugin-gridftp lftp curl openssh-server openssh-client; `bash .ci/run` installs them)", err)
			interoptest.Missing(t, msg)
		}
	}
}

// needFerry fails the test when the ferry binary could not be built.
func needFerry(t testing.TB) {
	t.Helper()
	if ferryBuildErr != nil {
		t.Fatalf("ferry binary unavailable: %v", ferryBuildErr)
	}
}

// server is a running GridFTP endpoint on loopback.
type server interface {
	// Name is "gct" or "ferry", for messages.
	Name() string
	// Addr is host:port of the control channel.
	Addr() string
	// URL is the ftp URL of rel, a slash-separated path under the served
	// tree; a trailing "/" (a directory for globus-url-copy) is kept.
	URL(rel string) string
	// HomeURL is the ftp URL of rel relative to the login directory (the
	// form curl and most FTP clients expect): the root of the served tree.
	HomeURL(rel string) string
	// Path is the local file name of rel.
	Path(rel string) string
}

// starter starts a fresh server with an empty tree; it is stopped at cleanup.
type starter func(t *testing.T) server

// escapePath percent-encodes each element of a slash-separated path.
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// logBuffer collects a child's output; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes returns a copy of all the output so far.
func (b *logBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// String returns the output, keeping only the last 64 KiB.
func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if len(s) > 64<<10 {
		s = "...(truncated)...\n" + s[len(s)-64<<10:]
	}
	return s
}

// proc is a child process started in its own process group.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // from Wait, valid once done is closed
}

func startProc(name string, args []string, out io.Writer) (*proc, error) {
	return startProcEnv(name, args, nil, out)
}

// startProcEnv is startProc with the test's environment changed by env (see
// withEnv); nil env: the test's own.
func startProcEnv(name string, args, env []string, out io.Writer) (*proc, error) {
	cmd := exec.Command(name, args...)
	if env != nil {
		cmd.Env = withEnv(os.Environ(), env)
	}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// withEnv returns base changed by the entries of env in order: "KEY=value"
// sets KEY, a bare "KEY" removes it (so a child does not inherit, say, the
// X509_USER_PROXY of whoever runs the tests).
func withEnv(base, env []string) []string {
	out := make([]string, 0, len(base)+len(env))
	out = append(out, base...)
	for _, e := range env {
		key, _, set := strings.Cut(e, "=")
		kept := out[:0]
		for _, o := range out {
			if k, _, _ := strings.Cut(o, "="); k != key {
				kept = append(kept, o)
			}
		}
		out = kept
		if set {
			out = append(out, e)
		}
	}
	return out
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signalGroup sends sig to the whole process group (GCT forks per session).
func (p *proc) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// wait waits up to d for the process to end.
func (p *proc) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// waitBanner waits until addr accepts a connection and sends a 220 reply,
// failing early if the process ends. It closes the probe with QUIT.
func waitBanner(p *proc, addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("exited before serving: %v", p.err)
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			last = err
			time.Sleep(50 * time.Millisecond)
			continue
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				last = fmt.Errorf("reading banner: %v (got %q)", err, line)
				break
			}
			if strings.HasPrefix(line, "220 ") {
				io.WriteString(c, "QUIT\r\n")
				c.Close()
				return nil
			}
			if !strings.HasPrefix(line, "220-") && !strings.HasPrefix(line, " ") {
				last = fmt.Errorf("unexpected banner line %q", line)
				break
			}
		}
		c.Close()
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no 220 banner on %s within %v: %v", addr, within, last)
}

// ferryConfig says how to start a ferry gridftp server.
type ferryConfig struct {
	Root      string   // served tree; "" means a new temp dir
	Anonymous bool     // pass --anonymous --anonymous-write: the tests store files
	Args      []string // extra flags, e.g. --password-file FILE
}

// ferryServer is a `ferry gridftp` child process.
type ferryServer struct {
	child
	root  string
	addr  string
	debug bool // it logs every command (--log-level debug)
}

// startFerry starts an anonymous ferry server on a fresh temp root.
func startFerry(t *testing.T) server {
	t.Helper()
	return startFerryConfig(t, ferryConfig{Anonymous: true})
}

// startFerryConfig starts ferry gridftp on 127.0.0.1 and a free port, waits
// for its banner, and stops it (SIGTERM, then SIGKILL) at cleanup. Its stderr
// goes to the test log if the test fails.
func startFerryConfig(t *testing.T, cfg ferryConfig) *ferryServer {
	t.Helper()
	needFerry(t)
	root := cfg.Root
	if root == "" {
		root = t.TempDir()
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	args := []string{"gridftp", "--root", root, "--listen", addr}
	if cfg.Anonymous {
		args = append(args, "--anonymous", "--anonymous-write")
	}
	args = append(args, cfg.Args...)
	s := &ferryServer{child: child{t: t, name: "ferry gridftp", args: args, log: &logBuffer{}}, root: root, addr: addr}
	t.Cleanup(s.stop)
	s.start()
	return s
}

func (s *ferryServer) start() {
	s.t.Helper()
	if err := waitBanner(s.launch(), s.addr, 15*time.Second); err != nil {
		s.t.Fatalf("ferry gridftp on %s: %v\nstderr:\n%s", s.addr, err, s.log)
	}
}

// restart starts the server again with the same root, port and flags.
func (s *ferryServer) restart() { s.t.Helper(); s.start() }

// stop gives ferry gridftp its drain on SIGTERM, 10 s for the sessions
// at work (a transfer whose sender hangs, as GCT's multicast does when a
// child fails) before it closes them, and a margin: with a bound of 10 s,
// such a session made "did not exit" a race.
func (s *ferryServer) stop() { s.child.stop(15 * time.Second) }

func (s *ferryServer) Name() string { return "ferry" }
func (s *ferryServer) Addr() string { return s.addr }
func (s *ferryServer) Root() string { return s.root }

// URL: ferry serves its root as "/", so the URL path is the path under it.
func (s *ferryServer) URL(rel string) string {
	return "ftp://" + s.addr + "/" + escapePath(strings.TrimPrefix(rel, "/"))
}

// HomeURL: ferry logs sessions in at its root.
func (s *ferryServer) HomeURL(rel string) string { return s.URL(rel) }

func (s *ferryServer) Path(rel string) string { return filepath.Join(s.root, filepath.FromSlash(rel)) }

// gctServer is a globus-gridftp-server child process (anonymous, loopback;
// or GSI, see startGCTGSI).
type gctServer struct {
	t       *testing.T
	root    string
	addr    string
	args    []string
	env     []string // changes to the daemon's environment (withEnv)
	scheme  string   // of URL and HomeURL; "": ftp
	logFile string
	out     *logBuffer
	mu      sync.Mutex
	p       *proc
}

// startGCT starts globus-gridftp-server on 127.0.0.1 and a free port, serving
// a fresh world-writable temp dir, and stops it at cleanup.
func startGCT(t *testing.T) server {
	t.Helper()
	return startGCTServer(t)
}

// extra are more flags of globus-gridftp-server, e.g. -popen-whitelist.
func startGCTServer(t *testing.T, extra ...string) *gctServer {
	t.Helper()
	return startGCTAt(t, gctRoot(t, "ferry-interop-gct-"), extra...)
}

// gctRoot makes a fresh tree that GCT's sessions, running as nobody, can
// write (not t.TempDir: its parents are 0700), removed at cleanup.
func gctRoot(t *testing.T, prefix string) string {
	t.Helper()
	root, err := os.MkdirTemp(sharedTempBase(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	return root
}

// startGCTAt starts globus-gridftp-server serving root, as startGCTServer.
func startGCTAt(t *testing.T, root string, extra ...string) *gctServer {
	t.Helper()
	return startGCTOn(t, "127.0.0.1", root, extra...)
}

// startGCTOn is startGCTAt with the control and data channels on ip.
func startGCTOn(t *testing.T, ip, root string, extra ...string) *gctServer {
	t.Helper()
	bin, err := toolPath("globus-gridftp-server")
	if err != nil {
		t.Fatal(err)
	}
	port := freePortOn(t, ip)
	logFile := filepath.Join(t.TempDir(), "gridftp.log")
	args := []string{
		"-aa", // anonymous clear-text logins
		"-p", port,
		"-control-interface", ip,
		"-data-interface", ip,
		"-home-dir", root,
		"-d", "ERROR",
		"-l", logFile,
	}
	if os.Geteuid() == 0 {
		// Required as root: anonymous sessions setuid to this user.
		args = append(args, "-anonymous-user", "nobody")
	}
	args = append(args, extra...)
	s := &gctServer{t: t, root: root, addr: net.JoinHostPort(ip, port),
		args: append([]string{bin}, args...), logFile: logFile, out: &logBuffer{}}
	t.Cleanup(s.stop)
	s.start()
	return s
}

func (s *gctServer) start() {
	s.t.Helper()
	p, err := startProcEnv(s.args[0], s.args[1:], s.env, s.out)
	if err != nil {
		s.t.Fatalf("start globus-gridftp-server: %v", err)
	}
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
	if err := waitBanner(p, s.addr, 15*time.Second); err != nil {
		s.t.Fatalf("globus-gridftp-server on %s: %v\n%s", s.addr, err, s.logs())
	}
}

func (s *gctServer) logs() string {
	b, _ := os.ReadFile(s.logFile)
	return fmt.Sprintf("output:\n%s\nlog %s:\n%s", s.out, s.logFile, b)
}

// kill9 kills the daemon and its per-session children with SIGKILL.
func (s *gctServer) kill9() {
	s.t.Helper()
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	p.signalGroup(syscall.SIGKILL)
	if !p.wait(10 * time.Second) {
		s.t.Fatalf("globus-gridftp-server did not die after SIGKILL")
	}
}

func (s *gctServer) restart() { s.t.Helper(); s.start() }

func (s *gctServer) stop() {
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	if p == nil {
		return
	}
	p.signalGroup(syscall.SIGTERM)
	if !p.wait(5 * time.Second) {
		p.signalGroup(syscall.SIGKILL)
		p.wait(5 * time.Second)
	}
	p.signalGroup(syscall.SIGKILL) // forked session processes
	if s.t.Failed() {
		s.t.Logf("globus-gridftp-server %s %s", s.addr, s.logs())
	}
}

func (s *gctServer) Name() string { return "gct" }
func (s *gctServer) Addr() string { return s.addr }

// Scheme is the URL scheme of the server: "ftp", or "gsiftp" in GSI mode.
func (s *gctServer) Scheme() string {
	if s.scheme == "" {
		return "ftp"
	}
	return s.scheme
}

// URL: GCT URL paths are absolute file names.
func (s *gctServer) URL(rel string) string {
	return s.Scheme() + "://" + s.addr + escapePath(s.root+"/"+strings.TrimPrefix(rel, "/"))
}

// HomeURL: -home-dir is the served tree.
func (s *gctServer) HomeURL(rel string) string {
	return s.Scheme() + "://" + s.addr + "/" + escapePath(strings.TrimPrefix(rel, "/"))
}

func (s *gctServer) Path(rel string) string { return filepath.Join(s.root, filepath.FromSlash(rel)) }

// restartable is a server the restart test can kill and bring back.
type restartable interface {
	server
	kill9()
	restart()
}

var (
	_ restartable = (*ferryServer)(nil)
	_ restartable = (*gctServer)(nil)
)

// cmdTimeout bounds every client command unless a test says otherwise.
const cmdTimeout = 2 * time.Minute

// runTool runs a client program with a timeout and returns its combined
// output; the error includes the command line and the output.
func runTool(ctx context.Context, timeout time.Duration, stdin string, name string, args ...string) (string, error) {
	return runToolEnv(ctx, timeout, nil, stdin, name, args...)
}

// runToolEnv is runTool with the test's environment changed by env (see
// withEnv); nil env: the test's own.
func runToolEnv(ctx context.Context, timeout time.Duration, env []string, stdin string, name string, args ...string) (string, error) {
	bin, err := toolPath(name)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	if env != nil {
		cmd.Env = withEnv(os.Environ(), env)
	}
	cmd.Stdin = strings.NewReader(stdin)
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (timed out after %v)", err, time.Since(start).Round(time.Millisecond))
		}
		return string(out), fmt.Errorf("%s: %v\n%s", cmdline(name, args), err, out)
	}
	return string(out), nil
}

func cmdline(name string, args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " '\"#;&|$") {
			a = strconv.Quote(a)
		}
		q[i] = a
	}
	return name + " " + strings.Join(q, " ")
}

// mustRun runs a client program and fails the test if it fails.
func mustRun(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := runTool(context.Background(), cmdTimeout, "", name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// guc runs globus-url-copy and fails the test on error.
func guc(t testing.TB, args ...string) string {
	t.Helper()
	return mustRun(t, "globus-url-copy", args...)
}

// gucErr runs globus-url-copy and returns its error (for expected failures).
func gucErr(args ...string) (string, error) {
	return runTool(context.Background(), cmdTimeout, "", "globus-url-copy", args...)
}

// fileURL is the file:// URL of a local path (a trailing "/" is kept).
func fileURL(p string) string {
	return "file://" + escapePath(filepath.ToSlash(p))
}

// dirURL is like fileURL with a trailing slash, as globus-url-copy wants for
// directories.
func dirURL(p string) string { return strings.TrimSuffix(fileURL(p), "/") + "/" }

// sharedTempBase is where world-accessible temp dirs go: /dev/shm when
// usable (fast, and large files stay off the disk), else the system temp dir.
func sharedTempBase() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() && syscall.Access("/dev/shm", 2) == nil {
		return "/dev/shm"
	}
	return os.TempDir()
}

// child is a long-running ferry process of a test (an endpoint server, the
// service, a connect agent), started, signalled, killed and stopped the same way whatever
// its role.
type child struct {
	t    *testing.T
	name string // e.g. "ferry gridftp", for messages
	bin  string // the program run with args; "": ferry
	args []string
	env  []string // changes to the test's environment (withEnv); nil: none
	log  *logBuffer
	mu   sync.Mutex
	p    *proc
}

// launch starts the process (again) and returns it.
func (c *child) launch() *proc {
	c.t.Helper()
	bin := c.bin
	if bin == "" {
		bin = ferryBin
	}
	fmt.Fprintf(c.log, "### %s %s\n", bin, strings.Join(c.args, " "))
	p, err := startProcEnv(bin, c.args, c.env, c.log)
	if err != nil {
		c.t.Fatalf("start %s: %v", c.name, err)
	}
	c.mu.Lock()
	c.p = p
	c.mu.Unlock()
	return p
}

// current is the process last launched; nil before the first.
func (c *child) current() *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.p
}

// kill9 kills the process with SIGKILL and waits for it to go.
func (c *child) kill9() {
	c.t.Helper()
	p := c.current()
	p.signalGroup(syscall.SIGKILL)
	if !p.wait(10 * time.Second) {
		c.t.Fatalf("%s did not die after SIGKILL", c.name)
	}
	fmt.Fprintf(c.log, "### killed with SIGKILL\n")
}

// signal sends sig to the process group, e.g. SIGSTOP and SIGCONT.
func (c *child) signal(sig syscall.Signal) { c.current().signalGroup(sig) }

// stop ends the process with SIGTERM, which it must obey within grace and
// cleanly, then kills what it left behind, and shows its log if the test
// failed.
func (c *child) stop(grace time.Duration) {
	p := c.current()
	if p == nil {
		return
	}
	if !p.exited() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		if !p.wait(grace) {
			c.t.Errorf("%s did not exit within %v of SIGTERM", c.name, grace)
		} else if p.err != nil {
			c.t.Errorf("%s did not exit cleanly on SIGTERM: %v", c.name, p.err)
		}
	}
	p.signalGroup(syscall.SIGKILL)
	p.wait(5 * time.Second)
	if c.t.Failed() {
		c.t.Logf("%s %s log:\n%s", c.name, strings.Join(c.args, " "), c.log)
	}
}
