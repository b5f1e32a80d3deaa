package server_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/gridftp/server"
	"ferry/stack"
	"ferry/stack/popen"
)

// The attacks of security round 3 on popen, each through a real server on
// 127.0.0.1 and the real programs: what the example whitelist of docs/gridftp.md
// (tar and md5sum) let a client do beyond moving the session's own files.

// passwords is an Authenticator of one user, alice, password "pw".
type passwords struct{}

func (passwords) Check(user, pass string) bool { return user == "alice" && pass == "pw" }

// secret is what the file outside the root holds.
const secret = "the-secret-outside-the-root"

// popenEnv starts a server that offers the programs to sessions that log
// in as alice (and anonymously, read-write), over a root that the user
// programs run as can reach, with pub/file.txt inside, outside/secret.txt
// beside it, and the symlinks link (relative) and abslink (absolute) in
// the root, both to outside.
func popenEnv(t *testing.T, programs []popen.Program, configure ...func(*server.Server)) *testEnv {
	t.Helper()
	env := startServer(t, append([]func(*server.Server){func(s *server.Server) {
		s.Auth = passwords{}
		s.Layers = stack.Kinds()
		s.Layers[popen.Name] = popen.Kind(popen.Config{Programs: programs})
	}}, configure...)...)
	openUp(t, env.root, env.outside)
	env.file("pub/file.txt", []byte("public data\n"))
	env.file("pub/list", []byte(env.outside+"/secret.txt\n"))
	if err := os.WriteFile(filepath.Join(env.outside, "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"link": "../outside", "abslink": env.outside} {
		if err := os.Symlink(target, filepath.Join(env.root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return env
}

// openUp lets any user reach dirs, and write them, as a served tree must
// be reachable by the unprivileged user programs run as: the temp dirs
// above them are 0700.
func openUp(t *testing.T, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		for d := filepath.Dir(dir); strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// loginAlice logs in with a password.
func (e *testEnv) loginAlice() *ctl {
	e.t.Helper()
	c := e.dial()
	c.expect("USER alice", 331)
	c.expect("PASS pw", 230)
	return c
}

// retr sets the stack and retrieves through it: the stack's reply, the
// transfer's final reply ("" when the stack was refused) and the data.
func retr(c *ctl, spec string) (set, final string, data []byte) {
	c.t.Helper()
	c.send("SITE SETDISKSTACK " + spec)
	if r := c.read(); r.Code != 250 {
		return r.String(), "", nil
	}
	dc := dialData(c.t, c.pasv())
	got := readAllAsync(dc)
	c.send("RETR /pub")
	_, last := c.final()
	data = <-got
	c.expect("SITE SETDISKSTACK default", 250)
	return "250", last.String(), data
}

// stor sets the stack and stores data through it.
func stor(c *ctl, spec string, data []byte) (set, final string) {
	c.t.Helper()
	c.send("SITE SETDISKSTACK " + spec)
	if r := c.read(); r.Code != 250 {
		return r.String(), ""
	}
	dc := dialData(c.t, c.pasv())
	c.send("STOR /pub/x")
	if r := c.read(); r.Code != 150 {
		return "250", r.String()
	}
	dc.Write(data)
	dc.Close()
	_, last := c.final()
	c.expect("SITE SETDISKSTACK default", 250)
	return "250", last.String()
}

// tarOf is a tar archive of one member, name: a file holding data, or
// for names "evil*" a symlink to data and "hard*" a hard link to it.
func tarOf(t *testing.T, name, data string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}
	switch {
	case strings.HasPrefix(name, "evil") && !strings.Contains(name, "/"):
		h = &tar.Header{Name: name, Mode: 0o777, Linkname: data, Typeflag: tar.TypeSymlink}
	case strings.HasPrefix(name, "hard"):
		h = &tar.Header{Name: name, Mode: 0o644, Linkname: data, Typeflag: tar.TypeLink}
	}
	if err := w.WriteHeader(h); err != nil {
		t.Fatal(err)
	}
	if h.Typeflag == tar.TypeReg {
		w.Write([]byte(data))
	}
	w.Close()
	return b.Bytes()
}

// gzipped is b compressed with gzip.
func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	z := gzip.NewWriter(&out)
	z.Write(b)
	z.Close()
	return out.Bytes()
}

// TestPopenAttacks: a session that may use popen runs tar and md5sum only
// as they move its own files. Each attack is checked by its effect (a
// program it ran, a file outside the root read or written), whatever the
// server replied.
func TestPopenAttacks(t *testing.T) {
	for _, tool := range []string{"/bin/tar", "/usr/bin/md5sum"} {
		if _, err := os.Stat(tool); err != nil {
			t.Skipf("%s: %v", tool, err)
		}
	}
	env := popenEnv(t, []popen.Program{{Alias: "tar", Path: "/bin/tar"}, {Path: "/usr/bin/md5sum"}})
	openUp(t, filepath.Join(env.root, "pub"))
	c := env.loginAlice()
	marker := filepath.Join(env.outside, "ran")
	sum := md5.Sum([]byte(secret))
	leaks := func(data []byte) bool {
		return bytes.Contains(data, []byte(secret)) || bytes.Contains(data, []byte(hex.EncodeToString(sum[:])))
	}
	for _, tt := range []struct {
		name string
		spec string
	}{
		{"checkpoint-action exec", "popen:argv=#tar#cf#/dev/null#--checkpoint=1#--checkpoint-action%3Dexec%3Dtouch " + marker + "#pub"},
		{"checkpoint-action exec, separate value", "popen:argv=#tar#cf#/dev/null#--checkpoint=1#--checkpoint-action#exec=touch " + marker + "#pub"},
		{"-I", "popen:argv=#tar#-c#-f#-#-I#touch " + marker + "#pub"},
		{"-I bundled", "popen:argv=#tar#cIf#touch " + marker + "#-#pub"},
		{"--use-compress-program", "popen:argv=#tar#cf#-#--use-compress-program=touch " + marker + "#pub"},
		{"--use-compress-program abbreviated", "popen:argv=#tar#cf#-#--use-compress=touch " + marker + "#pub"},
		{"absolute member", "popen:argv=#tar#cf#-#" + env.outside + "/secret.txt"},
		{"dot-dot member", "popen:argv=#tar#cf#-#../outside/secret.txt"},
		{"member through a symlink", "popen:argv=#tar#cf#-#link/secret.txt"},
		{"member through an absolute symlink", "popen:argv=#tar#cf#-#abslink/secret.txt"},
		{"-C outside", "popen:argv=#tar#cf#-#-C#" + env.outside + "#secret.txt"},
		{"-C dot-dot", "popen:argv=#tar#cf#-#-C#..#outside/secret.txt"},
		{"-C symlink", "popen:argv=#tar#cf#-#-C#link#secret.txt"},
		{"-C twice", "popen:argv=#tar#cf#-#-C#pub#-C#../link#secret.txt"},
		{"-h dereference", "popen:argv=#tar#chf#-#link"},
		{"files from", "popen:argv=#tar#cf#-#-T#pub/list"},
		{"md5sum absolute", "popen:argv=#/usr/bin/md5sum#" + env.outside + "/secret.txt"},
		{"md5sum dot-dot", "popen:argv=#/usr/bin/md5sum#../outside/secret.txt"},
		{"md5sum symlink", "popen:argv=#/usr/bin/md5sum#link/secret.txt"},
		{"md5sum after --", "popen:argv=#/usr/bin/md5sum#--#abslink/secret.txt"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			set, final, data := retr(c, tt.spec)
			if _, err := os.Stat(marker); err == nil {
				os.Remove(marker)
				t.Errorf("the client's command ran (stack %s, transfer %s)", set, final)
			}
			if leaks(data) {
				t.Errorf("the file outside the root reached the client (stack %s, transfer %s)", set, final)
			}
		})
	}

	for _, tt := range []struct {
		name, spec string
		archive    []byte
	}{
		{"extract a symlink out", "popen:argv=#tar#xf#-#-C#pub", tarOf(t, "evil", env.outside)},
		{"extract through it", "popen:argv=#tar#xf#-#-C#pub", tarOf(t, "evil/planted", "x")},
		{"extract a relative symlink out", "popen:argv=#tar#xf#-#-C#pub", tarOf(t, "evil2", "../../outside")},
		{"extract through that", "popen:argv=#tar#xf#-#-C#pub", tarOf(t, "evil2/planted", "x")},
		{"extract a symlink out, gzip", "popen:argv=#tar#xzf#-#-C#pub", gzipped(t, tarOf(t, "evil3", env.outside))},
		{"extract through that, gzip", "popen:argv=#tar#xzf#-#-C#pub", gzipped(t, tarOf(t, "evil3/planted", "x"))},
		{"extract a hard link out", "popen:argv=#tar#xf#-#-C#pub", tarOf(t, "hard", "../../outside/secret.txt")},
		{"extract -C outside", "popen:argv=#tar#xf#-#-C#" + env.outside, tarOf(t, "planted", "x")},
		{"extract -C dot-dot", "popen:argv=#tar#xf#-#-C#../outside", tarOf(t, "planted", "x")},
		{"extract -C symlink", "popen:argv=#tar#xf#-#-C#link", tarOf(t, "planted", "x")},
		{"extract --to-command", "popen:argv=#tar#xf#-#--to-command=touch " + marker, tarOf(t, "planted", "x")},
		{"extract -P", "popen:argv=#tar#xPf#-", tarOf(t, env.outside+"/planted", "x")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			set, final := stor(c, tt.spec, tt.archive)
			if entries, _ := os.ReadDir(env.outside); len(entries) != 1 {
				for _, e := range entries {
					if e.Name() != "secret.txt" {
						os.RemoveAll(filepath.Join(env.outside, e.Name()))
					}
				}
				t.Errorf("the program wrote outside the root: %v (stack %s, transfer %s)", entries, set, final)
			}
		})
	}
}

// TestPopenAnonymous: anonymous sessions, read-only or not, run no
// programs.
func TestPopenAnonymous(t *testing.T) {
	for _, write := range []bool{true, false} {
		t.Run(fmt.Sprintf("write=%v", write), func(t *testing.T) {
			env := popenEnv(t, []popen.Program{{Alias: "tar", Path: "/bin/tar"}}, func(s *server.Server) { s.AnonymousWrite = write })
			c := env.login()
			c.send("SITE SETDISKSTACK popen:argv=#tar#cf#-#pub")
			if r := c.read(); r.Code != 500 {
				t.Fatalf("popen in an anonymous session: %q", r.String())
			}
		})
	}
}

// TestPopenUnprivileged: a server running as root runs programs as an
// unprivileged user, never as root.
func TestPopenUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the server is not root")
	}
	env := popenEnv(t, []popen.Program{{Path: "/usr/bin/id"}})
	c := env.loginAlice()
	set, final, data := retr(c, "popen:argv=#/usr/bin/id")
	if !strings.HasPrefix(final, "226") {
		t.Fatalf("id: stack %s, transfer %s", set, final)
	}
	if out := string(data); !strings.HasPrefix(out, "uid=65534(") || strings.Contains(out, "(root)") {
		t.Fatalf("the program ran as %q, want nobody", out)
	}
}

