//go:build interop

package interop

// The managed service under attack, end to end: real `ferry server`
// processes, real endpoint servers and the real CLI. An endpoint made
// private stops the tasks of others; endpoints cannot lead the service to
// its own loopback services or to cloud metadata; nothing a non-GridFTP
// peer says reaches a user; wrong logins are throttled; the database is
// its owner's alone.

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ferry/internal/peertest"
	"ferry/service/api"
	"ferry/service/apiclient"
	"ferry/service/domain"
	"ferry/service/httpapi"
)

// newCLIUser adds user name to svc's database and logs the CLI in as it.
func newCLIUser(t *testing.T, svc *ferryService, name string) *serviceCLI {
	t.Helper()
	svc.addUser(name, servicePassword, "")
	c := &serviceCLI{t: t, home: t.TempDir(), url: svc.URL()}
	c.ok(servicePassword+"\n", "login", "--username", name)
	return c
}

// wantRevoked waits for task id to end and fails the test unless it ended
// FAILED because an endpoint was made private.
func wantRevoked(t *testing.T, c *serviceCLI, id string) api.Task {
	t.Helper()
	task := c.wait(id, time.Minute)
	if task.Status != domain.StatusFailed || task.FatalError == nil || task.FatalError.Code != domain.NicePermissionDenied ||
		!strings.Contains(task.FatalError.Description, "is no longer shared") {
		t.Fatalf("task %s: %s (%s); want FAILED %s saying the endpoint is no longer shared; events:\n%s",
			id, task.Status, fatalText(task), domain.NicePermissionDenied, c.events(id))
	}
	return task
}

// TestServiceEndpointMadePrivate: alice shares an endpoint, bob copies
// from it, and alice makes it private again. Bob's task that waited
// INACTIVE (his destination was full) fails when he resumes it, and his
// running task stops at once, FAILED: neither goes on with alice's data.
func TestServiceEndpointMadePrivate(t *testing.T) {
	needFerry(t)
	src := startFerryConfig(t, ferryConfig{Anonymous: true, Args: []string{"--log-level", "debug"}})
	makeRandomFiles(t, src.Path("small"), "f-%d.dat", 3, 512<<10, 512<<10)
	files := makeServiceTree(t, src.Path("tree"), 200, 0)
	full := mountTiny(t, "1m")
	tiny := startFerryConfig(t, ferryConfig{Root: full, Anonymous: true})
	dst := startFerryConfig(t, ferryConfig{Anonymous: true})
	s := startService(t, serviceConfig{})
	alice := newServiceUser(t, s, "")
	bob := newCLIUser(t, s, "bob")
	alice.addEndpoint("shared", src, "--public")
	alice.addEndpoint("shared2", src, "--public")
	bob.addEndpoint("tiny", tiny)
	bob.addEndpoint("mine", dst)

	t.Run("inactive", func(t *testing.T) {
		id := bob.transfer("alice#shared:/small", "tiny:/small", "-r")
		bob.waitFor(id, "INACTIVE (NO_SPACE)", 30*time.Second, func(t api.Task) bool {
			return t.Status == domain.StatusInactive && t.NiceStatus == domain.NiceNoSpace
		})
		alice.ok("", "endpoint", "update", "shared", "--public=false")
		if out, err := exec.Command("mount", "-o", "remount,size=20m", full).CombinedOutput(); err != nil {
			t.Fatalf("remount: %v: %s", err, out)
		}
		bob.ok("", "task", "resume", id)
		wantRevoked(t, bob, id)
		if n, _ := filepath.Glob(filepath.Join(full, "small", "*")); len(n) == 3 {
			t.Errorf("the files of the private endpoint reached bob's destination: %v", n)
		}
	})

	t.Run("running", func(t *testing.T) {
		th := startThrottle(t, src, time.Millisecond, 40*time.Millisecond)
		// One transfer per file: tar streams would finish the tree between
		// two of the throttle's steps.
		id := bob.transfer("alice#shared2:/tree", "mine:/tree", "-r", "--tar", "never")
		bob.waitFor(id, "files recorded done", 30*time.Second, func(t api.Task) bool { return t.FilesTransferred > 0 })
		alice.ok("", "endpoint", "update", "shared2", "--public=false")
		th.release() // at full speed, the rest would be done in a moment
		task := wantRevoked(t, bob, id)
		if task.FilesTransferred >= int64(files) {
			t.Fatalf("all %d files were transferred", files)
		}
		sent := len(retrieved(t, src.log.Bytes()))
		time.Sleep(time.Second)
		if again := len(retrieved(t, src.log.Bytes())); again != sent {
			t.Errorf("files were still read from the private endpoint after the task failed: %d, then %d", sent, again)
		}
		t.Logf("stopped with %d of %d files transferred", task.FilesTransferred, files)
		// Alice's own tasks on her private endpoint go on.
		own := alice.transfer("shared2:/tree", "shared2:/copy", "-r")
		alice.succeeded(own, time.Minute)
	})
}

