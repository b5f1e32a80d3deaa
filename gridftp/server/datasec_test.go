package server_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/server"
	"ferry/storage/posix"
)

// dialFrom opens a data connection from a local address of the test's
// choosing: 127.0.0.2 is loopback too, but not the control connection's.
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: replyTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(replyTimeout))
	t.Cleanup(func() { c.Close() })
	return c
}

// TestPassiveTheft: a stranger who connects to a passive port first, from
// another address than the client's, gets nothing of a RETR and puts
// nothing into a STOR; the client's own connection does the transfer.
func TestPassiveTheft(t *testing.T) {
	env := startServer(t)
	secret := pattern(100000)
	env.file("secret", secret)

	c := env.login()
	addr := c.pasv()
	thief := dialFrom(t, "127.0.0.2", addr)
	stolen := readAllAsync(thief)
	time.Sleep(50 * time.Millisecond) // the thief is first
	mine := dialData(t, addr)
	c.send("RETR secret")
	got := readAllAsync(mine)
	if _, last := c.final(); last.Code != gridftp.CodeTransferComplete {
		t.Fatalf("RETR: %q", last.String())
	}
	if b := <-got; !bytes.Equal(b, secret) {
		t.Errorf("the client got %d bytes, want the file's %d", len(b), len(secret))
	}
	if b := <-stolen; len(b) > 0 {
		t.Errorf("a stranger's connection got %d bytes of the file", len(b))
	}

	addr = c.pasv()
	thief = dialFrom(t, "127.0.0.2", addr)
	thief.Write([]byte("injected by a stranger"))
	time.Sleep(50 * time.Millisecond)
	mine = dialData(t, addr)
	c.send("STOR upload")
	mine.Write([]byte("the client's data"))
	mine.Close()
	if _, last := c.final(); last.Code != gridftp.CodeTransferComplete {
		t.Fatalf("STOR: %q", last.String())
	}
	if b := env.content("upload"); string(b) != "the client's data" {
		t.Errorf("stored %q", b)
	}

	// The client names the third-party sender: its connection is taken.
	c.expect("OPTS PASV From=127.0.0.2;", gridftp.CodeOK)
	addr = c.pasv()
	other := dialFrom(t, "127.0.0.2", addr)
	c.send("STOR third")
	other.Write([]byte("from the named sender"))
	other.Close()
	if _, last := c.final(); last.Code != gridftp.CodeTransferComplete {
		t.Fatalf("STOR from a named sender: %q", last.String())
	}
	if b := env.content("third"); string(b) != "from the named sender" {
		t.Errorf("stored %q", b)
	}
}

func TestTargetPolicy(t *testing.T) {
	env := startServer(t) // listens on loopback: loopback targets are fine
	c := env.login()
	for _, tc := range []struct{ port, want string }{
		{"PORT 169,254,169,254,0,80", "501 PORT to 169.254.169.254:80 refused: port 80 is a system port of another host than the client."},
		{"PORT 169,254,169,254,31,144", "501 PORT to 169.254.169.254:8080 refused: 169.254.169.254 is a link-local address."},
		{"PORT 169,254,1,1,31,144", "501 PORT to 169.254.1.1:8080 refused: 169.254.1.1 is a link-local address."},
		{"EPRT |2|fd00:ec2::254|8080|", "501 EPRT to [fd00:ec2::254]:8080 refused: fd00:ec2::254 is a cloud metadata address."},
		{"PORT 127,0,0,2,0,22", "501 PORT to 127.0.0.2:22 refused: port 22 is a system port of another host than the client."},
		{"PORT 224,0,0,1,31,144", "501 PORT to 224.0.0.1:8080 refused: 224.0.0.1 is no host."},
		{"SPOR 127,0,0,1,31,144 169,254,169,254,31,144", "501 SPOR to 169.254.169.254:8080 refused: 169.254.169.254 is a link-local address."},
		{"PORT 127,0,0,1,0,22", "200 PORT Command successful."}, // the client itself
		{"PORT 127,0,0,2,31,144", "200 PORT Command successful."},
	} {
		c.expectText(tc.port, tc.want)
	}
}

