//go:build interop

package interop

// A minimal raw FTP client, for sending exactly the commands a real client
// would refuse or rewrite (paths with "..", odd encodings).

import (
	"fmt"
	"io"
	"net"
	"net/textproto"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

type ftpClient struct {
	t    testing.TB
	conn net.Conn
	tp   *textproto.Conn
}

// dialFTP connects to addr and reads the 220 banner.
func dialFTP(t testing.TB, addr string) *ftpClient {
	t.Helper()
	c := dialFTPFrom(t, "", addr)
	if code, msg := c.read(); code != 220 {
		t.Fatalf("banner: %d %s", code, msg)
	}
	return c
}

// dialFTPFrom connects to addr from the local address ip ("127.0.0.2": a
// client address of its own on loopback; "" for any) and reads nothing.
func dialFTPFrom(t testing.TB, ip, addr string) *ftpClient {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if ip != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(ip)}
	}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	conn.SetDeadline(time.Now().Add(2 * time.Minute))
	c := &ftpClient{t: t, conn: conn, tp: textproto.NewConn(conn)}
	t.Cleanup(func() { c.tp.Close() })
	return c
}

// read reads one (possibly multi-line) reply.
func (c *ftpClient) read() (int, string) {
	c.t.Helper()
	code, msg, err := c.tp.ReadResponse(0)
	if err != nil {
		c.t.Fatalf("reading reply: %v", err)
	}
	return code, msg
}

// cmd sends one command line verbatim and reads the reply.
func (c *ftpClient) cmd(line string) (int, string) {
	c.t.Helper()
	if _, err := c.tp.Cmd("%s", line); err != nil {
		c.t.Fatalf("send %q: %v", line, err)
	}
	return c.read()
}

// login logs in as user (USER/PASS) and fails the test unless it gets 230.
func (c *ftpClient) login(user, pass string) {
	c.t.Helper()
	code, msg := c.cmd("USER " + user)
	if code == 331 {
		code, msg = c.cmd("PASS " + pass)
	}
	if code != 230 {
		c.t.Fatalf("login %s: %d %s", user, code, msg)
	}
	if code, msg := c.cmd("TYPE I"); code != 200 {
		c.t.Fatalf("TYPE I: %d %s", code, msg)
	}
}

var pasvRE = regexp.MustCompile(`(\d+),(\d+),(\d+),(\d+),(\d+),(\d+)`)

// pasv sends PASV and connects to the address it names.
func (c *ftpClient) pasv() net.Conn {
	c.t.Helper()
	code, msg := c.cmd("PASV")
	if code != 227 {
		c.t.Fatalf("PASV: %d %s", code, msg)
	}
	m := pasvRE.FindStringSubmatch(msg)
	if m == nil {
		c.t.Fatalf("PASV reply without address: %s", msg)
	}
	p1, _ := strconv.Atoi(m[5])
	p2, _ := strconv.Atoi(m[6])
	addr := net.JoinHostPort(fmt.Sprintf("%s.%s.%s.%s", m[1], m[2], m[3], m[4]), strconv.Itoa(p1*256+p2))
	dc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		c.t.Fatalf("data connection to %s: %v", addr, err)
	}
	dc.SetDeadline(time.Now().Add(time.Minute))
	return dc
}

// transferIn runs a command that sends data to us (RETR, LIST, MLSD...)
// and returns the data and the final reply.
func (c *ftpClient) transferIn(line string) ([]byte, int, string) {
	c.t.Helper()
	dc := c.pasv()
	defer dc.Close()
	code, msg := c.cmd(line)
	if code >= 200 {
		return nil, code, msg
	}
	data, _ := io.ReadAll(dc)
	code, msg = c.read()
	return data, code, msg
}

// transferOut runs a command that takes data from us (STOR, APPE) and
// returns its final reply, past any markers.
func (c *ftpClient) transferOut(line string, data []byte) (int, string) {
	c.t.Helper()
	dc := c.pasv()
	code, msg := c.cmd(line)
	if code >= 200 {
		dc.Close()
		return code, msg
	}
	dc.Write(data)
	dc.Close()
	for code, msg = c.read(); code < 200; code, msg = c.read() {
	}
	return code, msg
}

// TestGCTRawClient checks the raw client itself against GCT: login, TYPE,
// PASV, RETR, STOR, MLSD, and refusals before login and for missing files.
func TestGCTRawClient(t *testing.T) {
	needTools(t)
	srv := startGCT(t)
	writeFile(t, srv.Path("in.txt"), []byte("hello\n"))
	c := dialFTP(t, srv.Addr())
	if code, msg := c.cmd("SIZE " + urlPath(t, srv, "in.txt")); code != 530 {
		t.Errorf("SIZE before login: %d %s, want 530", code, msg)
	}
	c.login("anonymous", "ferry@")
	if data, code, msg := c.transferIn("RETR " + urlPath(t, srv, "in.txt")); code != 226 || string(data) != "hello\n" {
		t.Errorf("RETR: %d %s %q", code, msg, data)
	}
	if code, msg := c.transferOut("STOR "+urlPath(t, srv, "out.txt"), []byte("up\n")); code != 226 {
		t.Errorf("STOR: %d %s", code, msg)
	}
	if b, err := os.ReadFile(srv.Path("out.txt")); err != nil || string(b) != "up\n" {
		t.Errorf("stored %q, %v", b, err)
	}
	if data, code, msg := c.transferIn("MLSD " + urlPath(t, srv, "")); code != 226 || !strings.Contains(string(data), "in.txt") {
		t.Errorf("MLSD: %d %s %q", code, msg, data)
	}
	if data, code, msg := c.transferIn("RETR " + urlPath(t, srv, "missing")); code < 400 {
		t.Errorf("RETR missing: %d %s %q", code, msg, data)
	}
}
