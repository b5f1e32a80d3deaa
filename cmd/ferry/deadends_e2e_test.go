package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
)

// TestCLIServiceUnreachable: every command that calls the API, logged in
// or not, says in one line that the service cannot be reached and what to
// start, not the Go error of the dial.
func TestCLIServiceUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	s := &service{t: t, url: url, home: t.TempDir()}
	want := `ferry: cannot reach the ferry service at ` + url + `: is "ferry server" running?` + "\n"
	for _, args := range [][]string{
		{"login", "--url", url, "--username", "alice"},
		{"endpoint", "search", "x", "--url", url, "--token", "t"},
		{"endpoint", "list", "--url", url, "--token", "t"},
		{"task", "list", "--url", url, "--token", "t"},
		{"ls", "ep:/", "--url", url, "--token", "t"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			r := s.ferry("pw\n", args...)
			if r.code != exitFailure || r.stderr != want {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", r.code, r.stderr, exitFailure, want)
			}
		})
	}
}

// TestCLIRmSummary: ferry rm tells what it deleted (how many files
// and directories, the path given among them), not what a transfer would
// (files transferred, a rate), says why it failed once, and
// ferry task resume on the failed delete names the command that does
// the job again.
func TestCLIRmSummary(t *testing.T) {
	t.Parallel()
	s := startService(t, true)
	root, url := gridEndpoint(t)
	for i := range 100 {
		writeFile(t, filepath.Join(root, "d", fmt.Sprintf("%03d", i)), "x")
	}
	roRoot, roURL := readOnlyEndpoint(t)
	writeFile(t, filepath.Join(roRoot, "a.txt"), "a")
	s.login()
	s.ok("", "endpoint", "add", "epA", "--server", url)
	s.ok("", "endpoint", "add", "ro", "--server", roURL)

	out := s.ok("", "rm", "-r", "epA:/d")
	if !strings.Contains(out, "SUCCEEDED: 1 path: 100 files and 1 directory deleted, 0 missing, 0 failed") || strings.Contains(out, "transferred") || strings.Contains(out, "/s") {
		t.Errorf("ferry rm -r: %q; want the files and directories deleted, no transfer counts or rate", out)
	}
	show := s.ok("", "task", "show", strings.Fields(out)[1])
	for _, want := range []string{`Paths:\s+1\n`, `Paths Deleted:\s+1\n`, `Files Deleted:\s+100\n`, `Directories Deleted:\s+1\n`} {
		if !regexp.MustCompile(want).MatchString(show) {
			t.Errorf("ferry task show: want %s in\n%s", want, show)
		}
	}
	if list := s.ok("", "task", "list", strings.Fields(out)[1]); !regexp.MustCompile(`DELETE\s+\S+\s+-\s+1/1\s`).MatchString(list) {
		t.Errorf("ferry task list: want the paths done of the paths, 1/1, in\n%s", list)
	}
	if _, err := os.Stat(filepath.Join(root, "d")); !os.IsNotExist(err) {
		t.Errorf("ferry rm -r left %s/d: %v", root, err)
	}

	r := s.ferry("", "rm", "ro:/a.txt")
	if r.code != exitFailure || strings.Contains(r.stdout, "/s") || strings.Count(r.stdout+r.stderr, "permission denied") != 1 {
		t.Fatalf("ferry rm on a read-only server: %+v; want exit 1 and why once", r)
	}
	id := strings.Fields(r.stdout)[1]
	s.fails(exitFailure, "there is nothing to resume; to finish the job, run: ferry rm ", "task", "resume", id)
}

// TestCLICopyLines: ferry copy -v of a small file says how it was done
// (the settings line, no "chunks 0 B" when nothing went in chunks), then
// the summary last.
func TestCLICopyLines(t *testing.T) {
	t.Parallel()
	s := &service{t: t, home: t.TempDir()}
	root, url := gridEndpoint(t)
	src := filepath.Join(t.TempDir(), "a.txt")
	writeFile(t, src, "a")
	r := s.ferry("", "copy", "-v", src, url+"/a.txt")
	if r.code != 0 {
		t.Fatalf("ferry copy: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(root, "a.txt")); err != nil {
		t.Fatal(err)
	}
	out := r.stdout + r.stderr
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "1 file: 1 transferred") {
		t.Errorf("the last line is %q, not the summary:\n%s", last, out)
	}
	if strings.Contains(out, "chunks 0 B") || !strings.Contains(out, "no chunks") {
		t.Errorf("the settings say chunks of 0 B, not that there were none:\n%s", out)
	}
}

// TestCLICopyNotEveryDestination: ferry copy of one file to two
// destinations, one of which refuses it, says so in the singular.
func TestCLICopyNotEveryDestination(t *testing.T) {
	t.Parallel()
	s := &service{t: t, home: t.TempDir()}
	_, url := gridEndpoint(t)
	_, roURL := readOnlyEndpoint(t)
	src := filepath.Join(t.TempDir(), "a.txt")
	writeFile(t, src, "a")
	r := s.ferry("", "copy", src, url+"/a.txt", roURL+"/a.txt")
	if r.code != exitFailure || !strings.Contains(r.stderr, "1 of 1 file did not reach every destination") {
		t.Errorf("ferry copy to a read-only destination: %+v; want exit 1 and 1 of 1 file", r)
	}
}

