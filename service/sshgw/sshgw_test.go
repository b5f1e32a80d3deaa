package sshgw_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"ferry/service/core"
	"ferry/service/domain"
	"ferry/service/sqlstore"
	"ferry/service/sshgw"
)

// gateway is a gateway on loopback over a SQLite store, whose command
// lines are "exit N" (exit status N), "terminal" (prints whether a pty
// was asked for), "echo WORDS", "wait" (until ctx ends).
type gateway struct {
	addr     string
	alice    ssh.Signer // alice's key, stored
	stranger ssh.Signer // a key stored for nobody
	sessions chan string
}

func newGateway(t *testing.T, tune func(*sshgw.Server)) *gateway {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "ferry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	u := domain.User{Name: "alice", PasswordHash: "x"}
	if err := st.CreateUser(ctx, &u); err != nil {
		t.Fatal(err)
	}
	g := &gateway{alice: newKey(t), stranger: newKey(t), sessions: make(chan string, 16)}
	k, err := domain.ParseSSHKey(string(ssh.MarshalAuthorizedKey(g.alice.PublicKey())))
	if err != nil {
		t.Fatal(err)
	}
	k.UserID = u.ID
	if err := st.AddSSHKey(ctx, &k); err != nil {
		t.Fatal(err)
	}
	hostKey, err := sshgw.LoadOrCreateHostKey(filepath.Join(t.TempDir(), "host_key"))
	if err != nil {
		t.Fatal(err)
	}
	s := &sshgw.Server{Users: &core.Service{Store: st}, HostKey: hostKey, Login: func(ctx context.Context, u domain.User, _ net.Addr) (sshgw.Runner, func(), error) {
		g.sessions <- u.Name
		return run, func() {}, nil
	}}
	if tune != nil {
		tune(s)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go s.Serve(ln)
	g.addr = ln.Addr().String()
	return g
}

func run(ctx context.Context, rw sshgw.IO, line string) int {
	word, rest, _ := strings.Cut(line, " ")
	switch word {
	case "exit":
		n, _ := strconv.Atoi(rest)
		return n
	case "terminal":
		fmt.Fprintf(rw.Out, "terminal %v\nnext line\n", rw.Terminal)
	case "echo":
		fmt.Fprintln(rw.Out, rest)
	case "wait":
		<-ctx.Done()
		return 130
	}
	return 0
}

func newKey(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (g *gateway) dial(t *testing.T, user string, auth ...ssh.AuthMethod) (*ssh.Client, error) {
	t.Helper()
	c, err := ssh.Dial("tcp", g.addr, &ssh.ClientConfig{User: user, Auth: auth, HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 5 * time.Second})
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func (g *gateway) login(t *testing.T) *ssh.Client {
	t.Helper()
	c, err := g.dial(t, "alice", ssh.PublicKeys(g.alice))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// exec runs line in a new session of c and returns its output and exit status.
func exec(t *testing.T, c *ssh.Client, pty bool, line string) (string, int) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if pty {
		if err := s.RequestPty("xterm", 24, 80, ssh.TerminalModes{}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := s.Output(line)
	var ee *ssh.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitStatus()
	case err != nil:
		t.Fatalf("%s: %v", line, err)
	}
	return string(out), 0
}

// TestLogin: only stored public keys of the user named log in.
func TestLogin(t *testing.T) {
	g := newGateway(t, nil)
	for _, c := range []struct {
		name, user string
		auth       ssh.AuthMethod
		ok         bool
	}{
		{"alice's key", "alice", ssh.PublicKeys(g.alice), true},
		{"another key", "alice", ssh.PublicKeys(g.stranger), false},
		{"alice's key as bob", "bob", ssh.PublicKeys(g.alice), false},
		{"password", "alice", ssh.Password("x"), false},
		{"keyboard-interactive", "alice", ssh.KeyboardInteractive(func(string, string, []string, []bool) ([]string, error) { return []string{"x"}, nil }), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := g.dial(t, c.user, c.auth)
			if (err == nil) != c.ok {
				t.Fatalf("login: %v, want ok %v", err, c.ok)
			}
		})
	}
}

// TestPolicy: a session runs one command line, or a prompt, and gets a
// terminal if it asks; everything else SSH offers is refused.
func TestPolicy(t *testing.T) {
	g := newGateway(t, nil)
	c := g.login(t)
	session := func(t *testing.T) *ssh.Session {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	for _, tc := range []struct {
		name    string
		try     func(t *testing.T) error
		granted bool
	}{
		{"exec", func(t *testing.T) error { _, code := exec(t, c, false, "exit 0"); return exitErr(code) }, true},
		{"pty", func(t *testing.T) error { return session(t).RequestPty("xterm", 24, 80, ssh.TerminalModes{}) }, true},
		{"shell", func(t *testing.T) error { return session(t).Shell() }, true},
		{"subsystem sftp", func(t *testing.T) error { return session(t).RequestSubsystem("sftp") }, false},
		{"env", func(t *testing.T) error { return session(t).Setenv("LD_PRELOAD", "/tmp/x.so") }, false},
		{"agent forwarding", func(t *testing.T) error { return request(session(t), "auth-agent-req@openssh.com", nil) }, false},
		{"x11 forwarding", func(t *testing.T) error {
			return request(session(t), "x11-req", ssh.Marshal(struct {
				Single        bool
				Proto, Cookie string
				Screen        uint32
			}{false, "MIT-MAGIC-COOKIE-1", "00", 0}))
		}, false},
		{"second exec in a session", func(t *testing.T) error {
			s := session(t)
			if err := s.Start("wait"); err != nil {
				t.Fatal(err)
			}
			return request(s, "exec", ssh.Marshal(struct{ S string }{"exit 0"}))
		}, false},
		{"local forwarding (direct-tcpip)", func(t *testing.T) error {
			conn, err := c.Dial("tcp", g.addr)
			if err == nil {
				conn.Close()
			}
			return err
		}, false},
		{"remote forwarding (tcpip-forward)", func(t *testing.T) error {
			ln, err := c.Listen("tcp", "127.0.0.1:0")
			if err == nil {
				ln.Close()
			}
			return err
		}, false},
		{"another channel type", func(t *testing.T) error {
			_, _, err := c.OpenChannel("x11", nil)
			return err
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.try(t)
			if (err == nil) != tc.granted {
				t.Fatalf("got %v, want granted %v", err, tc.granted)
			}
		})
	}
}

func exitErr(code int) error {
	if code != 0 {
		return fmt.Errorf("exit status %d", code)
	}
	return nil
}

// request sends a session request and says whether it was granted.
func request(s *ssh.Session, typ string, payload []byte) error {
	ok, err := s.SendRequest(typ, true, payload)
	if err == nil && !ok {
		err = fmt.Errorf("%s refused", typ)
	}
	return err
}

// TestExec: the command line's exit status is the session's, and a pty
// makes the output a raw terminal's (CR LF).
func TestExec(t *testing.T) {
	g := newGateway(t, nil)
	c := g.login(t)
	for _, tc := range []struct {
		line string
		pty  bool
		out  string
		code int
	}{
		{"exit 0", false, "", 0},
		{"exit 4", false, "", 4},
		{"exit 127", false, "", 127},
		{"echo hello there", false, "hello there\n", 0},
		{"terminal", false, "terminal false\nnext line\n", 0},
		{"terminal", true, "terminal true\r\nnext line\r\n", 0},
	} {
		t.Run(fmt.Sprintf("%s pty %v", tc.line, tc.pty), func(t *testing.T) {
			out, code := exec(t, c, tc.pty, tc.line)
			if out != tc.out || code != tc.code {
				t.Fatalf("got %q, exit %d; want %q, exit %d", out, code, tc.out, tc.code)
			}
		})
	}
}

// ptySession is a new session of c with a terminal.
func ptySession(t *testing.T, c *ssh.Client) *ssh.Session {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.RequestPty("xterm", 24, 80, ssh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCtrlC: on a terminal, Ctrl-C ends the running command.
func TestCtrlC(t *testing.T) {
	g := newGateway(t, nil)
	s := ptySession(t, g.login(t))
	in, _ := s.StdinPipe()
	if err := s.Start("wait"); err != nil {
		t.Fatal(err)
	}
	in.Write([]byte{3})
	var ee *ssh.ExitError
	if err := s.Wait(); !errors.As(err, &ee) || ee.ExitStatus() != 130 {
		t.Fatalf("after Ctrl-C: %v, want exit status 130", err)
	}
}

// TestPrompt: a shell session is a prompt that runs a line at a time
// until exit.
func TestPrompt(t *testing.T) {
	g := newGateway(t, nil)
	s := ptySession(t, g.login(t))
	var out bytes.Buffer
	s.Stdout = &out
	s.Stdin = strings.NewReader("echo one\rterminal\rexit 3\rexit\r")
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	var ee *ssh.ExitError
	if err := s.Wait(); !errors.As(err, &ee) || ee.ExitStatus() != 3 {
		t.Fatalf("prompt ended with %v, want the last line's status 3", err)
	}
	for _, want := range []string{"ferry> ", "logged in as alice", "one\r\n", "terminal true\r\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("prompt output lacks %q:\n%s", want, out.String())
		}
	}
}

// waitClosed fails the test unless the gateway closes c soon.
func waitClosed(t *testing.T, c *ssh.Client, what string) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- c.Wait() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s stayed open", what)
	}
}

// TestLimits: each user's sessions, idle connections, handshakes and
// connections not logged in are bounded.
func TestLimits(t *testing.T) {
	t.Run("sessions per user", func(t *testing.T) {
		g := newGateway(t, func(s *sshgw.Server) { s.Sessions = 2 })
		c1, c2 := g.login(t), g.login(t)
		for _, c := range []*ssh.Client{c1, c2} {
			s, err := c.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Start("wait"); err != nil {
				t.Fatal(err)
			}
		}
		if s, err := c1.NewSession(); err == nil {
			s.Close()
			t.Fatal("a third session of alice was opened")
		}
	})
	t.Run("connections per user", func(t *testing.T) {
		// The server counts a connection once its login is done on its
		// side, which may come after the client's: which of three
		// connections at once is closed is up to the scheduler, but one
		// is, and only one.
		g := newGateway(t, func(s *sshgw.Server) { s.Sessions = 2 })
		closed := make(chan int, 3)
		for i := range 3 {
			c := g.login(t)
			go func() { c.Wait(); closed <- i }()
		}
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("alice has three connections open, the limit is 2")
		}
		select {
		case i := <-closed:
			t.Fatalf("connection %d was closed too: two may stay", i)
		case <-time.After(300 * time.Millisecond):
		}
	})
	t.Run("idle", func(t *testing.T) {
		g := newGateway(t, func(s *sshgw.Server) { s.Idle = 200 * time.Millisecond })
		waitClosed(t, g.login(t), "an idle connection")
	})
	t.Run("busy is not idle", func(t *testing.T) {
		g := newGateway(t, func(s *sshgw.Server) { s.Idle = 200 * time.Millisecond })
		c := g.login(t)
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start("wait"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(600 * time.Millisecond)
		if _, code := exec(t, c, false, "exit 5"); code != 5 {
			t.Fatalf("exit %d", code)
		}
	})
	t.Run("handshake and connections not logged in", func(t *testing.T) {
		g := newGateway(t, func(s *sshgw.Server) { s.Unauthenticated, s.Handshake = 1, 300*time.Millisecond })
		first, err := net.Dial("tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		time.Sleep(100 * time.Millisecond) // accepted
		second, err := net.Dial("tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer second.Close()
		second.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.ReadAll(second); err != nil {
			t.Fatalf("the connection over the limit was not closed: %v", err)
		}
		// The first never logs in: closed after the handshake time.
		first.SetReadDeadline(time.Now().Add(3 * time.Second))
		if _, err := io.ReadAll(first); err != nil {
			t.Fatalf("a connection that never logged in stayed open: %v", err)
		}
		// Its place is free again once the gateway has seen it go.
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			_, err := g.dial(t, "alice", ssh.PublicKeys(g.alice))
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after both closed: %v", err)
			}
		}
	})
}

// TestHostKey: the host key is made once, readable by its owner only,
// and read back the same.
func TestHostKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "data", "ssh_host_ed25519_key")
	a, err := sshgw.LoadOrCreateHostKey(p)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("host key file: %v, %v; want mode 0600", fi, err)
	}
	b, err := sshgw.LoadOrCreateHostKey(p)
	if err != nil {
		t.Fatal(err)
	}
	if a.PublicKey().Type() != ssh.KeyAlgoED25519 || !bytes.Equal(a.PublicKey().Marshal(), b.PublicKey().Marshal()) {
		t.Fatal("the host key changed when read again")
	}
}
