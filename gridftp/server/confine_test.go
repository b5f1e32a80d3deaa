package server_test

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"ferry/gridftp"
)

// snapshot describes every entry below dir: name, mode, size, mtime and
// content, so that any write, chmod or utime outside the root shows.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			desc += " " + string(b)
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tryStore sends STOR-like line over a fresh PASV connection; if the server
// accepts it, data goes out and the final reply is returned.
func tryStore(t *testing.T, c *ctl, line string, data []byte) (prelim []gridftp.Reply, final gridftp.Reply) {
	t.Helper()
	addr := c.pasv()
	dc := dialData(t, addr)
	c.send(line)
	r := c.read()
	if !r.Preliminary() {
		dc.Close()
		return nil, r
	}
	dc.Write(data)
	dc.Close()
	p, f := c.final()
	return append([]gridftp.Reply{r}, p...), f
}

// tryRetr sends a RETR-like line over a fresh PASV connection and returns
// the replies and whatever data arrived.
func tryRetr(t *testing.T, c *ctl, line string) (prelim []gridftp.Reply, final gridftp.Reply, data []byte) {
	t.Helper()
	addr := c.pasv()
	dc := dialData(t, addr)
	got := readAllAsync(dc)
	c.send(line)
	prelim, final = c.final()
	if len(prelim) == 0 {
		dc.Close()
	}
	select {
	case data = <-got:
	case <-time.After(replyTimeout):
		t.Fatalf("%s: data connection left open", line)
	}
	return prelim, final, data
}

