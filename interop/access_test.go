//go:build interop

package interop

// Who may do what to a `ferry gridftp` process, and how often, as the real
// clients meet it: anonymous sessions only read unless --anonymous-write;
// password guessing waits, per account and per client address, however
// often the guesser reconnects; connections that never log in, and an
// address that opens sixty of them, do not lock out the others.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFerryAnonymousReadOnly(t *testing.T) {
	needTools(t, "curl", "lftp", "gfal-copy", "gfal-ls", "gfal-rm")
	srv := startFerryConfig(t, ferryConfig{Args: []string{"--anonymous"}})
	writeFile(t, srv.Path("f.txt"), []byte("hello\n"))
	writeFile(t, srv.Path("tree/a/b.txt"), []byte("b\n"))
	writeFile(t, srv.Path("tree/c.txt"), []byte("c\n"))
	before := snapshot(t, srv.Root())
	local := filepath.Join(t.TempDir(), "up.dat")
	writeRandomFile(t, local, 100<<10)

	refused := func(what string, out string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: succeeded on a read-only server\n%s", what, out)
		}
	}
	t.Run("globus-url-copy", func(t *testing.T) {
		out, err := gucErr(fileURL(local), srv.URL("up.dat"))
		refused("put", out, err)
		out, err = gucErr("-p", "4", fileURL(local), srv.URL("up4.dat"))
		refused("put -p 4", out, err)
		got := filepath.Join(t.TempDir(), "f.txt")
		guc(t, srv.URL("f.txt"), fileURL(got))
		if b := readFile(t, got); string(b) != "hello\n" {
			t.Errorf("get: %q", b)
		}
	})
	t.Run("curl", func(t *testing.T) {
		ctx := context.Background()
		out, err := runTool(ctx, cmdTimeout, "", "curl", "-sS", "--max-time", "30", "-T", local, srv.HomeURL("up.dat"))
		refused("curl -T", out, err)
		out, err = runTool(ctx, cmdTimeout, "", "curl", "-sS", "--max-time", "30", "-Q", "DELE f.txt", srv.HomeURL(""))
		refused("curl -Q DELE", out, err)
		out, err = runTool(ctx, cmdTimeout, "", "curl", "-sS", "--max-time", "30", srv.HomeURL("f.txt"))
		if err != nil || out != "hello\n" {
			t.Errorf("curl get: %v %q", err, out)
		}
	})
	t.Run("lftp", func(t *testing.T) {
		for _, cmd := range []string{"put " + lftpQuote(local) + " -o up.dat", "rm f.txt", "rm -r tree",
			"mkdir d", "chmod 777 f.txt", "mv f.txt g.txt", "rmdir tree/a"} {
			out, err := runTool(context.Background(), cmdTimeout, "", "lftp", "-c", strings.Join([]string{
				"set cmd:fail-exit yes", "set ftp:ssl-allow no", "set net:max-retries 1", "set net:timeout 15",
				"open ftp://" + srv.Addr(), "user anonymous ferry@", cmd}, "\n"))
			refused("lftp "+cmd, out, err)
		}
		if out := lftpScript(t, srv, "cls -1 /"); !strings.Contains(out, "f.txt") {
			t.Errorf("lftp cls: %q", out)
		}
	})
	t.Run("gfal", func(t *testing.T) {
		out, err := runTool(context.Background(), cmdTimeout, "", "gfal-copy", "-t", "30", fileURL(local), srv.URL("up.dat"))
		refused("gfal-copy up", out, err)
		out, err = runTool(context.Background(), cmdTimeout, "", "gfal-rm", "-r", srv.URL("tree/"))
		refused("gfal-rm -r", out, err)
		if out := gfal(t, "gfal-ls", srv.URL("")); !strings.Contains(out, "f.txt") {
			t.Errorf("gfal-ls: %q", out)
		}
	})
	t.Run("raw", func(t *testing.T) {
		c := dialFTP(t, srv.Addr())
		c.login("anonymous", "ferry@")
		for _, line := range []string{"SITE RDEL tree", "SITE CHMOD 777 /", "SITE CHMOD 777 tree", "DELE f.txt",
			"RMD tree/a", "RNFR f.txt", "SITE TRNC 0 f.txt", "SITE UTIME 20000101000000 f.txt", "MFMT 20000101000000 f.txt",
			"ALLO 1024", "ESTO A 0 f.txt", "APPE f.txt", "STOR f.txt"} {
			code, msg := c.cmd(line)
			if code != 550 || !strings.Contains(msg, "c=PERMISSION_DENIED") {
				t.Errorf("%s: %d %s, want 550 PERMISSION_DENIED", line, code, msg)
			}
		}
	})
	if d := diffSnapshots(before, snapshot(t, srv.Root())); d != "" {
		t.Errorf("anonymous sessions changed a read-only tree:\n%s", d)
	}
}