// TestPopenTreeDies: a program's children die with its transfer, also one
// that left its process group and session (setsid), when the program
// ended by itself and when the transfer was aborted.
func TestPopenTreeDies(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip(err)
	}
	for i, tt := range []struct {
		name  string
		after string // what the wrapper does once its child runs
		abort bool
	}{
		{"program ends", "echo started; while [ ! -e go ]; do sleep 0.1; done", false},
		{"transfer aborted", "echo started; exec sleep 1000", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tag := fmt.Sprintf("1000.%d%d", os.Getpid(), i)
			wrapper := filepath.Join(t.TempDir(), "wrapper")
			script := "#!/bin/sh\nsetsid sleep " + tag + " </dev/null >/dev/null 2>&1 &\n" + tt.after + "\n"
			if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			openUp(t, filepath.Dir(wrapper))
			env := popenEnv(t, []popen.Program{{Alias: "wrapper", Path: wrapper}})
			c := env.loginAlice()
			c.expect("SITE SETDISKSTACK popen:argv=#wrapper", 250)
			dc := dialData(t, c.pasv())
			defer dc.Close()
			got := readAllAsync(dc)
			c.send("RETR /x")
			if r := c.read(); r.Code != 150 {
				t.Fatalf("RETR: %q", r.String())
			}
			waitProcess(t, tag)
			env.file("go", nil) // the wrapper may end
			if tt.abort {
				c.send("ABOR")
				c.final()
				c.read()
			} else if _, final := c.final(); final.Code != 226 {
				t.Fatalf("RETR: %q", final.String())
			}
			dc.Close()
			<-got
			processesGone(t, tag)
		})
	}
}

