package server_test

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/server"
)

func TestABOR(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.BlockSize = 64 << 10 })
	env.file("big", nil)
	if err := truncate(env, "big", 256<<20); err != nil {
		t.Fatal(err)
	}
	c := env.login()
	tests := []struct {
		name  string
		mode  string
		start func(t *testing.T) net.Conn // sends the command, returns the (unread) data connection
	}{
		{"STOR MODE E, silent stream", "E", func(t *testing.T) net.Conn {
			dc := dialData(t, c.pasv())
			c.send("STOR f")
			return dc
		}},
		{"STOR MODE E, nobody connects", "E", func(t *testing.T) net.Conn {
			c.pasv()
			c.send("STOR f")
			return nil
		}},
		{"STOR stream mode", "S", func(t *testing.T) net.Conn {
			dc := dialData(t, c.pasv())
			c.send("STOR f")
			return dc
		}},
		{"RETR stream mode, peer not reading", "S", func(t *testing.T) net.Conn {
			dc := dialData(t, c.pasv())
			c.send("RETR big")
			return dc
		}},
		{"RETR MODE E, peer not reading", "E", func(t *testing.T) net.Conn {
			a := c.port()
			c.send("RETR big")
			return a.accept()
		}},
		{"LIST, nobody connects", "S", func(t *testing.T) net.Conn {
			c.pasv()
			c.send("LIST")
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.expect("MODE "+tt.mode, 200)
			dc := tt.start(t)
			if r := c.read(); r.Code != 150 {
				t.Fatalf("begin: %q", r.String())
			}
			time.Sleep(20 * time.Millisecond) // let the transfer block
			// A transfer that ABOR does not stop fails the reads
			// (replyTimeout).
			c.write("\xff\xf4\xff\xf2ABOR\r\n")
			_, final := c.final()
			if final.String() != "426 Transfer aborted." {
				t.Fatalf("transfer ended with %q, want 426 Transfer aborted.", final.String())
			}
			if r := c.read(); r.String() != "226 ABOR command successful." {
				t.Fatalf("ABOR: %q", r.String())
			}
			if dc != nil {
				// The server closes the data connection of an aborted transfer.
				dc.SetReadDeadline(time.Now().Add(replyTimeout))
				if _, err := io.Copy(io.Discard, dc); err != nil && !isReset(err) {
					t.Fatalf("data connection after ABOR: %v", err)
				}
			}
			c.expectText("NOOP", "200 NOOP command successful.")
		})
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return err != nil && (asOpError(err, &ne))
}

func asOpError(err error, target **net.OpError) bool {
	e, ok := err.(*net.OpError)
	if ok {
		*target = e
	}
	return ok && !e.Timeout()
}

// TestControlClosedMidTransfer: a client that goes away without QUIT (as
// globus-url-copy does) ends its transfer; nothing is left running.
func TestControlClosedMidTransfer(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.BlockSize = 64 << 10 })
	env.file("big", nil)
	if err := truncate(env, "big", 256<<20); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		start func(t *testing.T, c *ctl) net.Conn
	}{
		{"MODE E STOR", func(t *testing.T, c *ctl) net.Conn {
			c.expect("MODE E", 200)
			dc := dialData(t, c.pasv())
			c.send("STOR f")
			return dc
		}},
		{"MODE E STOR with data flowing", func(t *testing.T, c *ctl) net.Conn {
			c.expect("MODE E", 200)
			dc := dialData(t, c.pasv())
			c.send("STOR f")
			send(t, dc, block(0, pattern(1000)))
			return dc
		}},
		{"stream RETR", func(t *testing.T, c *ctl) net.Conn {
			dc := dialData(t, c.pasv())
			c.send("RETR big")
			return dc
		}},
		{"MODE E RETR", func(t *testing.T, c *ctl) net.Conn {
			c.expect("MODE E", 200)
			c.expect("OPTS RETR Parallelism=2;", 200)
			a := c.port()
			c.send("RETR big")
			dc := a.accept()
			a.accept()
			return dc
		}},
		{"stream STOR", func(t *testing.T, c *ctl) net.Conn {
			dc := dialData(t, c.pasv())
			c.send("STOR g")
			send(t, dc, pattern(1000))
			return dc
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := runtime.NumGoroutine()
			c := env.login()
			dc := tt.start(t, c)
			if r := c.read(); r.Code != 150 {
				t.Fatalf("begin: %q", r.String())
			}
			time.Sleep(20 * time.Millisecond)
			c.c.Close()
			env.waitSessions(0)
			dc.SetReadDeadline(time.Now().Add(replyTimeout))
			if _, err := io.Copy(io.Discard, dc); err != nil && !isReset(err) {
				t.Fatalf("data connection after the control connection closed: %v", err)
			}
			dc.Close()
			settle(t, base)
		})
	}
}

// TestIdleTimeoutDuringTransfer: a transfer that outlasts the control
// channel's idle limit completes.
func TestIdleTimeoutDuringTransfer(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.IdleTimeout = 100 * time.Millisecond })
	c := env.login()
	c.expect("MODE E", 200)
	dc := dialData(t, c.pasv())
	c.send("STOR f")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("STOR: %q", r.String())
	}
	data := pattern(8 * 100)
	for i := 0; i < 8; i++ {
		send(t, dc, block(uint64(i*100), data[i*100:(i+1)*100]))
		time.Sleep(50 * time.Millisecond)
	}
	send(t, dc, eof(1))
	if _, final := c.final(); final.String() != "226 Transfer Complete." {
		t.Fatalf("STOR longer than IdleTimeout: %q", final.String())
	}
	c.expectText("NOOP", "200 NOOP command successful.")
}

