package server_test

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/server"
)

// storStream uploads data in stream mode over a passive connection.
func storStream(t *testing.T, c *ctl, line, addr string, data []byte) gridftp.Reply {
	t.Helper()
	dc := dialData(t, addr)
	c.send(line)
	if r := c.read(); r.String() != "150 Beginning transfer." {
		t.Fatalf("%s: %q", line, r.String())
	}
	if _, err := dc.Write(data); err != nil {
		t.Fatal(err)
	}
	dc.Close()
	_, final := c.final()
	return final
}

// retrStream downloads in stream mode over a passive connection.
func retrStream(t *testing.T, c *ctl, line, addr string) (gridftp.Reply, []byte) {
	t.Helper()
	dc := dialData(t, addr)
	got := readAllAsync(dc)
	c.send(line)
	if r := c.read(); r.String() != "150 Beginning transfer." {
		t.Fatalf("%s: %q", line, r.String())
	}
	_, final := c.final()
	select {
	case b := <-got:
		return final, b
	case <-time.After(replyTimeout):
		t.Fatalf("%s: data connection not closed", line)
		return final, nil
	}
}

func TestStreamTransfers(t *testing.T) {
	env := startServer(t)
	c := env.login()
	c.expectText("TYPE I", "200 Type set to I.")
	data := pattern(300000)

	if r := storStream(t, c, "STOR f", c.pasv(), data); r.String() != "226 Transfer Complete." {
		t.Fatalf("STOR: %q", r.String())
	}
	if got := env.content("f"); !bytes.Equal(got, data) {
		t.Fatalf("stored %d bytes, want %d", len(got), len(data))
	}
	c.expectText("SIZE f", "213 300000")

	r, got := retrStream(t, c, "RETR f", c.pasv())
	if r.String() != "226 Transfer Complete." || !bytes.Equal(got, data) {
		t.Fatalf("RETR (PASV): %q, %d bytes", r.String(), len(got))
	}
	r, got = retrStream(t, c, "RETR f", c.epsv())
	if r.String() != "226 Transfer Complete." || !bytes.Equal(got, data) {
		t.Fatalf("RETR (EPSV): %q, %d bytes", r.String(), len(got))
	}

	// A passive listener serves one stream-mode transfer.
	c.expectText("RETR f", "425 Can't open data connection: send PASV or PORT first.")

	// REST then RETR sends the tail.
	addr := c.pasv()
	c.expect("REST 299990", gridftp.CodePending)
	r, got = retrStream(t, c, "RETR f", addr)
	if r.Code != 226 || !bytes.Equal(got, data[299990:]) {
		t.Fatalf("REST+RETR: %q, %q", r.String(), got)
	}
	// REST applies to one transfer only.
	r, got = retrStream(t, c, "RETR f", c.pasv())
	if r.Code != 226 || len(got) != len(data) {
		t.Fatalf("RETR after REST+RETR: %q, %d bytes", r.String(), len(got))
	}
	// REST past the end sends nothing.
	addr = c.pasv()
	c.expect("REST 400000", gridftp.CodePending)
	if r, got = retrStream(t, c, "RETR f", addr); r.Code != 226 || len(got) != 0 {
		t.Fatalf("REST past end: %q, %d bytes", r.String(), len(got))
	}

	// APPE appends; REST+STOR overwrites from the offset, keeping the rest.
	if r := storStream(t, c, "APPE f", c.pasv(), []byte("tail")); r.Code != 226 {
		t.Fatalf("APPE: %q", r.String())
	}
	want := append(append([]byte(nil), data...), "tail"...)
	if got := env.content("f"); !bytes.Equal(got, want) {
		t.Fatalf("after APPE: %d bytes", len(got))
	}
	addr = c.pasv()
	c.expect("REST 10", gridftp.CodePending)
	if r := storStream(t, c, "STOR f", addr, []byte("XYZ")); r.Code != 226 {
		t.Fatalf("REST+STOR: %q", r.String())
	}
	copy(want[10:], "XYZ")
	if got := env.content("f"); !bytes.Equal(got, want) {
		t.Fatalf("after REST+STOR: %d bytes, %q", len(got), got[:16])
	}
	if r := storStream(t, c, "APPE new", c.pasv(), []byte("created")); r.Code != 226 || string(env.content("new")) != "created" {
		t.Fatalf("APPE to a new file: %q", r.String())
	}
	// A plain STOR truncates.
	if r := storStream(t, c, "STOR f", c.pasv(), []byte("short")); r.Code != 226 || string(env.content("f")) != "short" {
		t.Fatalf("STOR over a file: %q", r.String())
	}
	// Names with spaces.
	if r := storStream(t, c, "STOR a file with spaces", c.pasv(), []byte("s")); r.Code != 226 || string(env.content("a file with spaces")) != "s" {
		t.Fatalf("STOR with spaces: %q", r.String())
	}
	c.expectText("NOOP", "200 NOOP command successful.")
}