// hostAddr gives this machine an address of its own beside loopback (on
// one end of a veth pair), removed at cleanup: a service listening there
// is not a local one.
func hostAddr(t *testing.T, name, ip string) string {
	t.Helper()
	needNetns(t)
	exec.Command("ip", "link", "del", name).Run()
	sh(t, "ip", "link", "add", name, "type", "veth", "peer", "name", name+"p")
	t.Cleanup(func() { exec.Command("ip", "link", "del", name).Run() }) // both ends
	sh(t, "ip", "addr", "add", ip+"/32", "dev", name)
	sh(t, "ip", "link", "set", name, "up")
	sh(t, "ip", "link", "set", name+"p", "up")
	return ip
}

// TestServiceEndpointNetworks: a service that listens on an address of
// the host, not on loopback, refuses endpoints on loopback (given as an
// address or as a name), on the cloud metadata address or on this host's
// unspecified address, and serves those elsewhere; started again with
// --endpoint-networks that leaves an endpoint outside, it no longer
// connects to it.
func TestServiceEndpointNetworks(t *testing.T) {
	needFerry(t)
	host := hostAddr(t, "ferrysec0", "10.202.11.1")
	lo := startFerryConfig(t, ferryConfig{Anonymous: true}) // a loopback-only service of the host
	ssh := peertest.Serve(t, "SSH-2.0-OpenSSH_9.6\r\n", "")
	dtnRoot := t.TempDir()
	writeFile(t, filepath.Join(dtnRoot, "hello.txt"), []byte("hello\n"))
	dtn := &ferryServer{child: child{t: t, name: "ferry gridftp", log: &logBuffer{}}, root: dtnRoot, addr: net.JoinHostPort(host, freePortOn(t, host))}
	dtn.args = []string{"gridftp", "--root", dtnRoot, "--listen", dtn.addr, "--anonymous"}
	t.Cleanup(dtn.stop)
	dtn.start()

	data := t.TempDir()
	svc := startConnectService(t, host, serviceConfig{Data: data})
	c := newServiceUser(t, svc, "")
	_, loPort, _ := net.SplitHostPort(lo.Addr())
	_, sshPort, _ := net.SplitHostPort(ssh)
	for _, tc := range []struct{ server, why string }{
		{"ftp://" + lo.Addr(), "loopback"},
		{"ftp://localhost:" + loPort, "loopback"},
		{"ftp://" + ssh, "loopback"},
		{"ftp://[::1]:" + sshPort, "loopback"},
		{"ftp://169.254.169.254:80", "link-local"},
		{"ftp://0.0.0.0:" + loPort, "unspecified"},
	} {
		r := c.run("", "endpoint", "add", "x", "--server", tc.server)
		if r.code == 0 || !strings.Contains(r.stderr, "not allowed") || !strings.Contains(r.stderr, tc.why) {
			t.Errorf("endpoint on %s: want a refusal saying %q:\n%s", tc.server, tc.why, r)
		}
	}
	c.addEndpoint("dtn", dtn)
	if out := c.ok("", "ls", "dtn:/"); !strings.Contains(out, "hello.txt") {
		t.Fatalf("ls dtn:/ = %q", out)
	}

	svc.stop()
	strict := startConnectService(t, host, serviceConfig{Data: data, Args: []string{"--endpoint-networks", "192.0.2.0/24"}})
	c.login(strict)
	r := c.run("", "ls", "dtn:/")
	if r.code == 0 || !strings.Contains(r.stderr, "outside the networks allowed here (192.0.2.0/24)") {
		t.Fatalf("ls of an endpoint outside --endpoint-networks:\n%s", r)
	}
	r = runFerryCLI(t, 30*time.Second, nil, "", "server", "--data", t.TempDir(), "--listen", "127.0.0.1:0",
		"--endpoint-networks", "10.0.0.0/33")
	if r.code == 0 || !strings.Contains(r.stderr, "--endpoint-networks") {
		t.Fatalf("a malformed --endpoint-networks:\n%s", r)
	}
}

