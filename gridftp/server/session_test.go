package server_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/server"
	"ferry/storage"
)

// fakeAuth accepts the passwords of its map.
type fakeAuth map[string]string

func (a fakeAuth) Check(user, password string) bool {
	p, ok := a[user]
	return ok && p == password
}

func TestBanner(t *testing.T) {
	env := startServer(t)
	c := env.dialRaw()
	r := c.read()
	if r.Code != 220 || len(r.Lines) != 1 || !strings.HasSuffix(r.Text(), "ready.") ||
		!strings.Contains(r.Text(), "GridFTP Server") || !strings.Contains(r.Text(), server.Version) {
		t.Fatalf("banner %q", r.String())
	}
	c.expectText("QUIT", "221 Goodbye.")
	c.expectClosed()
}

func TestBeforeLogin(t *testing.T) {
	env := startServer(t)
	c := env.dial()
	for _, line := range []string{
		"RETR f", "STOR f", "APPE f", "LIST", "NLST", "MLSD", "MLST f", "CWD /", "CDUP", "PWD",
		"PASV", "EPSV", "SPAS", "PORT 127,0,0,1,4,1", "EPRT |1|127.0.0.1|1025|", "SIZE f", "MDTM f",
		"DELE f", "MKD d", "RMD d", "RNFR f", "RNTO g", "SITE CHMOD 644 f", "SITE VERSION",
		"CKSM MD5 0 -1 f", "SCKS MD5 x", "ERET P 0 1 f", "ESTO A 0 f", "TYPE I", "MODE E", "SYST",
		"OPTS RETR Parallelism=2;", "DCAU N", "PROT C", "PBSZ 0", "REST 0", "STAT", "ALLO 1",
		// Argument checks come after the login check.
		"RETR", "PWD x",
	} {
		c.expectText(line, "530 Please login with USER and PASS.")
	}
	c.expect("FEAT", gridftp.CodeFeatures)
	c.expect("HELP", gridftp.CodeHelp)
	c.expectText("NOOP", "200 NOOP command successful.")
	c.expectText("PASS x", "503 Login with USER first.")
	c.expectText("USER", "501 USER needs an argument.")
	c.expectText("QUIT", "221 Goodbye.")
	c.expectClosed()
}

func TestFEAT(t *testing.T) {
	env := startServer(t)
	c := env.login()
	r := c.expect("FEAT", gridftp.CodeFeatures)
	if r.Lines[0] != "Extensions supported" || r.Lines[len(r.Lines)-1] != "End." {
		t.Fatalf("FEAT %q", r.String())
	}
	feats := map[string]bool{}
	for _, l := range r.Lines[1 : len(r.Lines)-1] {
		if !strings.HasPrefix(l, " ") {
			t.Errorf("FEAT line %q does not start with a space (RFC 2389)", l)
		}
		f, _, _ := strings.Cut(strings.TrimSpace(l), " ")
		feats[f] = true
	}
	for _, f := range []string{"CKSM", "DCAU", "MFMT", "SIZE", "MDTM", "MLST", "ERET", "ESTO", "SPAS", "SPOR", "REST", "PARALLEL", "UTF8"} {
		if !feats[f] {
			t.Errorf("FEAT lacks %s:\n%s", f, r.String())
		}
	}
	if !strings.Contains(r.String(), " CKSM MD5:") || !strings.Contains(r.String(), "ADLER32:") {
		t.Errorf("CKSM line: %s", r.String())
	}
	c.expect("FEAT x", gridftp.CodeBadArguments)
}

