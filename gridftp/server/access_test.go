package server_test

// Who may do what, and how often: anonymous sessions only read unless the
// server says otherwise; password guessing waits, per account and per
// client address, however often the guesser reconnects; connections that
// do not log in, and addresses that open too many, do not crowd out the
// others.

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/server"
	"ferry/internal/throttle"
)

// writeLines are commands that change the tree, each with a target that
// exists or a name that does not.
var writeLines = []string{
	"STOR new", "STOR f", "APPE f", "ESTO A 0 f", "ALLO 100",
	"DELE f", "MKD d2", "XMKD d2", "RMD d/empty", "XRMD d/empty",
	"RNFR f", "RNTO g", "MFMT 20000101000000 f",
	"SITE CHMOD 777 /", "SITE CHMOD 000 f", "SITE UTIME 20000101000000 f",
	"SITE RDEL d", "site rdel d", "SITE TRNC 0 f", "SITE TRNC 1125899906842624 f",
}

func TestAnonymousReadOnly(t *testing.T) {
	env := startServer(t, func(s *server.Server) {
		s.AnonymousWrite = false
		s.Auth = fakeAuth{"alice": "secret"}
	})
	env.file("f", []byte("hello"))
	env.file("d/inner", []byte("x"))
	if err := os.Mkdir(filepath.Join(env.root, "d", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, env.root)

	c := env.login()
	for _, mode := range []string{"S", "E"} {
		c.expect("MODE "+mode, 200)
		c.pasv()
		for _, line := range writeLines {
			c.send(line)
			r := c.read()
			if r.Code != gridftp.CodeFileUnavailable || r.Lines[0] != "GlobusError: v=1 c=PERMISSION_DENIED" ||
				!strings.Contains(r.String(), "Permission denied") {
				t.Errorf("MODE %s: anonymous %s: %q, want 550 PERMISSION_DENIED", mode, line, r.String())
			}
		}
	}
	if after := snapshot(t, env.root); !reflect.DeepEqual(after, before) {
		t.Fatalf("a read-only session changed the tree:\nbefore %v\nafter  %v", before, after)
	}

	// Reading still works.
	c.expect("MODE S", 200)
	c.expectText("SIZE f", "213 5")
	c.expectText("CKSM MD5 0 -1 f", "213 5d41402abc4b2a76b9719d911017c592")
	c.expect("CWD d", 250)
	c.expect("CWD /", 250)
	c.expect("MLST f", 250)
	c.expect("SITE WHOAMI", 200)
	c.expect("SCKS MD5 5d41402abc4b2a76b9719d911017c592", 200)
	dc := dialData(t, c.pasv())
	c.send("RETR f")
	got := readAllAsync(dc)
	if _, final := c.final(); final.Code != 226 || string(<-got) != "hello" {
		t.Fatalf("RETR f: %q", final.String())
	}
	dc = dialData(t, c.pasv())
	c.send("NLST")
	got = readAllAsync(dc)
	if _, final := c.final(); final.Code != 226 || !strings.Contains(string(<-got), "f\r\n") {
		t.Fatalf("NLST: %q", final.String())
	}

	// A password login on the same server writes.
	a := env.dial()
	a.expect("USER alice", 331)
	a.expect("PASS secret", 230)
	a.expect("MKD made", 257)
	a.expect("SITE CHMOD 700 made", 200)
	a.expect("RMD made", 250)

	// And so does anonymous where the server allows it.
	w := startServer(t)
	w.file("f", []byte("hello"))
	wc := w.login()
	wc.expect("MKD made", 257)
	wc.expect("DELE f", 250)
}

// clock is a settable time for the login throttle.
type clock struct{ t time.Time }

func (c *clock) Now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// loginAs logs user in from ip and returns the final PASS reply; ok is
// false when the server closed the session after it.
func loginAs(e *testEnv, ip, user, pass string) (r gridftp.Reply, closed bool) {
	e.t.Helper()
	c := e.dialFrom(ip)
	if b := c.read(); b.Code != gridftp.CodeReady {
		e.t.Fatalf("banner from %s: %q", ip, b.String())
	}
	c.expect("USER "+user, 331)
	c.send("PASS " + pass)
	r = c.read()
	c.c.SetReadDeadline(time.Now().Add(replyTimeout))
	if r.Code == gridftp.CodeLoggedIn {
		c.expectText("QUIT", "221 Goodbye.")
		return r, false
	}
	if r.Code == gridftp.CodeNotAvailable {
		c.expectClosed()
		return r, true
	}
	c.expectText("QUIT", "221 Goodbye.")
	return r, false
}

func TestLoginBackoff(t *testing.T) {
	clk := &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	env := startServer(t, func(s *server.Server) {
		s.Auth = fakeAuth{"alice": "secret", "bob": "pw"}
		s.Logins = &throttle.Throttle{Base: time.Second, Max: time.Minute, Now: clk.Now}
		s.LoginFailures = 3 // an address: 9
	})
	// Three wrong passwords for alice end one connection.
	c := env.dialFrom("127.0.0.2")
	c.read()
	for i := range 3 {
		c.expect("USER alice", 331)
		c.expectText(fmt.Sprintf("PASS guess%d", i), "530 Login incorrect.")
	}
	c.expectClosed()
	type step struct {
		why            string
		advance        time.Duration
		ip, user, pass string
		want           string // the PASS reply
	}
	steps := []step{
		{"the next connection finds the account waiting, even for her password", 0, "127.0.0.2", "alice", "secret",
			"421 Too many failed logins; try again in 1s."},
		{"from elsewhere too: the account waits", 0, "127.0.0.3", "alice", "secret", "421 Too many failed logins; try again in 1s."},
		{"other accounts log in", 0, "127.0.0.3", "bob", "pw", "230 User bob logged in."},
		{"from that address too (it failed 3 of 9)", 0, "127.0.0.2", "bob", "pw", "230 User bob logged in."},
		{"anonymous has no password to guess", 0, "127.0.0.2", "anonymous", "x", "230 User anonymous logged in."},
		{"each further failure doubles the wait", time.Minute, "127.0.0.4", "alice", "wrong", "530 Login incorrect."},
		{"", 0, "127.0.0.5", "alice", "secret", "421 Too many failed logins; try again in 2s."},
		{"", time.Minute, "127.0.0.4", "alice", "wrong", "530 Login incorrect."},
		{"", 0, "127.0.0.5", "alice", "secret", "421 Too many failed logins; try again in 4s."},
		{"", time.Minute, "127.0.0.4", "alice", "wrong", "530 Login incorrect."},
		{"", 0, "127.0.0.5", "alice", "secret", "421 Too many failed logins; try again in 8s."},
		{"once the wait is over the right password logs in", 8 * time.Second, "127.0.0.5", "alice", "secret", "230 User alice logged in."},
		{"and clears the account", 0, "127.0.0.5", "alice", "wrong", "530 Login incorrect."},
		{"", 0, "127.0.0.5", "alice", "secret", "230 User alice logged in."},
	}
	// One guess at each of many accounts from one address: the address
	// waits, for every account.
	for i := range 9 {
		steps = append(steps, step{"a spray of accounts", 0, "127.0.0.6", fmt.Sprint("user", i), "password", "530 Login incorrect."})
	}
	steps = append(steps,
		step{"the spraying address waits", 0, "127.0.0.6", "bob", "pw", "421 Too many failed logins; try again in 1s."},
		step{"bob elsewhere does not", 0, "127.0.0.7", "bob", "pw", "230 User bob logged in."})
	for _, st := range steps {
		clk.advance(st.advance)
		r, closed := loginAs(env, st.ip, st.user, st.pass)
		if r.String() != st.want {
			t.Fatalf("%s: %s from %s: %q, want %q", st.why, st.user, st.ip, r.String(), st.want)
		}
		if closed != strings.HasPrefix(st.want, "421") {
			t.Fatalf("%s: the session closed: %v", st.why, closed)
		}
	}
}

// TestLoginTimeout: a connection that trickles a byte at a time but never
// logs in is closed when its login time is up.
func TestLoginTimeout(t *testing.T) {
	const timeout = 500 * time.Millisecond
	env := startServer(t, func(s *server.Server) { s.LoginTimeout = timeout })
	start := time.Now() // before the server's clock starts
	c := env.dial()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for _, b := range "NOOP\r\nUSER anonymous\r\nPASS x" { // never ends its PASS line
			select {
			case <-stop:
				return
			case <-time.After(40 * time.Millisecond):
			}
			c.c.Write([]byte{byte(b)})
		}
	}()
	if r := c.read(); r.String() != "200 NOOP command successful." {
		t.Fatalf("NOOP: %q", r.String())
	}
	r := c.read()
	if r.Code == gridftp.CodeNeedPassword {
		r = c.read()
	}
	if r.String() != "421 Login timeout: closing control connection." {
		t.Fatalf("got %q, want the login timeout", r.String())
	}
	if d := time.Since(start); d < timeout {
		t.Errorf("closed after %v, before the login timeout of %v", d, timeout)
	}
	c.expectClosed()
	env.waitSessions(0)

	// A session that logged in has the idle limit instead.
	l := env.login()
	time.Sleep(700 * time.Millisecond)
	l.expectText("NOOP", "200 NOOP command successful.")
}