// TestServicePeerWords: endpoints whose servers are an SSH server and an
// SMTP server on the service's host: listing, activating and transferring
// fail, and nothing the CLI prints or the task's history holds repeats
// what they said.
func TestServicePeerWords(t *testing.T) {
	needFerry(t)
	const secret = "INTERNAL-SECRET-5e2b"
	ssh := peertest.Serve(t, "SSH-2.0-OpenSSH_9.6 "+secret+"\r\n", "")
	smtp := peertest.Serve(t, "220 mail."+secret+" ESMTP\r\n", "502 5.5.2 "+secret+"\r\n")
	dst := startFerryConfig(t, ferryConfig{Anonymous: true})
	s := startService(t, serviceConfig{})
	c := newServiceUser(t, s, "")
	c.addEndpoint("dst", dst)
	var said strings.Builder
	for name, addr := range map[string]string{"ssh": ssh, "smtp": smtp} {
		c.ok("", "endpoint", "add", name, "--server", "ftp://"+addr)
		c.ok("", "endpoint", "add", name+"-pw", "--server", "ftp://"+addr, "--auth", "password")
		for _, args := range [][]string{
			{"ls", name + ":/"},
			{"mkdir", name + ":/d"},
			{"endpoint", "activate", name + "-pw", "--username", "u"},
		} {
			r := c.run("pw\n", args...)
			if r.code == 0 {
				t.Errorf("%s: succeeded", strings.Join(args, " "))
			}
			said.WriteString(r.String())
		}
		r := c.run("", "transfer", name+":/a", "dst:/a")
		said.WriteString(r.String())
		if id := strings.TrimSpace(r.stdout); r.code == 0 {
			task := c.wait(id, time.Minute)
			said.WriteString(fatalText(task) + "\n" + c.events(id))
		}
	}
	if strings.Contains(said.String(), secret) {
		t.Fatalf("what the peers said reached the user:\n%s", said.String())
	}
	t.Logf("what users were told:\n%s", said.String())
}

// TestServiceLoginThrottle: `ferry login` with wrong passwords soon
// answers that there were too many, and when to try again.
func TestServiceLoginThrottle(t *testing.T) {
	needFerry(t)
	s := startService(t, serviceConfig{})
	s.addUser("alice", servicePassword, "")
	c := &serviceCLI{t: t, home: t.TempDir(), url: s.URL()}
	var r cliRun
	for i := range 6 {
		r = c.run(fmt.Sprintf("guess%d\n", i), "login", "--username", "alice")
		if r.code == 0 {
			t.Fatalf("a wrong password logged in:\n%s", r)
		}
	}
	if !strings.Contains(r.stderr, "too many failed logins: try again in") {
		t.Fatalf("the 6th wrong login:\n%s", r)
	}
	if r = c.run(servicePassword+"\n", "login", "--username", "alice"); r.code == 0 {
		t.Fatalf("the right password right after 6 wrong ones was looked at:\n%s", r)
	}
}

// TestServiceSessionCookieSecure: the web session cookie is Secure when
// users reach the service over https (its --public-url), so a browser
// never sends it over plain http; a service reached over plain http sets
// it without, or browsers would drop it. Logging out clears it alike.
func TestServiceSessionCookieSecure(t *testing.T) {
	needFerry(t)
	for _, tc := range []struct {
		publicURL string
		secure    bool
	}{
		{"", false},
		{"http://ferry.example.org", false},
		{"https://ferry.example.org", true},
	} {
		t.Run(cmp.Or(tc.publicURL, "no public URL"), func(t *testing.T) {
			var args []string
			if tc.publicURL != "" {
				args = []string{"--public-url", tc.publicURL}
			}
			s := startService(t, serviceConfig{Args: args})
			s.addUser("alice", servicePassword, "")
			login := sessionCookie(t, s, "POST", "auth/login", "", `{"username":"alice","password":"`+servicePassword+`","kind":"session"}`)
			if login.Secure != tc.secure {
				t.Errorf("login: cookie %q: Secure %v, want %v", login, login.Secure, tc.secure)
			}
			if logout := sessionCookie(t, s, "POST", "auth/logout", login.Value, ""); logout.Secure != tc.secure || logout.MaxAge >= 0 {
				t.Errorf("logout: cookie %q: Secure %v, want %v, and cleared", logout, logout.Secure, tc.secure)
			}
		})
	}
}

