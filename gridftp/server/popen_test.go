package server_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"ferry/gridftp/server"
	"ferry/stack"
	"ferry/stack/popen"
)

// startPopen starts a server whose sessions, anonymous too, may run sh
// with any arguments, over a root the unprivileged user of programs may
// write.
func startPopen(t *testing.T) *testEnv {
	t.Helper()
	sh := popen.Program{Alias: "sh", Path: "/bin/sh"}
	var err error
	if sh.Args, err = popen.ParsePattern("{any}*"); err != nil {
		t.Fatal(err)
	}
	env := startServer(t, func(s *server.Server) {
		s.Layers = stack.Kinds()
		s.Layers[popen.Name] = popen.Kind(popen.Config{Programs: []popen.Program{sh}, Anonymous: true})
	})
	openUp(t, env.root)
	return env
}

// hang is a popen stack whose program neither reads nor writes, with a
// child "sleep tag" (see processes).
func hang(tag string) string {
	return "SITE SETDISKSTACK popen:argv=#sh#-c#sleep " + tag + " && :"
}

// TestPopen: STOR feeds a program, RETR reads one, a failing program's
// words reach the client, and one not whitelisted is refused as GCT
// refuses it.
func TestPopen(t *testing.T) {
	env := startPopen(t)
	c := env.login()
	c.send("SITE SETDISKSTACK popen:argv=#/bin/ls")
	if r := c.read(); r.Code != 500 || r.Text() != "Setting filesystem driver stack failed.\nApproving popen arguments failed.\nprogram '/bin/ls' not whitelisted.\nEnd." {
		t.Fatalf("a program not whitelisted: %q", r.String())
	}
	c.send("FEAT")
	if r := c.read(); !strings.Contains(r.Text(), " DISKSTACK file,ordering,popen\n") {
		t.Errorf("FEAT does not name popen: %q", r.Text())
	}

	data := pattern(300_001)
	c.expect("SITE SETDISKSTACK popen:argv=#sh#-c#cat >got,ordering", 250)
	dc := dialData(t, c.pasv())
	c.send("STOR /ignored")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("STOR: %q", r.String())
	}
	send(t, dc, data)
	dc.Close()
	if _, final := c.final(); final.Code != 226 || !bytes.Equal(env.content("got"), data) {
		t.Fatalf("STOR into a program: %q", final.String())
	}

	c.expect("SITE SETDISKSTACK popen:argv=#/bin/sh#-c#cat got", 250)
	dc = dialData(t, c.pasv())
	got := readAllAsync(dc)
	c.send("RETR /ignored")
	if _, final := c.final(); final.Code != 226 {
		t.Fatalf("RETR from a program: %q", final.String())
	}
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("RETR from a program: %d bytes, want %d", len(b), len(data))
	}

	c.expect("SITE SETDISKSTACK popen:argv=#sh#-c#echo 'tar: x: Not found in archive' >&2 && exit 2", 250)
	dc = dialData(t, c.pasv())
	got = readAllAsync(dc)
	c.send("RETR /ignored")
	_, final := c.final()
	<-got
	if final.Code/100 != 4 || !strings.Contains(final.Text(), "\npopened program exited with an error (exit code: 2):\ntar: x: Not found in archive\n") {
		t.Fatalf("a failing program: %q", final.String())
	}
}

// TestPopenAbortKills: ABOR kills a program that hangs while the data
// channel is idle, feeding it or reading it, and so does the loss of the
// control connection.
func TestPopenAbortKills(t *testing.T) {
	for i, verb := range []string{"STOR", "RETR"} {
		t.Run(verb, func(t *testing.T) {
			tag := fmt.Sprintf("1000.%d%d", os.Getpid(), i)
			env := startPopen(t)
			c := env.login()
			c.expect(hang(tag), 250)
			dc := dialData(t, c.pasv())
			defer dc.Close()
			c.send(verb + " /x")
			if r := c.read(); r.Code != 150 {
				t.Fatalf("%s: %q", verb, r.String())
			}
			waitProcess(t, tag)
			c.send("ABOR")
			if _, final := c.final(); final.Code != 426 {
				t.Fatalf("%s after ABOR: %q", verb, final.String())
			}
			if r := c.read(); r.Code != 226 {
				t.Fatalf("ABOR: %q", r.String())
			}
			processesGone(t, tag)
		})
	}
	t.Run("connection lost", func(t *testing.T) {
		tag := fmt.Sprintf("1000.%d9", os.Getpid())
		env := startPopen(t)
		c := env.login()
		c.expect(hang(tag), 250)
		dc := dialData(t, c.pasv())
		defer dc.Close()
		c.send("RETR /x")
		c.read()
		waitProcess(t, tag)
		c.c.Close()
		processesGone(t, tag)
	})
}