func TestPathConfinement(t *testing.T) {
	env := startServer(t)
	secret := []byte("top secret, outside the root")
	if err := os.WriteFile(filepath.Join(env.outside, "secret"), secret, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(env.outside, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	env.file("f", []byte("hello"))
	env.file("sub/g", []byte("g"))
	for link, target := range map[string]string{
		"secretlink": "../outside/secret",
		"abslink":    filepath.Join(env.outside, "secret"),
		"passwd":     "/etc/passwd",
		"escape":     "../outside",
		"absescape":  env.outside,
		"sub/up":     "../../outside/secret",
		"dangling":   "../outside/nothing",
		"inlink":     "sub/g",
	} {
		if err := os.Symlink(target, filepath.Join(env.root, link)); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t, env.outside)
	parent := filepath.Dir(env.root)

	c := env.login()
	t.Run("CWD stays below the root", func(t *testing.T) {
		for _, dir := range []string{"..", "../..", "/../../..", "sub/../../..", `..\..`} {
			c.send("CWD " + dir)
			r := c.read()
			c.send("PWD")
			pwd := c.read()
			if r.Code == 250 && pwd.String() != `257 "/" is current directory.` {
				t.Errorf("CWD %s: %q, then PWD %q", dir, r.String(), pwd.String())
			}
			c.expect("CWD /", 250)
		}
		for _, dir := range []string{"escape", "absescape", "escape/dir", "secretlink"} {
			c.expect("CWD "+dir, gridftp.CodeFileUnavailable)
		}
		c.expectText("PWD", `257 "/" is current directory.`)
	})

	t.Run("reads", func(t *testing.T) {
		for _, p := range []string{
			"secretlink", "abslink", "passwd", "sub/up", "escape/secret", "absescape/secret",
			"../outside/secret", "/../outside/secret", "../../etc/passwd", "../../../../../../etc/passwd",
			"/../../../../etc/passwd", "%2e%2e/outside/secret", "dangling",
		} {
			prelim, final, data := tryRetr(t, c, "RETR "+p)
			if final.Code != gridftp.CodeFileUnavailable || len(prelim) != 0 || len(data) != 0 {
				t.Errorf("RETR %s: %v then %q with %q", p, prelim, final.String(), data)
			}
		}
		for _, line := range []string{
			"SIZE ../outside/secret", "SIZE escape/secret", "MDTM escape/secret", "MLST escape/secret",
			"CKSM MD5 0 -1 secretlink", "CKSM MD5 0 -1 escape/secret", "CKSM ADLER32 0 -1 passwd",
			"STAT escape/secret",
		} {
			c.expect(line, gridftp.CodeFileUnavailable)
		}
		// A link that leads out is described as a link: its target's size
		// must not show.
		c.send("SIZE secretlink")
		if r := c.read(); r.String() == fmt.Sprintf("213 %d", len(secret)) {
			t.Errorf("SIZE secretlink reports the size of the file outside: %q", r.String())
		}
		c.send("MLST escape")
		if r := c.read(); strings.Contains(r.String(), "Type=dir") || strings.Contains(r.String(), "Type=cdir") {
			t.Errorf("MLST escape describes the directory outside: %q", r.String())
		}
	})

	t.Run("listings", func(t *testing.T) {
		for _, line := range []string{"LIST escape", "NLST escape", "LIST absescape", "LIST escape/", "NLST escape/dir", "LIST -la escape/"} {
			_, final, data := tryRetr(t, c, line)
			if strings.Contains(string(data), "secret") || strings.Contains(string(data), "dir") {
				t.Errorf("%s lists the directory outside: %q (%q)", line, data, final.String())
			}
		}
		for _, line := range []string{"MLSD escape", "MLSD escape/", "MLSD absescape", "MLSD escape/dir"} {
			_, final, data := tryRetr(t, c, line)
			if final.Code != gridftp.CodeFileUnavailable || len(data) != 0 {
				t.Errorf("%s: %q with %q", line, final.String(), data)
			}
		}
		// Listings of the links themselves name them, but not where they
		// lead out of the root (nor the root's own place on the host).
		reveals := func(text string) bool {
			return strings.Contains(text, "outside") || strings.Contains(text, "/etc") || strings.Contains(text, parent)
		}
		for _, line := range []string{"MLSD", "MLSD /", "LIST", "LIST -la /", "MLSD sub", "LIST sub"} {
			_, final, data := tryRetr(t, c, line)
			if final.Code != 226 || reveals(string(data)) || !strings.Contains(string(data), "secretlink") && !strings.Contains(string(data), "up") {
				t.Errorf("%s: %q with\n%s", line, final.String(), data)
			}
		}
		for _, link := range []string{"secretlink", "abslink", "passwd", "escape", "absescape", "sub/up", "dangling"} {
			for _, verb := range []string{"MLST ", "STAT "} {
				c.send(verb + link)
				if r := c.read(); reveals(r.String()) || !strings.Contains(r.String(), path.Base(link)) {
					t.Errorf("%s%s: %q", verb, link, r.String())
				}
			}
		}
		// A link that stays inside keeps its target: a client removing a
		// tree must not enter a linked directory.
		_, _, data := tryRetr(t, c, "MLSD")
		if !strings.Contains(string(data), "UNIX.slink=sub/g; inlink") {
			t.Errorf("MLSD lost the target of a link inside the root:\n%s", data)
		}
	})

	t.Run("writes", func(t *testing.T) {
		for _, line := range []string{
			"STOR secretlink", "STOR abslink", "STOR sub/up", "STOR escape/new", "STOR escape/secret",
			"STOR absescape/new", "STOR ../outside/new", "STOR /../../outside/new", "STOR passwd",
			"APPE secretlink", "APPE escape/secret", "STOR dangling", "STOR escape/dir/new",
		} {
			prelim, final := tryStore(t, c, line, []byte("pwned"))
			if final.Code != gridftp.CodeFileUnavailable || len(prelim) != 0 {
				t.Errorf("%s: %v then %q", line, prelim, final.String())
			}
		}
		// ".." at the top is the root itself, as in every FTP server.
		_, final := tryStore(t, c, "STOR ../x", []byte("x"))
		if final.String() != "226 Transfer Complete." {
			t.Fatalf("STOR ../x: %q", final.String())
		}
		if b := env.content("x"); string(b) != "x" {
			t.Fatalf("root/x = %q", b)
		}
		if _, err := os.Stat(filepath.Join(parent, "x")); err == nil {
			t.Fatalf("STOR ../x wrote next to the root")
		}
	})

	t.Run("namespace changes", func(t *testing.T) {
		for _, line := range []string{
			"MKD escape/d", "MKD absescape/d", "MKD ../outside/d", "RMD escape/dir", "DELE escape/secret",
			"DELE ../outside/secret", "RNFR escape/secret", "RNFR ../outside/secret",
			"SITE CHMOD 777 secretlink", "SITE CHMOD 777 escape", "SITE CHMOD 777 escape/secret",
			"SITE UTIME 20000101000000 secretlink", "SITE UTIME 20000101000000 escape",
			"MFMT 20000101000000 secretlink", "MFMT 20000101000000 escape/secret",
			"SITE TRNC 0 secretlink", "SITE TRNC 0 escape/secret", "SITE TRNC 0 abslink",
			"SITE RDEL escape/dir", "SITE RDEL ../outside",
		} {
			c.send(line)
			if r := c.read(); r.Code < 500 {
				t.Errorf("%s: %q", line, r.String())
			}
		}
		for _, to := range []string{"escape/f", "absescape/f", "../outside/f", "escape/dir/f"} {
			c.expect("RNFR f", gridftp.CodePending)
			c.send("RNTO " + to)
			if r := c.read(); r.Code < 500 {
				t.Errorf("RNTO %s: %q", to, r.String())
			}
		}
		// Removing a link removes the link, never what it points to.
		c.expectText("SITE RDEL escape", "250 RDEL command successful.")
		c.expectText("SITE RDEL sub", "250 RDEL command successful.")
		c.expectText("DELE secretlink", "250 DELE command successful.")
	})

	if after := snapshot(t, env.outside); !reflect.DeepEqual(before, after) {
		t.Errorf("the directory outside the root changed:\nbefore %v\nafter  %v", before, after)
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 2 {
		t.Errorf("the root's parent holds %d entries, want root and outside", len(entries))
	}
	if b, err := os.ReadFile(filepath.Join(env.outside, "secret")); err != nil || string(b) != string(secret) {
		t.Errorf("secret: %q, %v", b, err)
	}
}
