package main

import (
	"bytes"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ferry/service/api"
)

// lockedBuffer is a process's output, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// proc is a ferry process the test runs: ferry server or ferry connect.
type proc struct {
	cmd *exec.Cmd
	out *lockedBuffer // standard output and error
}

// start runs ferry with args in s's environment until the test ends.
func (s *service) start(args ...string) *proc {
	s.t.Helper()
	p := &proc{cmd: s.command(args...), out: &lockedBuffer{}}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { p.stop() })
	return p
}

// stop ends the process with SIGTERM and waits for it; it returns what
// it printed.
func (p *proc) stop() string {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.cmd.Wait()
	}
	return p.out.String()
}

// waitFor waits until what p printed matches re; the test fails if p
// exits first or nothing matches in a minute (a bound on a hang).
func (p *proc) waitFor(t *testing.T, re string) {
	t.Helper()
	rx := regexp.MustCompile(re)
	for deadline := time.Now().Add(time.Minute); !rx.MatchString(p.out.String()); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %q, got:\n%s", re, p.out.String())
		}
	}
}

// startServerProcess runs the ferry server binary on loopback with user
// alice (password alice-pw); the CLI's environment is s's.
func startServerProcess(t *testing.T) (*service, *proc) {
	t.Helper()
	data := t.TempDir()
	s := &service{t: t, home: t.TempDir()}
	s.ok("alice-pw\n", "user", "add", "alice", "--data", data)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s.url = "http://" + addr
	p := s.start("server", "--data", data, "--listen", addr)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if r, err := http.Get(s.url + "/healthz"); err == nil {
			r.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ferry server does not answer:\n%s", p.out.String())
		}
	}
	return s, p
}

// TestCLIAgentLifecycle: ferry connect names its endpoint by its name,
// says when it stops; the service's log names a task's worker once; while it is away ls on the endpoint says so in one
// sentence (a 503, no request ID of a failure of the service); the
// service stopped with SIGTERM while an agent is connected closes its
// database last, without warnings.
func TestCLIAgentLifecycle(t *testing.T) {
	t.Parallel()
	s, srv := startServerProcess(t)
	s.login()
	var k api.SetupKey
	s.okJSON(&k, "endpoint", "add", "laptop", "--connect")
	root, conf := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(root, "a.txt"), "a")
	agent := s.start("connect", "--service", s.url, "--root", root, "--config", conf, "--setup-key", k.SetupKey)
	agent.waitFor(t, "serving .* as endpoint")
	if ls := s.ok("", "ls", "laptop:/"); ls != "a.txt\n" {
		t.Fatalf("ls laptop:/ = %q", ls)
	}
	s.ok("", "rm", "laptop:/a.txt")
	for _, l := range strings.Split(srv.out.String(), "\n") {
		if strings.Contains(l, "task claimed") && strings.Count(l, " worker=") != 1 {
			t.Errorf("a log line does not name its worker once: %s", l)
		}
	}
	out := agent.stop()
	if !strings.Contains(out, "as endpoint alice#laptop ") {
		t.Errorf("ferry connect does not name its endpoint alice#laptop:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "ferry connect: stopped") {
		t.Errorf("ferry connect's last line is %q, not that it stopped:\n%s", last, out)
	}

	r := s.ferry("", "ls", "laptop:/")
	if r.code != exitFailure || strings.Contains(r.stderr, "request") || strings.Count(r.stderr, "\n") != 1 ||
		strings.Count(r.stderr, "agent") != 1 || !strings.Contains(r.stderr, "ferry connect") {
		t.Errorf("ls on an endpoint whose agent is away: exit %d, stderr %q; want one sentence naming the agent once and ferry connect", r.code, r.stderr)
	}

	agent = s.start("connect", "--service", s.url, "--root", root, "--config", conf)
	agent.waitFor(t, "serving .* as endpoint")
	if out := srv.stop(); strings.Contains(out, "database is closed") || strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") {
		t.Errorf("ferry server stopped with an agent connected:\n%s", out)
	}
}