func TestLogin(t *testing.T) {
	auth := fakeAuth{"alice": "secret"}
	tests := []struct {
		name      string
		anonymous bool
		user      string
		pass      string
		want      string
	}{
		{"anonymous", true, "anonymous", "globus@", "230 User anonymous logged in."},
		{"ftp", true, "ftp", "", "230 User anonymous logged in."},
		{"anonymous any case", true, "AnonYmous", "x", "230 User anonymous logged in."},
		{"anonymous disabled", false, "anonymous", "globus@", "530 Login incorrect."},
		{"password", false, "alice", "secret", "230 User alice logged in."},
		{"password with anonymous on", true, "alice", "secret", "230 User alice logged in."},
		{"wrong password", true, "alice", "Secret", "530 Login incorrect."},
		{"unknown user", true, "bob", "secret", "530 Login incorrect."},
		{"empty password", false, "alice", "", "530 Login incorrect."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := startServer(t, func(s *server.Server) { s.Anonymous = tt.anonymous; s.Auth = auth })
			c := env.dial()
			c.expectText("USER "+tt.user, fmt.Sprintf("331 Password required for %s.", tt.user))
			c.expectText(strings.TrimSpace("PASS "+tt.pass), tt.want)
			if strings.HasPrefix(tt.want, "230") {
				c.expectText("SITE WHOAMI", "200 "+map[bool]string{true: "anonymous", false: tt.user}[tt.user != "alice"])
				c.expectText("PASS again", "503 Already logged in.")
				c.expectText("PWD", `257 "/" is current directory.`)
			} else {
				c.expectText("PWD", "530 Please login with USER and PASS.")
			}
		})
	}
}

func TestLoginNoAuthenticator(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.Anonymous = false })
	c := env.dial()
	c.expect("USER alice", 331)
	c.expectText("PASS secret", "530 Login incorrect.")
}

func TestLoginFailuresCloseSession(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.Auth = fakeAuth{"alice": "secret"} })
	c := env.dial()
	for i := range 3 {
		c.expect("USER alice", 331)
		c.expectText(fmt.Sprintf("PASS wrong%d", i), "530 Login incorrect.")
	}
	c.expectClosed()
	env.waitSessions(0)

	// A success resets nothing but still works after two failures.
	c = env.dial()
	for range 2 {
		c.expect("USER alice", 331)
		c.expect("PASS wrong", 530)
	}
	c.expect("USER alice", 331)
	c.expectText("PASS secret", "230 User alice logged in.")
	c.expectText("NOOP", "200 NOOP command successful.")
}

func TestUserLogsOut(t *testing.T) {
	env := startServer(t)
	c := env.login()
	c.expect("USER someone", 331)
	c.expectText("PWD", "530 Please login with USER and PASS.")
}

func TestMaxSessions(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.MaxSessions = 2 })
	a := env.login()
	b := env.dial()
	env.waitSessions(2)

	third := env.dialRaw()
	r := third.read()
	if r.Code != gridftp.CodeNotAvailable {
		t.Fatalf("third session got %q, want 421", r.String())
	}
	third.expectClosed()
	if env.srv.Sessions() != 2 {
		t.Fatalf("Sessions() = %d after a refusal", env.srv.Sessions())
	}

	b.expectText("QUIT", "221 Goodbye.")
	b.expectClosed()
	env.waitSessions(1)
	c := env.login()
	c.expectText("NOOP", "200 NOOP command successful.")
	a.expectText("NOOP", "200 NOOP command successful.")

	// Closing without QUIT frees the slot as well.
	a.c.Close()
	env.waitSessions(1)
	env.login().expectText("NOOP", "200 NOOP command successful.")
}

