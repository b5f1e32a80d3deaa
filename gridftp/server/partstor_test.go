package server_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/server"
	"ferry/internal/partname"
)

// waitFile waits until the served tree holds name with at least n bytes.
func (e *testEnv) waitFile(name string, n int64) {
	e.t.Helper()
	deadline := time.Now().Add(replyTimeout)
	for {
		if fi, err := os.Stat(filepath.Join(e.root, filepath.FromSlash(name))); err == nil && fi.Size() >= n {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s never held %d bytes", name, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// exists reports whether the served tree holds name.
func (e *testEnv) exists(name string) bool {
	_, err := os.Lstat(filepath.Join(e.root, filepath.FromSlash(name)))
	return err == nil
}

// TestPartStor: with SITE PARTSTOR ON, a whole STOR is written under the
// file's temporary name and renamed over its name by the server once it
// succeeded; one that fails or is aborted leaves the temporary file and
// no file under the name. REST and ESTO write where they name, as with
// the option off.
func TestPartStor(t *testing.T) {
	env := startServer(t)
	c := env.login()
	c.send("FEAT")
	if r := c.read(); !strings.Contains(r.String(), "\n PARTSTOR\r\n") && !strings.Contains(r.String(), "\n PARTSTOR\n") {
		t.Fatalf("FEAT does not name PARTSTOR: %q", r.String())
	}
	c.expect("TYPE I", 200)
	c.expect("SITE PARTSTOR ON", gridftp.CodeOK)
	data := pattern(200000)

	// Until its 226, the file is only under its temporary name.
	tmp := partname.For("d/f")
	if err := os.Mkdir(filepath.Join(env.root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	dc := dialData(t, c.pasv())
	c.send("STOR d/f")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("STOR: %q", r.String())
	}
	if _, err := dc.Write(data[:100000]); err != nil {
		t.Fatal(err)
	}
	env.waitFile(tmp, 100000)
	if env.exists("d/f") {
		t.Fatal("d/f exists before its transfer ended")
	}
	if _, err := dc.Write(data[100000:]); err != nil {
		t.Fatal(err)
	}
	dc.Close()
	if _, r := c.final(); r.Code != 226 {
		t.Fatalf("STOR: %q", r.String())
	}
	if got := env.content("d/f"); !bytes.Equal(got, data) {
		t.Fatalf("d/f holds %d bytes, want %d", len(got), len(data))
	}
	if env.exists(tmp) {
		t.Fatalf("%s left after the rename", tmp)
	}

	// A whole file over an existing one replaces it.
	if r := storStream(t, c, "STOR d/f", c.pasv(), []byte("new")); r.Code != 226 || string(env.content("d/f")) != "new" {
		t.Fatalf("STOR over d/f: %q, %q", r.String(), env.content("d/f"))
	}

	// An aborted one leaves its temporary file, and no final name.
	c.expect("MODE S", 200)
	dc = dialData(t, c.pasv())
	c.send("STOR g")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("STOR g: %q", r.String())
	}
	if _, err := dc.Write(data[:50000]); err != nil {
		t.Fatal(err)
	}
	env.waitFile(partname.For("g"), 50000)
	c.write("\xff\xf4\xff\xf2ABOR\r\n")
	if _, r := c.final(); r.Code != 426 {
		t.Fatalf("aborted STOR: %q", r.String())
	}
	if r := c.read(); r.Code != 226 {
		t.Fatalf("ABOR: %q", r.String())
	}
	dc.Close()
	if env.exists("g") {
		t.Fatal("g exists after its transfer was aborted")
	}
	if got := env.content(partname.For("g")); !bytes.Equal(got, data[:50000]) {
		t.Fatalf("the temporary file of g holds %d bytes, want the 50000 that arrived", len(got))
	}

	// A rename that fails (a directory has the name) fails the transfer
	// and leaves the temporary file.
	if err := os.Mkdir(filepath.Join(env.root, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := storStream(t, c, "STOR dir", c.pasv(), []byte("x")); r.Code/100 != 5 && r.Code/100 != 4 {
		t.Fatalf("STOR over a directory: %q", r.String())
	}
	if fi, err := os.Stat(filepath.Join(env.root, "dir")); err != nil || !fi.IsDir() {
		t.Fatalf("dir after a STOR over it: %v, %v", fi, err)
	}
	if string(env.content(partname.For("dir"))) != "x" {
		t.Fatal("the temporary file of a failed rename is gone")
	}

	// REST, ESTO and APPE write where they name.
	addr := c.pasv()
	c.expect("REST 1", gridftp.CodePending)
	if r := storStream(t, c, "STOR d/f", addr, []byte("E")); r.Code != 226 || string(env.content("d/f")) != "nEw" {
		t.Fatalf("REST+STOR: %q, %q", r.String(), env.content("d/f"))
	}
	if r := storStream(t, c, "ESTO A 2 d/f", c.pasv(), []byte("W")); r.Code != 226 || string(env.content("d/f")) != "nEW" {
		t.Fatalf("ESTO: %q, %q", r.String(), env.content("d/f"))
	}
	if r := storStream(t, c, "APPE d/f", c.pasv(), []byte("!")); r.Code != 226 || string(env.content("d/f")) != "nEW!" {
		t.Fatalf("APPE: %q, %q", r.String(), env.content("d/f"))
	}

	// Off again, a STOR writes its name.
	c.expect("SITE PARTSTOR OFF", gridftp.CodeOK)
	dc = dialData(t, c.pasv())
	c.send("STOR h")
	if r := c.read(); r.Code != 150 {
		t.Fatalf("STOR h: %q", r.String())
	}
	dc.Write([]byte("hh"))
	env.waitFile("h", 2)
	dc.Close()
	if _, r := c.final(); r.Code != 226 || env.exists(partname.For("h")) {
		t.Fatalf("STOR h with PARTSTOR OFF: %q", r.String())
	}
	c.expect("SITE PARTSTOR MAYBE", gridftp.CodeBadArguments)
}

// TestPartStorConfined: the server's rename is confined as any write: a
// path out of the root or through a symlink that leads out of it writes
// nothing outside.
func TestPartStorConfined(t *testing.T) {
	env := startServer(t)
	if err := os.Symlink(env.outside, filepath.Join(env.root, "out")); err != nil {
		t.Fatal(err)
	}
	c := env.login()
	c.expect("TYPE I", 200)
	c.expect("SITE PARTSTOR ON", gridftp.CodeOK)
	for _, name := range []string{"out/x", "../outside/y", "out"} {
		dc := dialData(t, c.pasv())
		c.send("STOR " + name)
		if r := c.read(); r.Code == 150 {
			dc.Write([]byte("data"))
			dc.Close()
			c.final()
		} else {
			dc.Close()
		}
	}
	os.Remove(filepath.Join(env.root, "out"))
	for _, name := range []string{"outside/y", partname.For("outside/y"), partname.For("outside")} {
		os.Remove(filepath.Join(env.root, name)) // ../outside/y is the root's outside/y
	}
	os.Remove(filepath.Join(env.root, "outside"))
	os.Remove(filepath.Join(env.root, partname.For("out")))
	env.checkOutside()
}

// TestPartStorReadOnly: an anonymous session that only reads gets nothing
// new: SITE PARTSTOR is a write.
func TestPartStorReadOnly(t *testing.T) {
	env := startServer(t, func(s *server.Server) { s.AnonymousWrite = false })
	c := env.login()
	c.send("SITE PARTSTOR ON")
	if r := c.read(); r.Code != 550 {
		t.Fatalf("SITE PARTSTOR ON, read-only: %q", r.String())
	}
	c.send("STOR f")
	if r := c.read(); r.Code != 550 {
		t.Fatalf("STOR, read-only: %q", r.String())
	}
}
