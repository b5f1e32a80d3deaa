//go:build interop

package interop

// The SSH command gateway end to end: a real `ferry server --ssh-listen`,
// real ferry gridftp endpoints, and the real OpenSSH client, as a user
// with nothing installed meets it.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"ferry/internal/interoptest"
	"ferry/service/api"
	"ferry/service/domain"
)

// needSSH skips the test (fails it under FERRY_INTEROP=required) unless
// the OpenSSH client and ssh-keygen are installed.
func needSSH(t *testing.T) {
	t.Helper()
	for _, name := range []string{"ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(name); err != nil {
			interoptest.Missing(t, fmt.Sprintf("%v (Debian: openssh-client)", err))
		}
	}
}

// sshGateway is a ferry server serving SSH on loopback.
type sshGateway struct {
	svc  *ferryService
	port string
}

func startSSHGateway(t *testing.T, args ...string) *sshGateway {
	t.Helper()
	needSSH(t)
	port := strconv.Itoa(freePort(t))
	svc := startService(t, serviceConfig{Args: append([]string{"--ssh-listen", net.JoinHostPort("127.0.0.1", port)}, args...)})
	return &sshGateway{svc: svc, port: port}
}

// sshUser is one user of the gateway, with a key pair in a temp dir.
type sshUser struct {
	t          *testing.T
	g          *sshGateway
	name       string
	key, known string
}