func TestUnknownCommands(t *testing.T) {
	env := startServer(t)
	c := env.login()
	tests := []struct{ line, want string }{
		{"XYZZY", "500 Command not supported."},
		{"AUTH GSSAPI", "504 Security mechanism not understood."}, // no GSI configured
		{"ADAT AAAA", "503 ADAT before AUTH."},
		{"SITE BOGUS", "500 Invalid command."},
		{"SITE BUFSIZE 1024", "500 Invalid command."},
		{"SITE", "501 SITE needs an argument."},
		{"", "500 Syntax error, command unrecognized."},
		{"STOR a\x00b", "500 Syntax error, command unrecognized."},
		{"N0OP", "500 Syntax error, command unrecognized."},
		{"ABCDEFGHIJ", "500 Syntax error, command unrecognized."},
		{"noop", "200 NOOP command successful."},
		{"NoOp", "200 NOOP command successful."},
		{"\xff\xf4\xff\xf2NOOP", "200 NOOP command successful."},
		{"SYST", "215 UNIX Type: L8"},
		{"SYST x", "501 SYST takes no argument."},
		{"TYPE I", "200 Type set to I."},
		{"type a", "200 Type set to A."},
		{"TYPE X", "504 Type X not supported."},
		{"STRU F", "200 Structure set to F."},
		{"STRU R", "504 Structure R not supported."},
		{"MODE E", "200 Mode set to E."},
		{"MODE S", "200 Mode set to S."},
		{"MODE Z", "501 'MODE Z' unrecognized transfer mode."},
		{"ALLO 1048576", "200 ALLO command successful."},
		{"DCAU N", "200 DCAU N."},
		{"DCAU A", "504 DCAU A needs a credential for the data channels: send DCSC P first."},
		{"DCAU S /CN=x", "504 DCAU S needs a GSI login with a delegated credential; DCAU N and A are available."},
		{"DCAU X", "504 Bad DCAU mode."},
		{"DCSC P bm90IGJhc2U2NA==", "501 DCSC: gridftp: bad data channel credential: want a certificate and its key in PEM."},
		{"DCSC P !!!", "501 DCSC: gridftp: bad data channel credential: illegal base64 data at input byte 0."},
		{"DCSC X", "504 DCSC: expected P <credential> or D."},
		{"DCSC D", "250 OK."},
		{"OPTS PASV From=127.0.0.2;", "200 OPTS Command Successful."},
		{"OPTS PASV From=nowhere;", "501 OPTS PASV: From: \"nowhere\" is no IP address."},
		{"OPTS PASV AllowDelayed=1;", "501 OPTS PASV: AllowDelayed is not supported."},
		{"PBSZ 0", "200 PBSZ=0"},
		{"PBSZ 1048576", "200 PBSZ=1048576"},
		{"PBSZ x", "501 Bad PBSZ value."},
		{"PROT C", "200 Protection level set to C."},
		{"PROT P", "536 Protection level P needs DCAU A."},
		{"TREV RESTART 5", "200 TREV command successful."},
		{"TREV RESTART", "501 TREV: expected EVENT INTERVAL."},
		{"OPTS RETR Parallelism=4,4,4;", "200 OPTS Command Successful."},
		{"OPTS RETR Parallelism=4,4,4", "500 OPTS failed."},
		{"OPTS CKSM markers=5;", "200 OPTS Command Successful."},
		{"OPTS BOGUS x", "500 OPTS failed."},
		{"REST 100", "350 Restart Marker OK. Send STORE or RETR to initiate transfer."},
		{"REST 0-10,20-30", "350 Restart Marker OK. Send STORE or RETR to initiate transfer."},
		{"REST x", "501 Bad restart offset."},
		{"REST 10-5", "501 Bad restart range list."},
		{"EPSV ALL", "200 EPSV ALL command successful."},
		{"PORT 1,2,3", "501 Bad PORT address."},
		{"PORT 127,0,0,1,0,0", "501 Bad PORT address."},
		{"EPRT |1|::1|5|", "501 Bad EPRT address."},
		{"SPOR x", "501 Bad SPOR address list."},
		{"ABOR", "226 ABOR command successful."},
		{"STAT", "212 GridFTP server status."},
		{"HELP", ""},
	}
	for _, tt := range tests {
		if tt.want == "" {
			c.expect(tt.line, gridftp.CodeHelp)
			continue
		}
		c.expectText(tt.line, tt.want)
	}
}

func TestOverlongLine(t *testing.T) {
	env := startServer(t)
	c := env.login()
	c.write("NOOP " + strings.Repeat("x", gridftp.MaxLine+100) + "\r\nNOOP\r\n")
	r := c.read()
	if r.String() != "500 Command line too long." {
		t.Fatalf("over-long line: %q", r.String())
	}
	c.expectClosed()
	env.waitSessions(0)

	// A long line under the limit is an ordinary command.
	c = env.login()
	c.expectText("NOOP "+strings.Repeat("y", 8000), "200 NOOP command successful.")
}