// TestAuthenticatedDataChannels: a third-party MODE E transfer between two
// servers given one credential (DCSC P, DCAU A) works in the clear and
// encrypted (PROT P); strangers connecting to the passive port, without
// the credential or with one of their own, are refused and the transfer
// still arrives whole; with PROT P no payload byte crosses in the clear.
func TestAuthenticatedDataChannels(t *testing.T) {
	src, dst := startServer(t), startServer(t)
	data := pattern(3 << 20)
	src.file("big", data)
	cred, err := gridftp.NewDataCredential(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	blob, _ := cred.DCSC()
	other, _ := gridftp.NewDataCredential(time.Hour)
	for _, prot := range []string{"C", "P"} {
		t.Run("PROT "+prot, func(t *testing.T) {
			s, d := src.login(), dst.login()
			for _, c := range []*ctl{s, d} {
				c.expect("MODE E", gridftp.CodeOK)
				c.expect("DCSC P "+blob, gridftp.CodeFileActionOK)
				c.expect("DCAU A", gridftp.CodeOK)
				c.expect("PROT "+prot, gridftp.CodeOK)
			}
			s.expect("OPTS RETR Parallelism=2,2,2;", gridftp.CodeOK)
			pasv := d.pasv()
			// Strangers first: one with no credential, one with its own.
			bare := dialFrom(t, "127.0.0.2", pasv)
			bare.Write([]byte("\x16\x03\x01 not a handshake"))
			mallory, err := net.Dial("tcp", pasv)
			if err != nil {
				t.Fatal(err)
			}
			defer mallory.Close()
			if _, err := gridftp.SecureData(context.Background(), mallory, other, true, false, 2*time.Second); err == nil {
				t.Error("a connection with another credential was accepted")
			}
			// The source sends through a recorder on its way to the destination.
			rec := startRecorder(t, pasv)
			s.expect("PORT "+gridftp.FormatHostPort(rec.addr), gridftp.CodeOK)
			d.send("STOR copy-" + prot)
			s.send("RETR big")
			for _, c := range []*ctl{s, d} {
				if _, last := c.final(); last.Code != gridftp.CodeTransferComplete {
					t.Fatalf("transfer: %q", last.String())
				}
			}
			if got := dst.content("copy-" + prot); !bytes.Equal(got, data) {
				t.Fatalf("copy differs: %d bytes, want %d", len(got), len(data))
			}
			clear := bytes.Contains(rec.bytes(), data[1<<20:1<<20+4096])
			if prot == "P" && clear {
				t.Error("PROT P: payload crossed in the clear")
			}
			if prot == "C" && !clear {
				t.Error("PROT C: the recorder did not see the payload")
			}
		})
	}
}

// TestAuthenticatedActive: with DCAU A, a PORT to a listener that does not
// hold the credential (a bounce target) gets no payload: the server's data
// connection fails its handshake.
func TestAuthenticatedActive(t *testing.T) {
	env := startServer(t)
	env.file("f", pattern(10000))
	cred, _ := gridftp.NewDataCredential(time.Hour)
	blob, _ := cred.DCSC()
	c := env.login()
	c.expect("DCSC P "+blob, gridftp.CodeFileActionOK)
	c.expect("DCAU A", gridftp.CodeOK)
	a := c.port()
	c.send("RETR f")
	victim := a.accept()
	got := readAllAsync(victim)
	if _, last := c.final(); last.Code/100 == 2 {
		t.Errorf("RETR to a listener without the credential: %q", last.String())
	}
	if b := <-got; bytes.Contains(b, pattern(10000)[:100]) {
		t.Error("the payload reached a listener without the credential")
	}
}

// recorder forwards one connection to target and keeps what passed.
type recorder struct {
	addr netip.AddrPort
	mu   sync.Mutex
	buf  bytes.Buffer
}

func startRecorder(t *testing.T, target string) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	r := &recorder{addr: ln.Addr().(*net.TCPAddr).AddrPort()}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				return
			}
			go func() { io.Copy(in, out); in.Close() }()
			go func() { io.Copy(io.MultiWriter(out, r), in); out.Close() }()
		}
	}()
	return r
}

func (r *recorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(b)
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.buf.Bytes())
}

// TestTargetPolicyAuthenticated: a credential the client made itself
// (DCSC P, DCAU A) protects the bytes, not the choice of target: PORT,
// EPRT and SPOR still follow the target policy, on a server, a striped
// front end and a session served on one connection (--stdio), so that
// no client turns the server into a blind port scanner of its host and
// network. The control connection comes in on loopback, so loopback
// targets on unprivileged ports stay allowed (ferry↔ferry third-party
// transfers on one host).
func TestTargetPolicyAuthenticated(t *testing.T) {
	cred, err := gridftp.NewDataCredential(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	blob, err := cred.DCSC()
	if err != nil {
		t.Fatal(err)
	}
	for _, srv := range []struct {
		name  string
		login func(t *testing.T) *ctl
	}{
		{"server", func(t *testing.T) *ctl { return startServer(t).login() }},
		{"striped front end", func(t *testing.T) *ctl { return startStriped(t, 2).login() }},
		{"one connection", serveOneConn},
	} {
		t.Run(srv.name, func(t *testing.T) {
			c := srv.login(t)
			c.expect("DCSC P "+blob, gridftp.CodeFileActionOK)
			c.expect("DCAU A", gridftp.CodeOK)
			for _, tc := range []struct{ port, want string }{
				{"EPRT |1|127.0.0.2|22|", "501 EPRT to 127.0.0.2:22 refused: port 22 is a system port of another host than the client."},
				{"PORT 169,254,169,254,31,144", "501 PORT to 169.254.169.254:8080 refused: 169.254.169.254 is a link-local address."},
				{"EPRT |2|fd00:ec2::254|8080|", "501 EPRT to [fd00:ec2::254]:8080 refused: fd00:ec2::254 is a cloud metadata address."},
				{"SPOR 127,0,0,2,31,144 169,254,1,1,0,80", "501 SPOR to 169.254.1.1:80 refused: port 80 is a system port of another host than the client."},
				{"EPRT |1|127.0.0.2|8080|", "200 EPRT Command successful."},
			} {
				c.expectText(tc.port, tc.want)
			}
		})
	}
}

// serveOneConn serves one accepted connection with ServeConn, as ferry
// gridftp --stdio serves its SSH session, and logs in on it.
func serveOneConn(t *testing.T) *ctl {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	env := &testEnv{t: t, addr: ln.Addr().String()}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c := env.dialRaw()
	conn, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	fsys, err := posix.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := &server.Server{FS: fsys, Anonymous: true}
	done := make(chan error, 1)
	go func() { done <- srv.ServeConn(conn) }()
	t.Cleanup(func() {
		srv.Close()
		<-done
		fsys.Close()
	})
	if r := c.read(); r.Code != gridftp.CodeReady {
		t.Fatalf("banner %q", r.String())
	}
	c.expect("USER anonymous", 331)
	c.expect("PASS ferry@", 230)
	return c
}
