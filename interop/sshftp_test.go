//go:build interop

package interop

// sshftp:// with a real OpenSSH server on loopback: globus-url-copy to
// `ferry gridftp --stdio`, `ferry copy` to GCT's `globus-gridftp-server
// -ssh`, and ferry to ferry, two-party and third-party.
//
// The ssh server runs as the current user and lets in one test key; the
// remote command runs as that user, with its real home directory, which
// the tests leave alone: the command is named by the client
// ($FERRY_REMOTE_SSHFTP for ferry copy, $GLOBUS_REMOTE_SSHFTP for
// globus-url-copy). Debian's gridftp-ssh runs plain /usr/bin/ssh, which
// reads the passwd home's ~/.ssh/config whatever $HOME says; it splits
// $GLOBUS_REMOTE_SSHFTP at spaces after the host, and ssh takes options
// there too, so "-F CONFIG COMMAND" points it at the test's configuration.

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sshBed is an sshd on 127.0.0.1 that lets the current user in with a
// test key, and the client configurations that reach it.
type sshBed struct {
	port      int
	config    string // ssh -F file with the key sshd knows
	badConfig string // ... and with one it does not
}

// startSSHD starts sshd -D on a free loopback port and stops it at cleanup.
func startSSHD(t *testing.T) *sshBed {
	t.Helper()
	needTools(t, "sshd", "ssh", "ssh-keygen")
	needFerry(t)
	sshd, _ := toolPath("sshd") // sshd re-executes itself: an absolute path
	dir := t.TempDir()
	for _, k := range []string{"host_key", "user_key", "bad_key"} {
		mustRun(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ferry-test", "-f", filepath.Join(dir, k))
	}
	pub, err := os.ReadFile(filepath.Join(dir, "user_key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	gsiWriteFile(t, filepath.Join(dir, "authorized_keys"), string(pub), 0o600)
	if os.Geteuid() == 0 {
		// sshd run by root separates privileges into this directory,
		// which the openssh-server package's service makes at boot.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b := &sshBed{port: freePort(t), config: filepath.Join(dir, "ssh_config"), badConfig: filepath.Join(dir, "bad_config")}
	gsiWriteFile(t, filepath.Join(dir, "sshd_config"), strings.Join([]string{
		"ListenAddress 127.0.0.1:" + strconv.Itoa(b.port),
		"HostKey " + filepath.Join(dir, "host_key"),
		"AuthorizedKeysFile " + filepath.Join(dir, "authorized_keys"),
		"PidFile none",
		"UsePAM no",
		"StrictModes no",
		"PermitRootLogin prohibit-password",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"MaxStartups 100", // every engine session is an ssh login
		"LogLevel VERBOSE",
	}, "\n")+"\n", 0o600)
	for file, key := range map[string]string{b.config: "user_key", b.badConfig: "bad_key"} {
		gsiWriteFile(t, file, strings.Join([]string{
			"Host *",
			"  IdentityFile " + filepath.Join(dir, key),
			"  IdentitiesOnly yes",
			"  UserKnownHostsFile /dev/null",
			"  GlobalKnownHostsFile /dev/null",
			"  StrictHostKeyChecking no",
			"  LogLevel ERROR",
		}, "\n")+"\n", 0o600)
	}
	out := &logBuffer{}
	p, err := startProc(sshd, []string{"-D", "-e", "-f", filepath.Join(dir, "sshd_config")}, out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.wait(5 * time.Second)
		if t.Failed() {
			t.Logf("sshd:\n%s", out)
		}
	})
	if err := waitSSHBanner(p, b.addr(), 15*time.Second); err != nil {
		t.Fatalf("sshd: %v\n%s", err, out)
	}
	return b
}

// waitSSHBanner waits until addr answers with an SSH version line.
func waitSSHBanner(p *proc, addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if p.exited() {
			return p.err
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.SetDeadline(time.Now().Add(2 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "SSH-") {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return os.ErrDeadlineExceeded
}

func (b *sshBed) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

// url is the sshftp:// URL of an absolute path as the remote serves it.
func (b *sshBed) url(p string) string { return "sshftp://" + b.addr() + escapePath(p) }

// ferryEnv is ferry copy's environment: ssh with config, running remote.
func (b *sshBed) ferryEnv(config, remote string) []string {
	return withEnv(os.Environ(), []string{"FERRY_SSH_COMMAND=ssh -F " + config, "FERRY_REMOTE_SSHFTP=" + remote})
}

// guc runs globus-url-copy through Debian's gridftp-ssh, which runs
// remote, with env's changes to the environment (withEnv).
func (b *sshBed) guc(t *testing.T, env []string, remote string, args ...string) {
	t.Helper()
	env = append(env, "GLOBUS_REMOTE_SSHFTP=-F "+b.config+" "+remote)
	out, err := runToolEnv(t.Context(), cmdTimeout, env, "", "globus-url-copy", args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("globus-url-copy %s:\n%s", strings.Join(args, " "), out)
}

// ferryRemote is the remote command of `ferry gridftp --stdio` serving root.
func ferryRemote(root string) string {
	return ferryBin + " gridftp --stdio --root " + root + " --log-level debug"
}

// gctRemote is the remote command of GCT's server in ssh mode, logging to
// a file of the test's.
func gctRemote(t *testing.T) string {
	bin, err := toolPath("globus-gridftp-server")
	if err != nil {
		t.Fatal(err)
	}
	cmd := bin + " -ssh -data-interface 127.0.0.1 -d ERROR -l " + filepath.Join(t.TempDir(), "gridftp.log")
	if os.Geteuid() == 0 {
		cmd += " -anonymous-user nobody" // it refuses to serve as root
	}
	return cmd
}

// sshCopy runs ferry copy with env and fails the test unless it exits 0.
func sshCopy(t *testing.T, env []string, args ...string) cliRun {
	t.Helper()
	r := runFerryCLI(t, 90*time.Second, env, "", append([]string{"copy"}, args...)...)
	if r.code != 0 {
		t.Fatalf("ferry copy failed:\n%s", r)
	}
	t.Logf("%s", r)
	return r
}

func TestSSHFTPGucToFerry(t *testing.T) {
	b := startSSHD(t)
	root, local := t.TempDir(), t.TempDir()
	remote := ferryRemote(root)
	for _, tc := range []struct {
		name  string
		flags []string
		gsi   bool // -data-cred auto needs the user's grid proxy
	}{
		{"stream", nil, false},
		{"parallel", []string{"-p", "4"}, false},
		// DCSC P, DCAU A, PROT P: guc hands ferry a credential. In stream
		// mode globus-url-copy connects both ways: from ferry to it, its
		// OpenSSL would not present the MD5-signed credential it makes to
		// Go's TLS (see TestGSIDCSCTwoCAs).
		{"encrypted", []string{"-data-cred", "auto", "-dcpriv"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var env []string
			if tc.gsi {
				needGSITools(t)
				u := newGSIUser(t, "sshftp", "alice")
				env = gsiEnv("X509_USER_PROXY="+u.Proxy, "X509_CERT_DIR="+u.CA.Dir)
			}
			src := filepath.Join(local, tc.name+".src")
			writeRandomFile(t, src, 3<<20+17)
			b.guc(t, env, remote, append(tc.flags, fileURL(src), b.url("/"+tc.name+".up"))...)
			same(t, "put", src, filepath.Join(root, tc.name+".up"))
			got := filepath.Join(local, tc.name+".got")
			b.guc(t, env, remote, append(tc.flags, b.url("/"+tc.name+".up"), fileURL(got))...)
			same(t, "get", src, got)
		})
	}
}

func TestSSHFTPFerryToGCT(t *testing.T) {
	b := startSSHD(t)
	env := b.ferryEnv(b.config, gctRemote(t))
	root, local := gctRoot(t, "ferry-interop-sshftp-"), t.TempDir()
	src := filepath.Join(local, "src")
	writeRandomFile(t, src, 5<<20+3)
	sshCopy(t, env, src, b.url(root+"/up"))
	same(t, "put", src, filepath.Join(root, "up"))
	sshCopy(t, env, "-p", "4", b.url(root+"/up"), filepath.Join(local, "got"))
	same(t, "get", src, filepath.Join(local, "got"))
}

func TestSSHFTPFerryToFerry(t *testing.T) {
	b := startSSHD(t)
	root, local := t.TempDir(), t.TempDir()
	env := b.ferryEnv(b.config, ferryRemote(root))
	tree := filepath.Join(local, "tree")
	for i, size := range []int64{0, 1, 4 << 10, 3 << 20, 9<<20 + 5} {
		writeRandomFile(t, filepath.Join(tree, "d"+strconv.Itoa(i%2), "f"+strconv.Itoa(i)), size)
	}
	t.Run("put", func(t *testing.T) {
		r := sshCopy(t, env, "-r", "--cc", "3", "--verify-checksum", tree, b.url("/a/"))
		checkSummary(t, r, 5, 5, 0)
		sameFiles(t, tree, filepath.Join(root, "a", "tree"), 5)
	})
	t.Run("get", func(t *testing.T) {
		sshCopy(t, env, "-r", b.url("/a/tree"), filepath.Join(local, "back")+"/")
		sameFiles(t, tree, filepath.Join(local, "back", "tree"), 5)
	})
	t.Run("third party", func(t *testing.T) {
		r := sshCopy(t, env, "-r", "--encrypt", b.url("/a/tree"), b.url("/b/"))
		if s := settingsLine(r); !strings.Contains(s, "encrypted") {
			t.Errorf("data channels not encrypted between two ferry servers: %s", s)
		}
		sameFiles(t, tree, filepath.Join(root, "b", "tree"), 5)
	})
	t.Run("to and from ftp", func(t *testing.T) {
		ftp := startFerry(t)
		sshCopy(t, env, "-r", b.url("/a/tree"), ftp.URL("in/"))
		sameFiles(t, tree, ftp.Path("in/tree"), 5)
		sshCopy(t, env, "-r", ftp.URL("in/tree"), b.url("/c/"))
		sameFiles(t, tree, filepath.Join(root, "c", "tree"), 5)
	})
}

func TestSSHFTPBadKey(t *testing.T) {
	b := startSSHD(t)
	root, local := t.TempDir(), t.TempDir()
	writeRandomFile(t, filepath.Join(root, "f"), 10)
	r := runFerryCLI(t, 90*time.Second, b.ferryEnv(b.badConfig, ferryRemote(root)), "",
		"copy", b.url("/f"), filepath.Join(local, "f"))
	t.Logf("%s", r)
	if r.code == 0 || !strings.Contains(r.stderr, "Permission denied (publickey)") {
		t.Fatalf("a key sshd does not know: want a failure that says so\n%s", r)
	}
}