// TestSessionsPerAddress: sixty connections from one address that never
// log in (a slow drip each) hold only that address's share of the server;
// other addresses log in.
func TestSessionsPerAddress(t *testing.T) {
	env := startServer(t, func(s *server.Server) {
		s.MaxSessions = 12
		s.MaxSessionsPerAddress = 4
	})
	var refused, held []*ctl
	for range 60 {
		c := env.dialFrom("127.0.0.2")
		r := c.read()
		switch r.Code {
		case gridftp.CodeReady:
			c.write("N") // a byte now and then
			held = append(held, c)
		case gridftp.CodeNotAvailable:
			if r.String() != "421 Too many sessions from your address (limit 4); try again later." {
				t.Fatalf("refusal %q", r.String())
			}
			c.expectClosed()
			refused = append(refused, c)
		default:
			t.Fatalf("connection %d: %q", len(held)+len(refused), r.String())
		}
	}
	if len(held) != 4 {
		t.Fatalf("%d sessions held from one address, want 4", len(held))
	}
	for _, ip := range []string{"127.0.0.1", "127.0.0.3", "127.0.0.4"} {
		c := env.dialFrom(ip)
		if r := c.read(); r.Code != gridftp.CodeReady {
			t.Fatalf("%s: %q", ip, r.String())
		}
		c.expect("USER anonymous", 331)
		c.expect("PASS x", 230)
		c.expectText("NOOP", "200 NOOP command successful.")
	}
	env.waitSessions(7)
	// Closing one frees its place for that address.
	held[0].c.Close()
	env.waitSessions(6)
	if r := env.dialFrom("127.0.0.2").read(); r.Code != gridftp.CodeReady {
		t.Fatalf("after a close: %q", r.String())
	}
}
