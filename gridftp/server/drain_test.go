package server_test

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"ferry/gridftp/server"
)

// TestModeEFailedStoreDrains: a MODE E STOR whose file fails (past
// Server.MaxFileSize here, a full disk in TestFerryFullDisk) takes what
// the sender still sends, up to its EODs, before it replies why: told
// between its last data block and its EOF, globus-url-copy never sends
// the EOF and waits for ever (TestFerryFullDisk hung so under load). A
// sender not done within the drain is cut once the reply has gone, so
// that its writes fail rather than wait.
func TestModeEFailedStoreDrains(t *testing.T) {
	const limit = 64 << 10
	env := startServer(t, func(s *server.Server) { s.MaxFileSize = limit })
	c := env.login()
	c.expect("MODE E", 200)
	stor := func(name string) []net.Conn {
		t.Helper()
		addr := c.pasv()
		conns := []net.Conn{dialData(t, addr), dialData(t, addr)}
		c.send("STOR " + name)
		if r := c.read(); r.Code != 150 && r.Code != 125 {
			t.Fatalf("STOR %s: %q", name, r.String())
		}
		send(t, conns[0], block(0, pattern(limit)))
		send(t, conns[1], block(limit, pattern(1000))) // past the limit
		return conns
	}

	conns := stor("f")
	// The sender takes its time before its EOF, as a loaded
	// globus-url-copy does: no reply may come meanwhile.
	for end := time.Now().Add(200 * time.Millisecond); ; {
		r, err := c.tryRead(time.Until(end))
		if err != nil {
			break
		}
		if !r.Preliminary() {
			t.Fatalf("the reply %q came before the sender's EOF: globus-url-copy would wait for ever", r.String())
		}
	}
	send(t, conns[0], block(limit+1000, pattern(1000))) // dropped
	finishStreams(t, conns)
	_, final := c.final()
	wantTooLarge(t, "STOR past the limit", final)
	c.expect("NOOP", 200)

	// A sender that never ends: the reply, then its streams reset.
	conns = stor("g")
	_, final = c.final()
	wantTooLarge(t, "STOR past the limit, no EOF", final)
	for i, dc := range conns {
		dc.SetReadDeadline(time.Now().Add(replyTimeout))
		if _, err := dc.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("stream %d after the reply: %v, want a reset", i, err)
		}
	}
	c.expect("NOOP", 200)
	for _, name := range []string{"f", "g"} {
		if n := env.size(name); n > limit {
			t.Errorf("%s is %d bytes, more than %d", name, n, limit)
		}
	}
}