// newKey makes an ed25519 key pair in dir and returns the private key's
// path.
func newKey(t *testing.T, dir string) string {
	t.Helper()
	key := filepath.Join(dir, "id_ed25519")
	mustRun(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", key)
	return key
}

// user adds user name to the service with a key of its own.
func (g *sshGateway) user(t *testing.T, name string) *sshUser {
	t.Helper()
	g.svc.addUser(name, servicePassword, "")
	dir := t.TempDir()
	u := &sshUser{t: t, g: g, name: name, key: newKey(t, dir), known: filepath.Join(dir, "known_hosts")}
	if r := runFerryCLI(t, time.Minute, nil, "", append([]string{"user", "key", "add", name, u.key + ".pub"}, storeArgs(g.svc.cfg)...)...); r.code != 0 {
		t.Fatalf("ferry user key add:\n%s", r)
	}
	return u
}

// sshArgs are the client's options: extra (ssh takes the first value
// of an option), then this key only, no configuration, no prompts.
func (u *sshUser) sshArgs(extra ...string) []string {
	return append(extra, "-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile="+u.known,
		"-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-i", u.key, "-p", u.g.port)
}

// ssh runs ssh with extra options, then USER@127.0.0.1 and the command
// words; it returns what a CLI run returns.
func (u *sshUser) ssh(stdin string, opts []string, words ...string) cliRun {
	u.t.Helper()
	args := append(u.sshArgs(opts...), u.name+"@127.0.0.1")
	args = append(args, words...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	r := cliRun{args: append([]string{"(ssh)"}, words...), stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		u.t.Fatalf("ssh %s: %v", strings.Join(words, " "), err)
	}
	return r
}

// run runs a command over SSH.
func (u *sshUser) run(words ...string) cliRun { u.t.Helper(); return u.ssh("", nil, words...) }

// ok runs a command over SSH and fails the test unless it exits 0.
func (u *sshUser) ok(words ...string) string {
	u.t.Helper()
	r := u.run(words...)
	if r.code != 0 {
		u.t.Fatalf("over SSH:\n%s", r)
	}
	return r.stdout
}

// decode runs a command with -F json over SSH and decodes its output.
func (u *sshUser) decode(v any, words ...string) {
	u.t.Helper()
	out := u.ok(append(words, "-F", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		u.t.Fatalf("%s -F json over SSH: %v\n%s", strings.Join(words, " "), err, out)
	}
}

// TestSSHGateway: alice, with only an SSH client, runs each group of the
// service commands, with the installed CLI's output and exit statuses.
func TestSSHGateway(t *testing.T) {
	g := startSSHGateway(t)
	alice := g.user(t, "alice")
	bob := g.user(t, "bob")
	cli := &serviceCLI{t: t, home: t.TempDir()}
	cli.login(g.svc) // alice with the installed CLI, to compare
	src, dst := startFerry(t), startFerry(t)
	if err := os.WriteFile(src.Path("a.txt"), []byte("hello over ssh\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	alice.ok("endpoint", "add", "src", "--server", "ftp://"+src.Addr())
	alice.ok("ferry", "endpoint", "add", "dst", "--server", "ftp://"+dst.Addr()) // "ferry" may lead
	var eps api.EndpointList
	alice.decode(&eps, "endpoint", "list")
	if len(eps.Data) != 2 || eps.Data[0].DisplayName != "alice#dst" || eps.Data[1].DisplayName != "alice#src" {
		t.Fatalf("endpoint list -F json over SSH: %+v", eps.Data)
	}

	if out := alice.ok("ls", "src:/"); out != "a.txt\n" {
		t.Fatalf("ls src:/ over SSH: %q", out)
	}
	alice.ok("mkdir", "dst:/d")
	if fi, err := os.Stat(dst.Path("d")); err != nil || !fi.IsDir() {
		t.Fatalf("mkdir over SSH made no directory: %v", err)
	}

	id := strings.TrimSpace(alice.ok("transfer", "src:/a.txt", "dst:/d/a.txt"))
	var done api.Task
	alice.decode(&done, "task", "wait", id, "--timeout", "1m")
	if done.Status != domain.StatusSucceeded {
		t.Fatalf("task wait over SSH: %+v", done)
	}
	if b, err := os.ReadFile(dst.Path("d/a.txt")); err != nil || string(b) != "hello over ssh\n" {
		t.Fatalf("transferred file: %q, %v", b, err)
	}
	var list api.TaskList
	alice.decode(&list, "task", "list")
	if len(list.Data) != 1 || list.Data[0].TaskID != id {
		t.Fatalf("task list over SSH: %+v", list.Data)
	}
	if out := alice.ok("task", "events", id); !strings.Contains(out, "SUCCEEDED") {
		t.Fatalf("task events over SSH:\n%s", out)
	}
	if r := alice.run("scp", "src:/a.txt", "dst:/d/"); r.code != 0 || !strings.Contains(r.stdout, "SUCCEEDED") {
		t.Fatalf("scp over SSH:\n%s", r)
	}
	if _, err := os.Stat(dst.Path("d/a.txt")); err != nil {
		t.Fatal(err)
	}
	// --batch reads standard input: the service host's files are not
	// the user's.
	if r := alice.ssh("a.txt b.txt\n", nil, "transfer", "--batch", "-", "src:/", "dst:/d/"); r.code != 0 {
		t.Fatalf("transfer --batch - over SSH:\n%s", r)
	}

	// The same command, the same output and exit status as the installed
	// CLI's.
	for _, words := range [][]string{
		{"ls", "src:/", "-l"},
		{"task", "show", id, "-F", "json"},
		{"details", id},
		{"task", "cancel", id},
		{"task", "show", "00000000-0000-0000-0000-000000000000"},
		{"ls", "nosuch:/"},
		{"ls"},
		{"task", "wait", id, "--timeout", "nonsense"},
		{"modify", id},
	} {
		ssh, local := alice.run(words...), cli.run("", words...)
		if ssh.code != local.code || ssh.stdout != local.stdout {
			t.Errorf("over SSH and installed differ:\n%s\n---\n%s", ssh, local)
		}
		if ssh.code != 0 && !strings.HasPrefix(ssh.stderr, "ferry: ") {
			t.Errorf("no error line over SSH:\n%s", ssh)
		}
	}

	// Bob sees nothing of alice's.
	if r := bob.run("task", "show", id); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("bob's task show of alice's task:\n%s", r)
	}
	if out := bob.ok("task", "list"); strings.Contains(out, id) {
		t.Errorf("bob's task list shows alice's task:\n%s", out)
	}
	if r := bob.run("ls", "alice#src:/"); r.code == 0 {
		t.Errorf("bob lists alice's private endpoint:\n%s", r)
	}

	// Only the service commands, and nothing that touches the host.
	for _, c := range []struct {
		words []string
		code  int
		says  string
	}{
		{[]string{"/bin/sh"}, 127, "not a ferry command"},
		{[]string{"sh", "-c", "id"}, 127, "not a ferry command"},
		{[]string{"login"}, 127, "not a ferry command"},
		{[]string{"token", "list"}, 127, "not a ferry command"},
		{[]string{"copy", "ftp://x/", "ftp://y/"}, 127, "not a ferry command"},
		{[]string{"server", "--data", "/tmp"}, 127, "not a ferry command"},
		{[]string{"user", "add", "eve"}, 127, "not a ferry command"},
		{[]string{"ls;", "id"}, 127, "not a ferry command"},
		{[]string{"transfer", "--batch", "/etc/passwd", "src:/", "dst:/"}, 2, "over SSH"},
		{[]string{"endpoint", "activate", "src", "--proxy", "/tmp/x509up_u0"}, 2, ""},
		{[]string{"ls", "src:/", "--url", "http://127.0.0.1:1"}, 2, "unknown flag: --url"},
		{[]string{"ls", "src:/", "--token", "x"}, 2, "unknown flag: --token"},
		{[]string{"completion", "bash"}, 127, "not a ferry command"},
	} {
		if r := alice.run(c.words...); r.code != c.code || !strings.Contains(r.stderr, c.says) {
			t.Errorf("want exit %d saying %q:\n%s", c.code, c.says, r)
		}
	}
}

// TestSSHGatewayRefusals: a key the service does not know, passwords,
// port forwarding and subsystems are refused.
func TestSSHGatewayRefusals(t *testing.T) {
	g := startSSHGateway(t)
	alice := g.user(t, "alice")
	if out := alice.ok("endpoint", "list"); !strings.HasPrefix(out, "NAME") {
		t.Fatalf("endpoint list:\n%s", out)
	}
	t.Run("unknown key", func(t *testing.T) {
		eve := *alice
		eve.key = newKey(t, t.TempDir())
		if r := eve.run("endpoint", "list"); r.code != 255 || !strings.Contains(r.stderr, "Permission denied") {
			t.Fatalf("an unknown key logged in:\n%s", r)
		}
	})
	t.Run("another user's name", func(t *testing.T) {
		bob := *alice
		bob.name = "bob"
		if r := bob.run("endpoint", "list"); r.code != 255 {
			t.Fatalf("alice's key logged in as bob:\n%s", r)
		}
	})
	t.Run("password", func(t *testing.T) {
		r := alice.ssh("", []string{"-v", "-o", "PreferredAuthentications=password,keyboard-interactive"}, "endpoint", "list")
		if r.code != 255 || !regexp.MustCompile(`Authentications that can continue: publickey\r?\n`).MatchString(r.stderr) {
			t.Fatalf("the gateway offers more than public keys:\n%s", r)
		}
	})
	t.Run("remote forwarding", func(t *testing.T) {
		r := alice.ssh("", []string{"-N", "-o", "ExitOnForwardFailure=yes", "-R", "127.0.0.1:0:127.0.0.1:" + g.port})
		if r.code == 0 || !strings.Contains(r.stderr, "forwarding failed") {
			t.Fatalf("a remote forward was not refused:\n%s", r)
		}
	})
	t.Run("local forwarding", func(t *testing.T) {
		local := strconv.Itoa(freePort(t))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "ssh", append(alice.sshArgs("-o", "LogLevel=INFO", "-N", "-L", "127.0.0.1:"+local+":"+g.svc.addr), "alice@127.0.0.1")...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		var c net.Conn
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if c, err = net.Dial("tcp", "127.0.0.1:"+local); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatalf("ssh -L never listened: %v", err)
		}
		defer c.Close()
		io.WriteString(c, "GET /healthz HTTP/1.0\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if b, _ := io.ReadAll(c); len(b) > 0 {
			t.Fatalf("the forward reached the service's API: %q", b)
		}
		cmd.Process.Kill()
		cmd.Wait()
		if !strings.Contains(stderr.String(), "administratively prohibited") {
			t.Fatalf("ssh said %q, want the channel refused", stderr.String())
		}
	})
	t.Run("sftp", func(t *testing.T) {
		if r := alice.ssh("", []string{"-s"}, "sftp"); r.code == 0 {
			t.Fatalf("the sftp subsystem was granted:\n%s", r)
		}
	})
}

// TestSSHGatewayOneAddress: forty idle TCP connections from one address
// (127.0.0.2) that never log in hold only that address's share of the
// connections logging in (8 by default), not all 32: a key login from
// 127.0.0.1 still gets in.
func TestSSHGatewayOneAddress(t *testing.T) {
	g := startSSHGateway(t, "--ssh-handshake", "5m") // the idle ones stay for the whole test
	alice := g.user(t, "alice")
	held := 0
	for range 40 {
		if holdSSH(t, "127.0.0.2", "127.0.0.1:"+g.port) {
			held++
		}
	}
	if held != 8 {
		t.Errorf("%d idle connections held from one address, want 8", held)
	}
	if r := alice.run("whoami"); r.code != 0 || !strings.Contains(r.stdout, "alice") {
		t.Fatalf("a key login from another address, while one address holds %d connections:\n%s", held, r)
	}
}

// holdSSH connects to the gateway at addr from the local address ip and
// reports whether the gateway took the connection (it sent its version
// line) or closed it. A connection taken is held, never logging in, until
// the test ends.
func holdSSH(t *testing.T, ip, addr string) bool {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, ip, err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	switch {
	case strings.HasPrefix(line, "SSH-2.0-"):
		return true
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		return false
	}
	t.Fatalf("connection from %s: read %q, %v", ip, line, err)
	return false
}

// TestSSHGatewayTerminal: ssh alone gives the ferry> prompt; with a
// terminal, task wait draws its progress bar, and without one it does not.
func TestSSHGatewayTerminal(t *testing.T) {
	g := startSSHGateway(t)
	alice := g.user(t, "alice")
	src := startFerry(t)
	alice.ok("endpoint", "add", "src", "--server", "ftp://"+src.Addr())
	// A transfer to a server that does not answer runs (retrying) until
	// its deadline: long enough for a bar.
	alice.ok("endpoint", "add", "gone", "--server", "ftp://127.0.0.1:"+strconv.Itoa(freePort(t)))
	if err := os.WriteFile(src.Path("a.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	r := alice.ssh("endpoint list\r\nls src:/\r\nmkdir src:/new\r\nexit\r\n", []string{"-tt"})
	for _, want := range []string{"ferry> ", "logged in as alice", "alice#src", "a.txt", "created directory /new"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("prompt session lacks %q:\n%s", want, r)
		}
	}
	if r.code != 0 {
		t.Errorf("prompt session exited %d", r.code)
	}
	if fi, err := os.Stat(src.Path("new")); err != nil || !fi.IsDir() {
		t.Errorf("mkdir at the prompt: %v", err)
	}

	id := strings.TrimSpace(alice.ok("transfer", "src:/a.txt", "gone:/a.txt"))
	bar := "\r\x1b[Kfiles "
	tty := alice.ssh("", []string{"-tt"}, "task", "wait", id, "--timeout", "1.5s")
	if tty.code != 3 || !strings.Contains(tty.stdout, bar) {
		t.Errorf("task wait with a terminal: want exit 3 (timeout) and the bar:\n%q", tty.stdout)
	}
	plain := alice.run("task", "wait", id, "--timeout", "1.5s")
	if plain.code != 3 || strings.Contains(plain.stderr, "\x1b[K") {
		t.Errorf("task wait without a terminal: want exit 3 and no bar:\n%s", plain)
	}
	if out := alice.ok("cancel", id); !strings.Contains(out, "cancel") {
		t.Errorf("cancel over SSH: %q", out)
	}
	var ended api.Task
	alice.decode(&ended, "task", "show", id)
	if ended.Status != domain.StatusFailed {
		t.Errorf("canceled task is %s", ended.Status)
	}
}

// TestWebAccount: the web app's account page adds a public key, which
// then logs in over SSH, and removes it.
func TestWebAccount(t *testing.T) {
	chromium := needChromium(t)
	g := startSSHGateway(t)
	g.svc.addUser("alice", "alice-pw", "")
	dir := t.TempDir()
	alice := &sshUser{t: t, g: g, name: "alice", key: newKey(t, dir), known: filepath.Join(dir, "known_hosts")}
	pub, err := os.ReadFile(alice.key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	p := newPage(t, chromium, g.svc.URL())
	p.do("sign in", chromedp.Navigate(g.svc.URL()+"/"), chromedp.WaitVisible(chromedp.ID("signin-title")),
		chromedp.SendKeys(chromedp.CSS(`input[name=username]`), "alice"), chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "alice-pw"),
		chromedp.Click(chromedp.CSS(`form.signin button`)))
	p.waitText(`#user`, "alice")
	p.do("account page", chromedp.Click(chromedp.CSS(`#nav a[href="#/account"]`)), chromedp.WaitVisible(chromedp.CSS(`.heading button.primary`)))
	p.waitText(`.keys`, "No SSH keys yet")
	if r := alice.run("endpoint", "list"); r.code != 255 {
		t.Fatalf("a key not yet added logged in:\n%s", r)
	}
	p.do("add a key", chromedp.Click(chromedp.CSS(`.heading button.primary`)))
	p.dialogSubmit("add a key", "key", string(pub))
	p.waitText(`.keys td`, "SHA256:")
	p.shot("account")
	alice.ok("endpoint", "list")
	p.do("remove the key", chromedp.Click(chromedp.CSS(`.keys button.danger`)))
	p.dialogSubmit("confirm")
	p.waitText(`.keys`, "No SSH keys yet")
	if r := alice.run("endpoint", "list"); r.code != 255 {
		t.Fatalf("a removed key logged in:\n%s", r)
	}
}