// TestLongName: a name longer than the file system allows (ENAMETOOLONG) is
// the client's mistake: 550/553 like any unusable name, not 451 "Input/output
// error" with a warning in the server's log.
func TestLongName(t *testing.T) {
	env := startServer(t)
	c := env.login()
	long := strings.Repeat("y", 8000)
	for _, line := range []string{"SIZE " + long, "MKD " + long, "DELE " + long, "CWD " + long, "STOR " + long} {
		if strings.HasPrefix(line, "STOR") {
			c.send("PASV") // with a data channel set up, the name is what fails
			c.read()
		}
		c.send(line)
		r := c.read()
		if r.Code != gridftp.CodeFileUnavailable && r.Code != gridftp.CodeNameNotAllowed {
			t.Errorf("%s: got %q, want 550 or 553", trunc(line), r.String())
		}
	}
}

func TestPipelining(t *testing.T) {
	env := startServer(t)
	env.file("f", []byte("hello"))
	c := env.login()
	var b strings.Builder
	for range 50 {
		b.WriteString("SIZE f\r\n")
	}
	b.WriteString("SIZE missing\r\nMKD d\r\nCWD d\r\nPWD\r\nCDUP\r\nRNFR f\r\nRNTO g\r\nSIZE g\r\nNOOP\r\n")
	c.write(b.String())
	for i := range 50 {
		if r := c.read(); r.String() != "213 5" {
			t.Fatalf("reply %d: %q", i, r.String())
		}
	}
	for _, want := range []string{"550", `257 Directory "/d" created successfully.`, "250 CWD command successful.",
		`257 "/d" is current directory.`, "250 CWD command successful.", "350 OK. Send RNTO with destination name.",
		"250 OK.", "213 5", "200 NOOP command successful."} {
		r := c.read()
		if r.String() != want && fmt.Sprint(r.Code) != want {
			t.Fatalf("got %q, want %q", r.String(), want)
		}
	}
	// More than the session queues: TCP flow control holds the rest.
	b.Reset()
	for range 500 {
		b.WriteString("NOOP\r\n")
	}
	c.write(b.String())
	for i := range 500 {
		if r := c.read(); r.Code != 200 {
			t.Fatalf("NOOP %d: %q", i, r.String())
		}
	}
}

func TestIdleTimeout(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.IdleTimeout = 300 * time.Millisecond })
	c := env.login()
	time.Sleep(50 * time.Millisecond)
	c.expectText("NOOP", "200 NOOP command successful.")
	// Silence past the limit ends the session (GCT says 421 first).
	c.c.SetReadDeadline(time.Now().Add(replyTimeout))
	r, err := gridftp.ReadReply(c.br)
	if err == nil && r.Code != gridftp.CodeNotAvailable {
		t.Fatalf("idle session got %q", r.String())
	}
	if err == nil {
		c.expectClosed()
	}
	env.waitSessions(0)
}

func TestServerClose(t *testing.T) {
	base := runtime.NumGoroutine()
	env := startServer(t)
	a := env.login()
	a.pasv()
	env.login()
	env.waitSessions(2)
	env.srv.Close()
	a.expectClosed()
	if env.srv.Sessions() != 0 {
		t.Fatalf("Sessions() = %d after Close", env.srv.Sessions())
	}
	settle(t, base)
}

// TestNoPanic sends arguments that crashed a handler. A panic in a session
// goroutine takes the whole process down, so each case runs in a child
// process (this test binary run again) and the parent reports the crash.
func TestNoPanic(t *testing.T) {
	cases := []struct{ name, line, want string }{
		// handleTYPE indexes strings.Fields(arg)[0]: a blank argument passes
		// the "argument required" check and has no fields.
		{"TYPE blank", "TYPE  ", "501"},
		{"TYPE tab", "TYPE \t", "501"},
	}
	if name := os.Getenv("FERRY_NOPANIC_CHILD"); name != "" {
		for _, tc := range cases {
			if tc.name != name {
				continue
			}
			env := startServer(t)
			c := env.login()
			c.send(tc.line)
			if r := c.read(); fmt.Sprint(r.Code) != tc.want {
				t.Fatalf("%q: got %q, want %s", tc.line, r.String(), tc.want)
			}
			c.expectText("NOOP", "200 NOOP command successful.")
		}
		return
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestNoPanic$", "-test.count=1")
			cmd.Env = append(os.Environ(), "FERRY_NOPANIC_CHILD="+tc.name)
			out, err := cmd.CombinedOutput()
			if err != nil {
				s := string(out)
				if i := strings.Index(s, "panic:"); i >= 0 {
					s = s[i:min(len(s), i+1500)]
				}
				t.Fatalf("%q: child failed: %v\n%s", tc.line, err, s)
			}
		})
	}
}