// sessionCookie sends a request of the API (with the session cookie
// value, if not "") and returns the session cookie it set.
func sessionCookie(t *testing.T, s *ferryService, method, route, value, body string) *http.Cookie {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+"/api/v0.10/"+route, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if value != "" {
		req.AddCookie(&http.Cookie{Name: httpapi.SessionCookie, Value: value})
		req.Header.Set("X-CSRF-Token", httpapi.CSRFToken(value))
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, c := range resp.Cookies() {
		if c.Name == httpapi.SessionCookie {
			return c
		}
	}
	t.Fatalf("%s %s: %s, no session cookie:\n%s", method, route, resp.Status, b)
	return nil
}

// TestServiceSlowEndpoint: an endpoint's server that greets and then
// stalls, at the login or at the listing, holds ls only for
// --endpoint-timeout, and the API then says what timed out, with 504
// (it answered 502 "endpoint unreachable: read tcp ...: i/o timeout"
// after a minute, and 500 "internal error" to a client that gave up
// first).
func TestServiceSlowEndpoint(t *testing.T) {
	needFerry(t)
	s := startService(t, serviceConfig{Args: []string{"--endpoint-timeout", "3s"}})
	c := newCLIUser(t, s, "alice")
	cl := apiClient(t, s, "alice")
	for _, tc := range []struct {
		name    string
		answers map[string]string // the replies it gives; it stalls at any other command
		what    string
	}{
		{"at the login", nil, "log in to alice#"},
		{"at the listing", map[string]string{"USER": "331 Password.", "PASS": "230 In.", "TYPE": "200 Binary.", "FEAT": "211 End."}, "list / on alice#"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startStallingServer(t, tc.answers)
			name := strings.ReplaceAll(tc.name, " ", "-")
			c.ok("", "endpoint", "add", name, "--server", "ftp://"+addr)
			_, err := cl.Ls(t.Context(), name, api.ListQuery{Path: "/"})
			ae, ok := errors.AsType[*api.Error](err)
			want := "the endpoint server at " + addr + " did not answer within 3s"
			if !ok || ae.Status != http.StatusGatewayTimeout || ae.Code != domain.ETimeout || !strings.Contains(ae.Message, want) || !strings.Contains(ae.Message, tc.what) {
				t.Fatalf("ls: %v (%#v), want 504 %s saying %q about %q", err, ae, domain.ETimeout, want, tc.what)
			}
			if r := c.run("", "ls", name+":/"); r.code != 1 || !strings.Contains(r.stderr, want) {
				t.Fatalf("ferry ls, want exit 1 saying %q:\n%s", want, r)
			}
		})
	}
}

