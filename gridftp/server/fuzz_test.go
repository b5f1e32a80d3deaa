package server_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/server"
)

// fuzzReplyBound is the longest a session may take to answer a transfer
// whose data stream has closed (twice DataTimeout, plus slack for a loaded
// machine).
const fuzzReplyBound = 5 * time.Second

// FuzzModeEStream writes fuzzed bytes as the data streams of a MODE E STOR.
// Whatever they hold, the session answers with one final reply in bounded
// time, goes on answering commands, writes nowhere but below its root, and
// leaves no goroutine behind when it ends.
func FuzzModeEStream(f *testing.F) {
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	hello := []byte("hello, world")
	seeds := []struct{ a, b []byte }{
		{cat(block(0, hello), eof(1)), nil},
		{cat(block(0, hello), eod(), eof(1)), nil},
		{cat(block(6, hello[6:]), block(0, hello[:6]), eof(1)), nil},
		{cat(block(0, hello[:6]), eod()), cat(block(6, hello[6:]), eof(2))},
		{cat(block(0, hello), eof(2)), cat(eod())},
		{cat(eof(1)), nil},
		{nil, nil},
		{blockHeader(0, 5, 0)[:7], nil},             // truncated header
		{cat(blockHeader(0, 100, 0), hello), nil},   // truncated payload
		{cat(blockHeader(0, 1<<62, 0), hello), nil}, // huge count
		{cat(block(1<<62, hello), eof(1)), nil},     // huge offset
		{cat(block(1<<40, hello), eof(1)), nil},     // sparse file
		{cat(block(0x7fffffffffffffff-3, []byte("abc")), eof(1)), nil},
		{cat(blockHeader(0, 0xffffffffffffffff, 0xffffffffffffffff)), nil},
		{cat(block(0, hello), blockHeader(gridftp.DescEOF|gridftp.DescEOD, 0, 0)), nil}, // EOF count 0
		{cat(block(0, hello), blockHeader(gridftp.DescEOF, 0, 1), blockHeader(gridftp.DescEOF, 0, 1), eod()), nil},
		{cat(block(0, hello), eof(1), eof(1), []byte("trailing garbage")), nil},
		{cat(blockHeader(gridftp.DescEOF, 4, 1), hello[:4]), nil},
		{cat(blockHeader(gridftp.DescWillClose, 0, 0)), nil},
		{cat(block(0, hello), blockHeader(gridftp.DescWillClose|gridftp.DescEOD, 0, 0)), cat(eof(2))},
		{cat(block(0, hello), eof(1025)), nil},
		{[]byte("220 this is not MODE E at all\r\n"), nil},
		{bytes.Repeat([]byte{0xff}, 40), nil},
		{cat(block(0, bytes.Repeat([]byte("z"), 70000)), eof(1)), nil}, // bigger than a block buffer
	}
	for _, s := range seeds {
		f.Add(s.a, s.b)
	}
	env := startServer(f, func(s *server.Server) {
		s.DataTimeout = 25 * time.Millisecond // an input that waits for a stream waits this long
		s.BlockSize = 32 << 10
	})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		base := runtime.NumGoroutine()
		e := env.with(t)
		c := e.login()
		c.expect("MODE E", 200)
		addr := c.pasv()
		c.send("STOR f")
		if r := c.read(); r.String() != "150 Beginning transfer." {
			t.Fatalf("STOR: %q", r.String())
		}
		for _, in := range [][]byte{a, b} {
			if in == nil && len(b) == 0 {
				continue
			}
			dc := dialData(t, addr)
			dc.SetWriteDeadline(time.Now().Add(fuzzReplyBound))
			dc.Write(in) // the server may stop reading early
			dc.Close()
		}
		var final gridftp.Reply
		deadline := time.Now().Add(fuzzReplyBound)
		for {
			r, err := c.tryRead(time.Until(deadline))
			if err != nil {
				t.Fatalf("no final reply within %v: %v", fuzzReplyBound, err)
			}
			if !r.Preliminary() {
				final = r
				break
			}
			if r.Code != gridftp.CodePerfMarker && r.Code != gridftp.CodeRestartMarker {
				t.Fatalf("unexpected preliminary reply %q", r.String())
			}
		}
		if final.Code != 226 && final.Code/100 != 4 && final.Code/100 != 5 {
			t.Fatalf("final reply %q", final.String())
		}
		c.expectText("NOOP", "200 NOOP command successful.")
		e.checkOutside()
		c.expectText("QUIT", "221 Goodbye.")
		c.expectClosed()
		c.c.Close()
		e.waitSessions(0)
		settle(t, base)
	})
}