func TestStreamActive(t *testing.T) {
	env := startServer(t)
	data := pattern(100000)
	env.file("f", data)
	c := env.login()

	a := c.port()
	c.send("RETR f")
	if r := c.read(); r.String() != "150 Beginning transfer." {
		t.Fatalf("RETR: %q", r.String())
	}
	dc := a.accept()
	got := readAllAsync(dc)
	if _, r := c.final(); r.String() != "226 Transfer Complete." {
		t.Fatalf("RETR: %q", r.String())
	}
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("RETR over PORT: %d bytes", len(b))
	}

	// EPRT, then STOR: the server connects.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c.expectText("EPRT |1|127.0.0.1|"+strings.TrimPrefix(ln.Addr().String(), "127.0.0.1:")+"|", "200 EPRT Command successful.")
	c.send("STOR g")
	if r := c.read(); r.String() != "150 Beginning transfer." {
		t.Fatalf("STOR: %q", r.String())
	}
	a2 := &activeListener{t: t, ln: ln}
	dc = a2.accept()
	dc.Write([]byte("uploaded"))
	dc.Close()
	if _, r := c.final(); r.String() != "226 Transfer Complete." {
		t.Fatalf("STOR: %q", r.String())
	}
	if b := env.content("g"); string(b) != "uploaded" {
		t.Fatalf("g = %q", b)
	}

	// Nobody listening at the PORT address.
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	ap := dead.Addr().(*net.TCPAddr).AddrPort()
	dead.Close()
	c.expect("PORT "+gridftp.FormatHostPort(ap), 200)
	c.send("RETR f")
	prelim, r := c.final()
	if r.Code != gridftp.CodeCantOpenData && r.Code != gridftp.CodeTransferAborted {
		t.Fatalf("RETR to a closed port: %v %q", prelim, r.String())
	}
	c.expectText("NOOP", "200 NOOP command successful.")
}

func TestTransferErrors(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.DataTimeout = 200 * time.Millisecond })
	env.file("f", []byte("hello"))
	if err := os.Mkdir(filepath.Join(env.root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := env.login()
	c.expectText("RETR f", "425 Can't open data connection: send PASV or PORT first.")
	c.expectText("STOR g", "425 Can't open data connection: send PASV or PORT first.")
	c.expectText("LIST", "425 Can't open data connection: send PASV or PORT first.")

	c.pasv()
	r := c.expect("RETR missing", gridftp.CodeFileUnavailable)
	if r.Lines[0] != "GlobusError: v=1 c=PATH_NOT_FOUND" || r.Lines[len(r.Lines)-1] != "End." {
		t.Fatalf("RETR missing: %q", r.String())
	}
	r = c.expect("RETR d", gridftp.CodeFileUnavailable)
	if r.Lines[0] != "GlobusError: v=1 c=IS_A_DIRECTORY" {
		t.Fatalf("RETR d: %q", r.String())
	}
	r = c.expect("STOR d", gridftp.CodeFileUnavailable)
	if r.Lines[0] != "GlobusError: v=1 c=IS_A_DIRECTORY" {
		t.Fatalf("STOR d: %q", r.String())
	}
	r = c.expect("STOR nodir/x", gridftp.CodeFileUnavailable)
	if r.Lines[0] != "GlobusError: v=1 c=PATH_NOT_FOUND" {
		t.Fatalf("STOR nodir/x: %q", r.String())
	}

	// No data connection within DataTimeout.
	c.send("RETR f")
	prelim, final := c.final()
	if len(prelim) != 1 || prelim[0].Code != 150 || final.Code != gridftp.CodeTransferAborted {
		t.Fatalf("RETR without a data connection: %v %q", prelim, final.String())
	}
	c.expectText("NOOP", "200 NOOP command successful.")
}

// TestSTORWithoutDataSetupKeepsFile: a STOR that cannot run (no PASV or
// PORT) must not destroy the file it names. The server opens the file with
// O_TRUNC before it looks at the data channel.
func TestSTORWithoutDataSetupKeepsFile(t *testing.T) {
	env := startServer(t)
	env.file("precious", []byte("years of work"))
	c := env.login()
	c.expectText("STOR precious", "425 Can't open data connection: send PASV or PORT first.")
	c.expect("MODE E", 200)
	c.expectText("STOR precious", "425 Can't open data connection: send PASV or PORT first.")
	if got := env.content("precious"); string(got) != "years of work" {
		t.Fatalf("after a refused STOR the file holds %q", got)
	}
}
