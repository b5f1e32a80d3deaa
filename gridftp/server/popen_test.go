package server_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ferry/gridftp/server"
	"ferry/stack"
	"ferry/stack/popen"
)

func withPopen(s *server.Server) {
	s.Layers = stack.Kinds()
	s.Layers[popen.Name] = popen.Kind([]popen.Program{{Alias: "sh", Path: "/bin/sh"}}, nil)
}

// hang is a popen stack whose program writes its pid to the file "pid"
// and then neither reads nor writes, with a child in its process group.
const hang = "SITE SETDISKSTACK popen:argv=#sh#-c#echo $$ >pid && sleep 1000 && :"

// TestPopen: STOR feeds a program, RETR reads one, a failing program's
// words reach the client, and one not whitelisted is refused as GCT
// refuses it.
func TestPopen(t *testing.T) {
	env := startServer(t, withPopen)
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
	for _, verb := range []string{"STOR", "RETR"} {
		t.Run(verb, func(t *testing.T) {
			env := startServer(t, withPopen)
			c := env.login()
			c.expect(hang, 250)
			dc := dialData(t, c.pasv())
			defer dc.Close()
			c.send(verb + " /x")
			if r := c.read(); r.Code != 150 {
				t.Fatalf("%s: %q", verb, r.String())
			}
			pgid := programPid(t, env)
			c.send("ABOR")
			if _, final := c.final(); final.Code != 426 {
				t.Fatalf("%s after ABOR: %q", verb, final.String())
			}
			if r := c.read(); r.Code != 226 {
				t.Fatalf("ABOR: %q", r.String())
			}
			groupGone(t, pgid)
		})
	}
	t.Run("connection lost", func(t *testing.T) {
		env := startServer(t, withPopen)
		c := env.login()
		c.expect(hang, 250)
		dc := dialData(t, c.pasv())
		defer dc.Close()
		c.send("RETR /x")
		c.read()
		pgid := programPid(t, env)
		c.c.Close()
		groupGone(t, pgid)
	})
}

// programPid waits for the pid the program of hang writes.
func programPid(t *testing.T, env *testEnv) int {
	t.Helper()
	for range 500 {
		b, _ := os.ReadFile(filepath.Join(env.root, "pid"))
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the program did not start")
	return 0
}

// groupGone fails unless process group pgid is gone within 10 s (a killed
// child of the program is a zombie until init reaps it).
func groupGone(t *testing.T, pgid int) {
	t.Helper()
	for range 1000 {
		if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the program's process group %d outlived its transfer", pgid)
}