// FuzzControl writes fuzzed control lines after login, then NOOP. Every
// line gets exactly one final reply, in order, unless the session ends
// (QUIT, an over-long line, a third failed login, a login while earlier
// inputs' failures make the address wait); the session closes cleanly and
// leaves nothing behind.
func FuzzControl(f *testing.F) {
	for _, s := range []string{
		"NOOP",
		"TYPE I\r\nMODE E\r\nSITE HELP\r\nFEAT",
		"SIZE f\r\nMDTM f\r\nMLST f\r\nCKSM MD5 0 -1 f\r\nCKSM ADLER32 1 2 f",
		"PASV\r\nLIST\r\nMODE E\r\nPASV\r\nRETR f",
		"MODE E\r\nPORT 127,0,0,1,0,1\r\nRETR f",
		"EPSV\r\nNLST\r\nEPSV ALL",
		"REST 0-10,20-30\r\nRETR f\r\nREST 5\r\nSTOR g",
		"MKD d\r\nCWD d\r\nCDUP\r\nRMD d\r\nRNFR f\r\nRNTO g\r\nRNFR g\r\nRNTO f",
		"SITE CHMOD 600 f\r\nSITE UTIME 20200101000000 f\r\nSITE TRNC 3 f\r\nSITE RDEL /\r\nSITE RDEL d",
		"OPTS RETR Parallelism=4,4,4;\r\nOPTS RETR Parallelism=4\r\nSCKS MD5 00\r\nERET P 0 1 f\r\nESTO A 0 f",
		"CWD ..\r\nRETR ../../etc/passwd\r\nSTOR /../x\r\nDELE ../outside/x",
		"\xff\xf4\xff\xf2ABOR\r\nABOR",
		"USER x\r\nPASS y\r\nPASS y\r\nUSER x\r\nPASS y\r\nUSER z\r\nPASS z",
		"QUIT\r\nNOOP",
		"",
		"\r\n\r\n\n",
		"STOR a\x00b\r\nSTOR a\rb",
		"ABCDEFGHIJ\r\nXYZZY\r\nSITE BOGUS",
		"NOOP " + strings.Repeat("x", gridftp.MaxLine),
		"DCAU A\r\nPROT P\r\nPBSZ 0\r\nTREV RESTART 5\r\nSTAT\r\nSTAT f\r\nALLO 5\r\nSYST",
		"SPOR 127,0,0,1,0,1 127,0,0,1,0,2\r\nSPAS\r\nEPRT |2|::1|1|",
		"MFMT 20200101000000 f\r\nHELP\r\nPWD\r\nXPWD\r\nSTRU F",
		"ALLO 1125899906842624\r\nREST 1125899906842624\r\nREST 0-1125899906842624\r\nESTO A 1125899906842624 f\r\nSITE TRNC 4611686018427387904 f",
		"OPTS RETR Parallelism=100000;\r\nALLO 5 R 10\r\nALLO x\r\nCKSM MD5 5 -1 f\r\nCKSM MD5 99 -1 f",
	} {
		f.Add([]byte(s))
	}
	env := startServer(f, func(s *server.Server) {
		s.DataTimeout = 10 * time.Millisecond // PASV then RETR, with nobody connecting
		s.MarkerInterval = time.Hour
	})
	env.file("f", []byte("0123456789abcdef"))
	f.Fuzz(func(t *testing.T, in []byte) {
		base := runtime.NumGoroutine()
		e := env.with(t)
		c := e.login()
		payload := string(in) + "\r\nNOOP\r\n"
		lines := strings.Count(payload, "\n")
		go func() {
			c.c.SetWriteDeadline(time.Now().Add(fuzzReplyBound))
			c.c.Write([]byte(payload)) // the server may close before reading it all
		}()
		var finals []gridftp.Reply
	read:
		for len(finals) < lines {
			r, err := c.tryRead(fuzzReplyBound)
			if err != nil {
				if len(finals) == 0 {
					t.Fatalf("session ended without a reply: %v", err)
				}
				last := finals[len(finals)-1]
				switch {
				case last.String() == "221 Goodbye.":
				case last.String() == "500 Command line too long.":
				case last.String() == "530 Login incorrect.":
				case strings.HasPrefix(last.String(), "421 Too many failed logins"): // earlier inputs failed
				default:
					t.Fatalf("session ended (%v) after %d of %d replies; last %q", err, len(finals), lines, last.String())
				}
				break read
			}
			if r.Code < 100 || r.Code > 599 {
				t.Fatalf("reply code %d", r.Code)
			}
			if !r.Preliminary() {
				finals = append(finals, r)
			}
		}
		if len(finals) == lines {
			if last := finals[len(finals)-1]; last.String() != "200 NOOP command successful." {
				t.Fatalf("last of %d replies %q, want the NOOP's", lines, last.String())
			}
			// No reply beyond one per line: QUIT's comes next.
			c.send("QUIT")
			if r := c.read(); r.String() != "221 Goodbye." {
				t.Fatalf("after %d lines: %q, want QUIT's 221", lines, r.String())
			}
		}
		c.c.Close()
		e.waitSessions(0)
		e.checkOutside()
		settle(t, base)
	})
}