// TestCommandSplitAcrossIdleDeadline: while a transfer runs, the session
// keeps reading past the idle deadline; a command whose bytes straddle a
// deadline must arrive whole. ReadLine drops the bytes it had read when the
// deadline error comes (reply.go readLine returns "" with the error), so
// "NO" + "OP\r\n" reaches the server as "OP".
func TestCommandSplitAcrossIdleDeadline(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.IdleTimeout = 100 * time.Millisecond })
	c := env.login()
	c.expect("MODE E", 200)
	dc := dialData(t, c.pasv())
	c.send("STOR f")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("STOR: %q", r.String())
	}
	c.write("NO")
	for range 5 {
		send(t, dc, block(0, []byte("x"))) // keep the transfer alive
		time.Sleep(50 * time.Millisecond)
	}
	c.write("OP\r\n")
	send(t, dc, eof(1))
	if _, final := c.final(); final.Code != 226 {
		t.Fatalf("STOR: %q", final.String())
	}
	if r := c.read(); r.String() != "200 NOOP command successful." {
		t.Fatalf("NOOP split across the idle deadline: %q", r.String())
	}
}

// TestABORPipelined: "STOR f" and ABOR sent in one write (a client that
// aborts at once) abort the transfer, whether or not it had started when
// the session read ABOR. readCommands calls abortTransfer as it reads ABOR;
// if the STOR is still queued, nothing is cancelled and the transfer runs
// until its data timeout, a minute here: longer than the reads wait
// (replyTimeout).
func TestABORPipelined(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.DataTimeout = time.Minute })
	c := env.login()
	c.expect("MODE E", 200)
	for i := range 5 {
		dialData(t, c.pasv())
		c.write("STOR f\r\nABOR\r\n")
		_, final := c.final()
		if r := c.read(); r.String() != "226 ABOR command successful." {
			t.Fatalf("round %d: ABOR: %q", i, r.String())
		}
		if final.String() != "426 Transfer aborted." {
			t.Fatalf("round %d: STOR ended with %q, want 426 Transfer aborted.", i, final.String())
		}
	}
}

// TestABOROnlyOneOfPipelined: with STORs pipelined, an ABOR aborts the one
// running and no other, so a client can give up on one file of a window.
func TestABOROnlyOneOfPipelined(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.DataTimeout = 2 * time.Second })
	c := env.login()
	c.expect("MODE E", 200)
	addr := c.pasv()
	d := dialData(t, addr)
	c.write("STOR a\r\nSTOR b\r\n")
	if r := c.read(); r.Code != gridftp.CodeOpeningData && r.Code != gridftp.CodeReusingData {
		t.Fatalf("STOR a: %q", r.String())
	}
	// Once a's first block is on disk, the stream is surely a's.
	d.Write(block(0, []byte("ay")))
	for deadline := time.Now().Add(5 * time.Second); len(env.content("a")) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("STOR a wrote nothing")
		}
	}
	c.write("ABOR\r\n")
	if _, final := c.final(); final.Code != gridftp.CodeTransferAborted {
		t.Fatalf("STOR a ended with %q, want 426", final.String())
	}
	// STOR b, read before the ABOR, runs; its reply comes before ABOR's.
	// The aborted transfer dropped its stream, so the client connects
	// again to the same passive address.
	d.Close()
	d = dialData(t, addr)
	defer d.Close()
	d.Write(append(block(0, []byte("bee")), eof(1)...))
	if _, final := c.final(); final.Code != gridftp.CodeTransferComplete {
		t.Fatalf("STOR b ended with %q, want 226", final.String())
	}
	if r := c.read(); r.String() != "226 ABOR command successful." {
		t.Fatalf("ABOR: %q", r.String())
	}
	if got := env.content("b"); string(got) != "bee" {
		t.Fatalf("b = %q", got)
	}
}

// TestQueuedCommandsDropWithTheClient: a client that vanishes with
// commands queued behind a transfer leaves nothing behind: they were for
// a client that is gone, and nobody reads their replies.
func TestQueuedCommandsDropWithTheClient(t *testing.T) {
	env := startServer(t)
	c := env.login()
	c.expect("MODE E", 200)
	dc := dialData(t, c.pasv())
	defer dc.Close()
	c.write("STOR f1\r\nSTOR f2\r\nMKD made\r\n")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("begin: %q", r.String())
	}
	send(t, dc, block(0, pattern(1000)))
	time.Sleep(20 * time.Millisecond)
	// Half a close, so that no reply fails to reach it: its end of file
	// alone says the client is gone.
	c.c.(*net.TCPConn).CloseWrite()
	env.waitSessions(0)
	for _, name := range []string{"f2", "made"} {
		if _, err := os.Stat(filepath.Join(env.root, name)); err == nil {
			t.Errorf("%s was made after its client had gone", name)
		}
	}
}