// TestFerryLoginBackoff: a guesser that reconnects after every third wrong
// password still waits once the account has failed 10 times; other
// accounts, from elsewhere, log in; the account logs in once the wait is
// over.
func TestFerryLoginBackoff(t *testing.T) {
	needTools(t)
	pwfile := filepath.Join(t.TempDir(), "passwd")
	ferryPasswd(t, pwfile, "alice", "alice-pw")
	ferryPasswd(t, pwfile, "bob", "bob-pw")
	srv := startFerryConfig(t, ferryConfig{Args: []string{"--password-file", pwfile}})

	pass := func(ip, user, password string) (int, string) {
		t.Helper()
		c := dialFTPFrom(t, ip, srv.Addr())
		if code, msg := c.read(); code != 220 {
			t.Fatalf("banner: %d %s", code, msg)
		}
		defer c.tp.Close()
		if code, msg := c.cmd("USER " + user); code != 331 {
			t.Fatalf("USER: %d %s", code, msg)
		}
		code, msg := c.cmd("PASS " + password)
		if code == 421 {
			if _, _, err := c.tp.ReadResponse(0); err == nil {
				t.Errorf("the session stayed open after %d %s", code, msg)
			}
		}
		return code, msg
	}
	for i := range 10 {
		if code, msg := pass("127.0.0.2", "alice", fmt.Sprint("guess", i)); code != 530 {
			t.Fatalf("guess %d: %d %s, want 530", i, code, msg)
		}
	}
	// After the tenth failure the account waits, even for the right password.
	if code, msg := pass("127.0.0.2", "alice", "alice-pw"); code != 421 || !strings.Contains(msg, "Too many failed logins") {
		t.Fatalf("after 10 failures: %d %s, want 421", code, msg)
	}
	time.Sleep(1100 * time.Millisecond)
	// The wait counts from the try: the eleventh failure's is 2 s, less
	// the time its password check took (bcrypt takes a second or more on a
	// loaded machine), rounded up.
	eleventh := time.Now()
	if code, msg := pass("127.0.0.2", "alice", "guess10"); code != 530 {
		t.Fatalf("after the first wait: %d %s, want 530", code, msg)
	}
	start := time.Now()
	code, msg := pass("127.0.0.3", "alice", "alice-pw")
	var secs int
	_, after, _ := strings.Cut(msg, "try again in ")
	if _, err := fmt.Sscanf(after, "%ds", &secs); code != 421 || err != nil ||
		secs < 1 || secs > 2 || time.Since(eleventh)+time.Duration(secs)*time.Second < 2*time.Second {
		t.Fatalf("after 11 failures, from elsewhere, %v after the eleventh began: %d %s, want 421 ... try again in 2s less that", time.Since(eleventh), code, msg)
	}
	// bob, from another address, logs in meanwhile.
	local := filepath.Join(t.TempDir(), "bob.dat")
	writeRandomFile(t, local, 10<<10)
	guc(t, fileURL(local), userURL(t, srv, "bob", "bob-pw", "bob.dat"))
	if _, err := os.Stat(srv.Path("bob.dat")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100*time.Millisecond - time.Since(start))
	guc(t, userURL(t, srv, "alice", "alice-pw", "bob.dat"), fileURL(filepath.Join(t.TempDir(), "alice.dat")))
}