// waitProcess waits until a process runs "sleep tag".
func waitProcess(t *testing.T, tag string) {
	t.Helper()
	for range 1000 {
		if processes(tag) > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("sleep %s did not start", tag)
}

// processesGone fails unless every "sleep tag" is gone within 10 s.
func processesGone(t *testing.T, tag string) {
	t.Helper()
	for i := 0; processes(tag) > 0; i++ {
		if i == 1000 {
			t.Fatalf("the program's child (sleep %s) outlived its transfer", tag)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processes counts the live processes running "sleep tag".
func processes(tag string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), "sleep\x00"+tag+"\x00") {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !isZombie(st) {
				n++
			}
		}
	}
	return n
}

// isZombie reads a /proc/PID/stat: pid (comm) state ...
func isZombie(stat []byte) bool {
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

// TestPopenAllowed: what the grid does with tar and md5sum works, paths
// named from the root or relative to it (where programs run).
func TestPopenAllowed(t *testing.T) {
	for _, tool := range []string{"/bin/tar", "/usr/bin/md5sum"} {
		if _, err := os.Stat(tool); err != nil {
			t.Skipf("%s: %v", tool, err)
		}
	}
	env := popenEnv(t, []popen.Program{{Alias: "tar", Path: "/bin/tar"}, {Alias: "md5sum", Path: "/usr/bin/md5sum"}})
	openUp(t, filepath.Join(env.root, "pub"))
	c := env.loginAlice()
	sum := md5.Sum([]byte("public data\n"))
	hexSum := hex.EncodeToString(sum[:])
	for _, tt := range []struct {
		spec string
		want string // in the data
	}{
		{"popen:argv=#tar#cf#-#-C#/pub#file.txt", "public data"},
		{"popen:argv=#tar#-cvf#-#pub/file.txt", "public data"},
		{"popen:argv=#tar#--create#--file=-#--directory#pub#./file.txt", "public data"},
		{"popen:argv=#md5sum#pub/file.txt", hexSum + "  pub/file.txt"},
		{"popen:argv=#md5sum#--#/pub/file.txt", hexSum + "  " + env.root + "/pub/file.txt"},
	} {
		set, final, data := retr(c, tt.spec)
		if !strings.HasPrefix(final, "226") || !strings.Contains(string(data), tt.want) {
			t.Errorf("%s: stack %s, transfer %s, data %q", tt.spec, set, final, data)
		}
	}
	for _, spec := range []string{"popen:argv=#tar#xf#-#-C#/pub,ordering", "popen:argv=#tar#-x#-C#pub#-f#-"} {
		set, final := stor(c, spec, tarOf(t, "planted", "inside"))
		if !strings.HasPrefix(final, "226") || string(env.content("pub/planted")) != "inside" {
			t.Errorf("%s: stack %s, transfer %s", spec, set, final)
		}
		os.Remove(filepath.Join(env.root, "pub", "planted"))
	}
}