// TestCLIWording: what mkdir, endpoint show and ls -l print reads as
// sentences and values: "created directory /newdir", "no limit" for an
// endpoint without a limit on its tasks, no owner and group columns of
// "-" when the server names none, and times in the one format
// (UTC RFC 3339) the service's own messages use.
func TestCLIWording(t *testing.T) {
	t.Parallel()
	s := startService(t, false)
	root, url := gridEndpoint(t)
	writeFile(t, filepath.Join(root, "a.txt"), "a")
	s.login()
	s.ok("", "endpoint", "add", "epA", "--server", url)

	if out := s.ok("", "mkdir", "epA:/newdir"); out != "created directory /newdir\n" {
		t.Errorf("mkdir: %q", out)
	}
	show := s.ok("", "endpoint", "show", "epA")
	if !regexp.MustCompile(`(?m)^Max Concurrent Tasks:\s+no limit$`).MatchString(show) {
		t.Errorf("endpoint show says no limit otherwise:\n%s", show)
	}
	rfc3339 := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	if !regexp.MustCompile(`(?m)^Created:\s+` + rfc3339.String() + `$`).MatchString(show) {
		t.Errorf("endpoint show's Created is not UTC RFC 3339:\n%s", show)
	}
	ls := s.ok("", "ls", "-l", "epA:/")
	for _, l := range strings.Split(strings.TrimSpace(ls), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 || !rfc3339.MatchString(f[2]) {
			t.Errorf("ls -l line %q: want mode, size, time (UTC RFC 3339) and name", l)
		}
	}
}

// TestCLIAnonymousRefused: an endpoint whose server wants a password is
// not added as anonymous: endpoint add asks the server and names --auth
// password; an anonymous endpoint whose server refuses anonymous logins
// (changed after it was added) is told apart from a lapsed activation by
// ls and endpoint activate, which name the update and the activation
// that mend it.
func TestCLIAnonymousRefused(t *testing.T) {
	t.Parallel()
	s := startService(t, false)
	_, fs := servertest.Root(t)
	url := "ftp://" + servertest.Serve(t, &server.Server{FS: fs, Auth: servertest.Users{"bob": "pw"}})
	s.login()

	s.fails(exitFailure, "refused the anonymous login: add it with --auth password", "endpoint", "add", "pw", "--server", url)
	if out := s.ok("", "endpoint", "list"); strings.Contains(out, "pw") {
		t.Fatalf("a refused endpoint add left an endpoint:\n%s", out)
	}
	s.ok("", "endpoint", "add", "pw", "--server", url, "--auth", "password")
	s.ok("", "endpoint", "update", "pw", "--auth", "anonymous")
	mend := "ferry endpoint update alice#pw --auth password, then ferry endpoint activate alice#pw"
	s.fails(exitFailure, mend, "ls", "pw:/")
	s.fails(exitFailure, mend, "endpoint", "activate", "pw")
}

// TestCLICopyAnonymousRefused: ferry copy to a server that wants a user,
// with none in its URL, says that it tried anonymous and how to give one.
func TestCLICopyAnonymousRefused(t *testing.T) {
	t.Parallel()
	s := &service{t: t, home: t.TempDir()}
	_, fs := servertest.Root(t)
	addr := servertest.Serve(t, &server.Server{FS: fs, Auth: servertest.Users{"bob": "pw"}})
	src := filepath.Join(t.TempDir(), "a.txt")
	writeFile(t, src, "a")
	r := s.ferry("", "copy", src, "ftp://"+addr+"/a.txt")
	want := "(logged in as anonymous: the URL names no user; give one as ftp://USER:PASSWORD@" + addr + "/PATH)"
	if r.code != exitFailure || !strings.Contains(r.stderr, want) {
		t.Fatalf("exit %d, stderr %q; want exit 1 and %q", r.code, r.stderr, want)
	}
}

// TestCLISymlinkNotFollowed: a destination directory that is a symbolic
// link the server does not follow (it leads out of its root) is told as
// one, not as a file.
func TestCLISymlinkNotFollowed(t *testing.T) {
	t.Parallel()
	s := startService(t, false)
	root, url := gridEndpoint(t)
	writeFile(t, filepath.Join(root, "a.txt"), "a")
	if err := os.Symlink(t.TempDir(), filepath.Join(root, "out")); err != nil { // leads out of the root
		t.Fatal(err)
	}
	s.login()
	s.ok("", "endpoint", "add", "epA", "--server", url)
	s.fails(exitFailure, "destination /out on alice#epA: is a symbolic link that ferry does not follow; a directory is needed there",
		"transfer", "epA:/a.txt", "epA:/out/b.txt")
}

// TestCLIRmRefusedAtOnce: ferry rm of a path that is not there, or of a
// directory without -r, is refused when submitted, as a transfer is, not
// made a task that fails later.
func TestCLIRmRefusedAtOnce(t *testing.T) {
	t.Parallel()
	s := startService(t, false) // no worker: a task made would never run
	root, url := gridEndpoint(t)
	writeFile(t, filepath.Join(root, "d", "a.txt"), "a")
	s.login()
	s.ok("", "endpoint", "add", "epA", "--server", url)
	s.fails(exitFailure, "delete /nothere on alice#epA: no such file or directory", "rm", "--no-wait", "epA:/nothere")
	s.fails(exitFailure, "delete /d on alice#epA: is a directory: delete it with -r", "rm", "--no-wait", "epA:/d")
	s.ok("", "rm", "--no-wait", "--ignore-missing", "epA:/nothere") // no error: the task is made
	if out := s.ok("", "task", "list", "-F", "unix"); strings.Count(out, "DELETE") != 1 {
		t.Fatalf("want the one task of --ignore-missing:\n%s", out)
	}
}