// TestFerryLoginAndIdleTimeouts: --login-timeout closes a connection that
// trickles bytes but never logs in; --idle-timeout closes a logged-in
// session that stays silent.
func TestFerryLoginAndIdleTimeouts(t *testing.T) {
	needTools(t)
	srv := startFerryConfig(t, ferryConfig{Anonymous: true, Args: []string{"--login-timeout", "1s", "--idle-timeout", "2s"}})

	slow := dialFTP(t, srv.Addr())
	start := time.Now()
	go func() {
		for range 20 {
			if _, err := slow.conn.Write([]byte("N")); err != nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	code, msg := slow.read()
	if code != 421 || !strings.Contains(msg, "Login timeout") {
		t.Fatalf("a connection that does not log in: %d %s", code, msg)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("closed after %v, want about 1s", d)
	}

	idle := dialFTP(t, srv.Addr())
	idle.login("anonymous", "ferry@")
	for range 3 { // commands keep it open past both limits
		time.Sleep(800 * time.Millisecond)
		if code, msg := idle.cmd("NOOP"); code != 200 {
			t.Fatalf("NOOP: %d %s", code, msg)
		}
	}
	start = time.Now()
	code, msg = idle.read()
	if code != 421 || !strings.Contains(msg, "Idle timeout") {
		t.Fatalf("an idle session: %d %s", code, msg)
	}
	if d := time.Since(start); d < 1500*time.Millisecond || d > 5*time.Second {
		t.Errorf("idle session closed after %v, want about 2s", d)
	}
}

// TestFerrySessionsPerAddress: sixty connections from one address that
// send a byte a second and never log in hold only that address's share;
// globus-url-copy from another address still runs eight sessions. With the
// defaults, globus-url-copy -cc 32 runs from one address.
func TestFerrySessionsPerAddress(t *testing.T) {
	needTools(t)
	srv := startFerryConfig(t, ferryConfig{Anonymous: true,
		Args: []string{"--max-sessions", "20", "--max-sessions-per-address", "8"}})
	stop := make(chan struct{})
	defer close(stop)
	held := 0
	for range 60 {
		c := dialFTPFrom(t, "127.0.0.2", srv.Addr())
		code, msg := c.read()
		switch {
		case code == 220:
			held++
			go func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Second):
					}
					if _, err := c.conn.Write([]byte("N")); err != nil {
						return
					}
				}
			}()
		case code != 421 || !strings.Contains(msg, "from your address (limit 8)"):
			t.Fatalf("connection from 127.0.0.2: %d %s", code, msg)
		}
	}
	if held != 8 {
		t.Fatalf("%d connections held from one address, want 8", held)
	}
	tree := t.TempDir()
	for i := range 40 {
		writeRandomFile(t, filepath.Join(tree, fmt.Sprintf("f%02d.dat", i)), 20<<10)
	}
	guc(t, "-cc", "8", "-cd", "-r", dirURL(tree), srv.URL("up/"))
	if entries, err := os.ReadDir(srv.Path("up")); err != nil || len(entries) != 40 {
		t.Fatalf("uploaded %d files (%v), want 40", len(entries), err)
	}

	t.Run("defaults", func(t *testing.T) {
		dflt := startFerry(t)
		guc(t, "-cc", "32", "-cd", "-r", dirURL(tree), dflt.URL("up/"))
		guc(t, "-cc", "32", "-cd", "-r", dflt.URL("up/"), dirURL(filepath.Join(t.TempDir(), "down")))
	})
}
