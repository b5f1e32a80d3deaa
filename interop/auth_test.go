//go:build interop

package interop

// Password logins: `ferry passwd` writes the file, `ferry gridftp
// --password-file` checks against it, globus-url-copy logs in with
// ftp://user:pass@host:port/.

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ferryPasswd sets user's password in file with `ferry passwd`.
func ferryPasswd(t *testing.T, file, user, password string) {
	t.Helper()
	needFerry(t)
	if _, err := runTool(context.Background(), 30*time.Second, password+"\n", ferryBin,
		"passwd", "--file", file, user); err != nil {
		t.Fatal(err)
	}
}

// userURL is srv.URL(rel) with user:pass@ credentials.
func userURL(t *testing.T, srv server, user, pass, rel string) string {
	t.Helper()
	u, err := url.Parse(srv.URL(rel))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, pass)
	return u.String()
}

func TestFerryPassword(t *testing.T) {
	needTools(t)
	pwfile := filepath.Join(t.TempDir(), "passwd")
	const alicePW, bobPW = "Alice-pw-42", "bob-Secret-7"
	ferryPasswd(t, pwfile, "alice", alicePW)
	ferryPasswd(t, pwfile, "bob", bobPW)
	if b := readFile(t, pwfile); strings.Contains(string(b), alicePW) || strings.Contains(string(b), bobPW) {
		t.Errorf("%s holds a clear-text password:\n%s", pwfile, b)
	}

	srv := startFerryConfig(t, ferryConfig{Args: []string{"--password-file", pwfile}})
	local := filepath.Join(t.TempDir(), "data.dat")
	writeRandomFile(t, local, 1<<20+11)
	copyFile(t, local, srv.Path("data.dat"))

	for _, c := range []struct{ user, pass string }{{"alice", alicePW}, {"bob", bobPW}} {
		t.Run(c.user+"/get", func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.dat")
			guc(t, userURL(t, srv, c.user, c.pass, "data.dat"), fileURL(out))
			if err := compareFiles(local, out); err != nil {
				t.Fatal(err)
			}
		})
		t.Run(c.user+"/put-p4", func(t *testing.T) {
			rel := "up-" + c.user + ".dat"
			guc(t, "-p", "4", fileURL(local), userURL(t, srv, c.user, c.pass, rel))
			if err := compareFiles(local, srv.Path(rel)); err != nil {
				t.Fatal(err)
			}
		})
	}

	refused := []struct{ name, url string }{
		{"wrong-password", userURL(t, srv, "alice", "wrong", "data.dat")},
		{"other-users-password", userURL(t, srv, "alice", bobPW, "data.dat")},
		{"unknown-user", userURL(t, srv, "mallory", alicePW, "data.dat")},
		{"empty-password", userURL(t, srv, "alice", "", "data.dat")},
		{"anonymous-not-enabled", srv.URL("data.dat")},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.dat")
			if msg, err := gucErr(c.url, fileURL(out)); err == nil {
				t.Errorf("get %s succeeded, want a login failure\n%s", c.url, msg)
			}
			if _, err := os.Stat(out); err == nil {
				if b := readFile(t, out); len(b) > 0 {
					t.Errorf("got %d bytes without a valid login", len(b))
				}
			}
			rel := "refused-" + c.name + ".dat"
			if msg, err := gucErr(fileURL(local), strings.Replace(c.url, "data.dat", rel, 1)); err == nil {
				t.Errorf("put succeeded, want a login failure\n%s", msg)
			}
			if _, err := os.Stat(srv.Path(rel)); err == nil {
				t.Errorf("put without a valid login created %s", rel)
			}
		})
	}

	t.Run("raw-login", func(t *testing.T) {
		c := dialFTP(t, srv.Addr())
		if code, msg := c.cmd("USER alice"); code != 331 {
			t.Fatalf("USER alice: %d %s, want 331", code, msg)
		}
		if code, msg := c.cmd("PASS wrong"); code != 530 {
			t.Errorf("PASS wrong: %d %s, want 530", code, msg)
		}
		if code, msg := c.cmd("SIZE data.dat"); code != 530 {
			t.Errorf("SIZE before login: %d %s, want 530", code, msg)
		}
		c.login("alice", alicePW)
		if code, msg := c.cmd("SIZE data.dat"); code != 213 {
			t.Errorf("SIZE after login: %d %s, want 213", code, msg)
		}
	})
}