// startStallingServer listens on 127.0.0.1 and answers each connection's
// greeting, then each command whose verb answers holds, until the first
// other command: then it reads on and never answers. It returns the
// address.
func startStallingServer(t *testing.T, answers map[string]string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			go func() {
				io.WriteString(conn, "220 Slow server ready.\r\n")
				sc := bufio.NewScanner(conn)
				for sc.Scan() {
					verb, _, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
					reply, ok := answers[verb]
					if !ok {
						io.Copy(io.Discard, conn) // stall
						return
					}
					io.WriteString(conn, reply+"\r\n")
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// apiClient is the Go client of svc's API, logged in as user, whose
// password is servicePassword.
func apiClient(t *testing.T, svc *ferryService, user string) *apiclient.Client {
	t.Helper()
	token, err := apiclient.New(svc.URL(), "", nil).Login(t.Context(), api.Login{Username: user, Password: servicePassword})
	if err != nil {
		t.Fatal(err)
	}
	return apiclient.New(svc.URL(), token.Value, &http.Client{Timeout: time.Minute})
}

// TestServiceRenameNoReplace: ferry rename and the API's rename onto an
// existing file or directory are refused (409 Conflict) and leave both as
// they were, on ferry's server and on GCT's, whose RNTO replaces a file
// (both replaced it silently). Asked to overwrite (--overwrite, the API's
// overwrite), they replace the file; a new name needs nothing.
func TestServiceRenameNoReplace(t *testing.T) {
	needTools(t, "globus-gridftp-server")
	fg := startFerryConfig(t, ferryConfig{Anonymous: true})
	gct := startGCTServer(t)
	s := startService(t, serviceConfig{})
	c := newCLIUser(t, s, "alice")
	cl := apiClient(t, s, "alice")
	c.addEndpoint("fg", fg)
	c.addEndpoint("gct", gct)
	// GCT's paths are the host's, ferry's are under its root.
	for _, ep := range []struct{ name, root, dir string }{{"fg", fg.Root(), ""}, {"gct", gct.root, gct.root}} {
		t.Run(ep.name, func(t *testing.T) {
			files := map[string]string{"a.txt": "A", "b.txt": "B"}
			for name, data := range files {
				if err := os.WriteFile(filepath.Join(ep.root, name), []byte(data), 0o666); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Mkdir(filepath.Join(ep.root, "d"), 0o777); err != nil {
				t.Fatal(err)
			}
			from := ep.dir + "/a.txt"
			for _, to := range []string{ep.dir + "/b.txt", ep.dir + "/d"} {
				if r := c.run("", "rename", ep.name+":"+from, ep.name+":"+to); r.code != 1 || !strings.Contains(r.stderr, to+" already exists") {
					t.Errorf("ferry rename onto %s: want exit 1, %q:\n%s", to, to+" already exists", r)
				}
				_, err := cl.Rename(t.Context(), ep.name, from, to, false)
				if ae, ok := errors.AsType[*api.Error](err); !ok || ae.Status != http.StatusConflict || ae.Code != domain.EConflict {
					t.Errorf("the API's rename onto %s: %v, want 409 %s", to, err, domain.EConflict)
				}
			}
			wantFiles(t, ep.root, files)

			if err := os.WriteFile(filepath.Join(ep.root, "c.txt"), []byte("C"), 0o666); err != nil {
				t.Fatal(err)
			}
			if _, err := cl.Rename(t.Context(), ep.name, ep.dir+"/c.txt", ep.dir+"/b.txt", true); err != nil {
				t.Errorf("the API's rename with overwrite: %v", err)
			}
			wantFiles(t, ep.root, map[string]string{"a.txt": "A", "b.txt": "C"})
			c.ok("", "rename", "--overwrite", ep.name+":"+from, ep.name+":"+ep.dir+"/b.txt")
			c.ok("", "rename", ep.name+":"+ep.dir+"/b.txt", ep.name+":"+ep.dir+"/e.txt")
			wantFiles(t, ep.root, map[string]string{"e.txt": "A"})
			for _, gone := range []string{"a.txt", "b.txt", "c.txt"} {
				if _, err := os.Stat(filepath.Join(ep.root, gone)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s after the renames: %v, want it gone", gone, err)
				}
			}
		})
	}
}

// wantFiles fails the test unless each file named in want, under root,
// holds what want says.
func wantFiles(t *testing.T, root string, want map[string]string) {
	t.Helper()
	for name, data := range want {
		if b, err := os.ReadFile(filepath.Join(root, name)); err != nil || string(b) != data {
			t.Errorf("%s holds %q (%v), want %q", name, b, err, data)
		}
	}
}

// TestServiceDatabaseModes: the SQLite database of a running service, its
// WAL and shared-memory files, and the data directory are the owner's
// alone, even under the harness's umask of 0.
func TestServiceDatabaseModes(t *testing.T) {
	needFerry(t)
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	s := startService(t, serviceConfig{Data: data})
	newServiceUser(t, s, "") // a write: the WAL exists
	for name, want := range map[string]fs.FileMode{"": 0o700 | fs.ModeDir, "ferry.db": 0o600, "ferry.db-wal": 0o600, "ferry.db-shm": 0o600, "secret.key": 0o600} {
		st, err := os.Stat(filepath.Join(data, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != want {
			t.Errorf("%s: mode %v, want %v", filepath.Join(data, name), st.Mode(), want)
		}
	}
}