// writeCounter counts the writes on the connections its listener accepts.
type writeCounter struct {
	net.Listener
	writes atomic.Int64
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, writes: &l.writes}, nil
}

type countedConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestPipelinedRepliesBatched: the replies of quick commands a client
// pipelines (directories made, renames, lookups) go out together, in a
// write or a few, not one write each; each is the reply it was.
func TestPipelinedRepliesBatched(t *testing.T) {
	const n = 20
	var wc *writeCounter
	env := startServerLn(t, func(ln net.Listener) net.Listener { wc = &writeCounter{Listener: ln}; return wc })
	c := env.login()
	var b strings.Builder
	var want []string
	for i := range n {
		fmt.Fprintf(&b, "MKD d%d\r\nRNFR d%d\r\nRNTO e%d\r\n", i, i, i)
		want = append(want, fmt.Sprintf(`257 Directory "/d%d" created successfully.`, i), "350 OK. Send RNTO with destination name.", "250 OK.")
	}
	b.WriteString("SIZE missing\r\n")
	want = append(want, "550")
	before := wc.writes.Load()
	c.write(b.String())
	for _, w := range want {
		if r := c.read(); r.String() != w && fmt.Sprint(r.Code) != w {
			t.Fatalf("got %q, want %q", r.String(), w)
		}
	}
	writes := wc.writes.Load() - before
	if writes > int64(len(want)/2) {
		t.Errorf("%d replies in %d writes; want them together", len(want), writes)
	}
	t.Logf("%d replies in %d writes", len(want), writes)
	for i := range n {
		if st, err := os.Stat(filepath.Join(env.root, fmt.Sprintf("e%d", i))); err != nil || !st.IsDir() {
			t.Errorf("e%d: %v", i, err)
		}
	}
}

// slowOpen is a driver whose Open of /slow waits until release closes.
type slowOpen struct {
	storage.Driver
	release chan struct{}
}

func (s *slowOpen) Open(ctx context.Context, name string) (storage.File, error) {
	if name == "/slow" {
		<-s.release
	}
	return s.Driver.Open(ctx, name)
}

// TestHeldReplyGoesOut: a quick command's reply held for the command
// pipelined behind it goes out although that one takes long to answer
// (a checksum of a file slow to open): the client gets it meanwhile.
func TestHeldReplyGoesOut(t *testing.T) {
	slow := &slowOpen{release: make(chan struct{})}
	env := startServer(t, func(s *server.Server) { slow.Driver = s.FS; s.FS = slow })
	var once sync.Once
	release := func() { once.Do(func() { close(slow.release) }) }
	t.Cleanup(release) // before the server closes: a failed read leaves the checksum waiting
	env.file("slow", []byte("data"))
	c := env.login()
	c.write("MKD d\r\nCKSM MD5 0 -1 slow\r\n")
	r := c.read() // before the checksum is done
	release()
	if r.Code != 257 {
		t.Fatalf("MKD: %q", r.String())
	}
	if r := c.read(); r.Code != 213 {
		t.Fatalf("CKSM: %q", r.String())
	}
}

// TestHeldReplyPartialLine: a quick command's reply goes out although
// part of the next command's line came with it and the rest is late (a
// client typing).
func TestHeldReplyPartialLine(t *testing.T) {
	env := startServer(t)
	c := env.login()
	c.write("MKD d\r\nPW")
	if r := c.read(); r.Code != 257 {
		t.Fatalf("MKD: %q", r.String())
	}
	c.write("D\r\n")
	if r := c.read(); r.String() != `257 "/" is current directory.` {
		t.Fatalf("PWD: %q", r.String())
	}
}
