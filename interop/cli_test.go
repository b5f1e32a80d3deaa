//go:build interop

package interop

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"ferry/service/api"
	"ferry/service/domain"
)

// TestCLIWhoami runs ferry whoami logged in (text and -F json) and after
// ferry logout: "not logged in", exit status 4.
func TestCLIWhoami(t *testing.T) {
	svc := startService(t, serviceConfig{})
	c := newServiceUser(t, svc, "")
	if out := c.ok("", "whoami"); out != "alice at "+svc.URL()+"\n" {
		t.Errorf("ferry whoami printed %q", out)
	}
	var doc struct{ Username, URL, Kind string }
	c.decode(&doc, "whoami")
	if doc.Username != "alice" || doc.URL != svc.URL() || doc.Kind != "api" {
		t.Errorf("ferry whoami -F json: %+v", doc)
	}
	c.ok("", "logout")
	if r := c.run("", "whoami"); r.code != 4 || !strings.Contains(r.stderr, "not logged in") {
		t.Errorf("whoami after logout: want exit 4, not logged in:\n%s", r)
	}
}

// newTreeUser starts a service and logs alice in to it, with endpoints
// src, whose /tree holds n files, and dst, each a ferry gridftp server.
func newTreeUser(t *testing.T, n int) *serviceCLI {
	t.Helper()
	root := t.TempDir()
	makeServiceTree(t, filepath.Join(root, "tree"), n, 0)
	src := startFerryConfig(t, ferryConfig{Root: root, Anonymous: true})
	c := newServiceUser(t, startService(t, serviceConfig{}), "")
	c.addEndpoint("src", src)
	c.addEndpoint("dst", startFerry(t))
	return c
}

// TestCLITaskShowChecksum runs two transfers between ferry gridftp
// servers: ferry task show names the checksum algorithm the endpoints
// chose, the one the files were verified with, and the one asked for.
func TestCLITaskShowChecksum(t *testing.T) {
	c := newTreeUser(t, 3)
	id := c.transfer("src:/tree", "dst:/a", "-r", "--verify-checksum")
	c.succeeded(id, time.Minute)
	var alg string
	for _, f := range c.recorded(id) {
		alg = f.ChecksumAlgorithm
	}
	if out := c.ok("", "task", "show", id); alg == "" || !regexp.MustCompile(`(?m)^Checksum Algorithm:\s+`+alg+` \(the fastest both endpoints offer\)$`).MatchString(out) {
		t.Errorf("files verified with %q; ferry task show:\n%s", alg, out)
	}

	id = c.transfer("src:/tree", "dst:/b", "-r", "--verify-checksum", "--checksum-algorithm", "SHA1")
	c.succeeded(id, time.Minute)
	if out := c.ok("", "task", "show", id); !regexp.MustCompile(`(?m)^Checksum Algorithm:\s+SHA1$`).MatchString(out) {
		t.Errorf("ferry task show of a SHA1 transfer:\n%s", out)
	}
}

// TestCLIUnixFormat checks -F unix of the list commands: one record a
// line, its fields tab-separated, no header (which -F text has).
func TestCLIUnixFormat(t *testing.T) {
	c := newTreeUser(t, 2)
	id := c.transfer("src:/tree", "dst:/tree", "-r")
	c.succeeded(id, time.Minute)

	for _, tc := range []struct {
		args   []string
		header string   // the first word of -F text's first line
		first  []string // the first fields of each -F unix line, in order
		any    bool     // in any order (files are listed as they succeeded)
	}{
		{[]string{"task", "list"}, "TASK ID", []string{id + "\tSUCCEEDED\tTRANSFER\talice#src\talice#dst\t2/2\t"}, false},
		{[]string{"endpoint", "list"}, "NAME", []string{"alice#dst\t", "alice#src\t"}, false},
		{[]string{"token", "list"}, "ID", []string{"1\tapi\t"}, false},
		{[]string{"task", "show", id, "-t"}, "SOURCE PATH", []string{"/tree/f-0000.dat\t/tree/f-0000.dat\t", "/tree/f-0001.dat\t/tree/f-0001.dat\t"}, true},
	} {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			if out := c.ok("", tc.args...); !strings.HasPrefix(out, tc.header) {
				t.Errorf("ferry %s: no header %q:\n%s", strings.Join(tc.args, " "), tc.header, out)
			}
			out := c.ok("", append(tc.args, "-F", "unix")...)
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != len(tc.first) {
				t.Fatalf("ferry %s -F unix: %d lines, want %d:\n%s", strings.Join(tc.args, " "), len(lines), len(tc.first), out)
			}
			if tc.any {
				slices.Sort(lines)
			}
			for i, l := range lines {
				if !strings.HasPrefix(l, tc.first[i]) {
					t.Errorf("ferry %s -F unix: line %q, want it to start %q", strings.Join(tc.args, " "), l, tc.first[i])
				}
			}
		})
	}
}

// TestCLIUserRemove runs ferry user list and remove beside a running
// service: removing alice is refused while her task waits for an
// activation, and once she has canceled it her token stops working.
func TestCLIUserRemove(t *testing.T) {
	src, dst := startFerry(t), startFerry(t)
	svc := startService(t, serviceConfig{})
	c := newServiceUser(t, svc, "alice@example.org")
	svc.addUser("bob", servicePassword, "")
	c.addEndpoint("src", src, "--auth", "password")
	c.addEndpoint("dst", dst)
	id := c.transfer("src:/", "dst:/x", "-r")
	c.waitFor(id, "INACTIVE", 30*time.Second, func(t api.Task) bool { return t.Status == domain.StatusInactive })

	operator := func(args ...string) cliRun {
		t.Helper()
		return runFerryCLI(t, time.Minute, nil, "", append(append([]string{"user"}, args...), storeArgs(svc.cfg)...)...)
	}
	if r := operator("list"); r.code != 0 || !regexp.MustCompile(`^NAME +EMAIL +CREATED\nalice +alice@example.org +\S+\nbob +- `).MatchString(r.stdout) {
		t.Errorf("user list:\n%s", r)
	}
	if r := operator("remove", "alice"); r.code != 1 || !strings.Contains(r.stderr, "unfinished tasks") || !strings.Contains(r.stderr, id) {
		t.Errorf("user remove with a task waiting: want exit 1 naming it:\n%s", r)
	}
	c.ok("", "task", "cancel", id)
	if r := operator("remove", "alice"); r.code != 0 || r.stdout != "removed user alice\n" {
		t.Errorf("user remove:\n%s", r)
	}
	if r := c.run("", "whoami"); r.code != 4 {
		t.Errorf("whoami of a removed user: want exit 4:\n%s", r)
	}
	if r := operator("list"); r.code != 0 || strings.Contains(r.stdout, "alice") {
		t.Errorf("user list after remove:\n%s", r)
	}
	if r := operator("remove", "alice"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("user remove of no user: want exit 1, not found:\n%s", r)
	}
}

// TestSSHWhoami runs ferry whoami over the SSH gateway: the user the
// session is of, and the service's URL.
func TestSSHWhoami(t *testing.T) {
	g := startSSHGateway(t)
	if out := g.user(t, "alice").ok("whoami"); out != "alice at "+g.svc.URL()+"\n" {
		t.Errorf("whoami over SSH: %q", out)
	}
}

// TestCLIErrorSentencesPeers: file operations that a ferry gridftp server
// and GCT's server refuse, with replies of several lines, reach the user
// of the CLI as one sentence that names the path and the endpoint.
func TestCLIErrorSentencesPeers(t *testing.T) {
	needTools(t, "globus-gridftp-server")
	fg := startFerryConfig(t, ferryConfig{Args: []string{"--anonymous"}}) // anonymous sessions only read
	gct := startGCTServer(t)
	if err := os.Mkdir(filepath.Join(gct.root, "locked"), 0o555); err != nil { // GCT's sessions run as nobody
		t.Fatal(err)
	}
	c := newServiceUser(t, startService(t, serviceConfig{}), "")
	c.addEndpoint("fg", fg)
	c.addEndpoint("gct", gct)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ls", "fg:/nothere"}, "list /nothere on alice#fg: no such file or directory"},
		{[]string{"ls", "gct:/nothere"}, "list /nothere on alice#gct: no such file or directory"},
		{[]string{"mkdir", "fg:/new"}, "mkdir /new on alice#fg: permission denied"},
		// GCT answers 550-GlobusError: v=1 c=PERMISSION_DENIED ... 550 End.
		{[]string{"mkdir", "gct:/locked"}, "mkdir /locked on alice#gct: permission denied"},
		{[]string{"rename", "gct:/nothere", "gct:/x"}, "rename /nothere on alice#gct: no such file or directory"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := c.run("", tc.args...)
			if r.code != 1 || r.stderr != "ferry: "+tc.want+"\n" {
				t.Fatalf("want exit 1 and %q:\n%s", "ferry: "+tc.want, r)
			}
		})
	}
}

// TestCLILsUnsortedPeers: ferry ls -U of a directory of 2,500 entries (three
// pages) on a ferry gridftp server and on GCT's lists each entry exactly
// once, the same names as ferry ls sorted, and a directory that is not
// there is the same sentence as without -U.
func TestCLILsUnsortedPeers(t *testing.T) {
	needTools(t, "globus-gridftp-server")
	const many = 2500
	fgRoot := t.TempDir()
	gct := startGCTServer(t)
	want := map[string]bool{}
	for _, root := range []string{fgRoot, gct.root} {
		dir := filepath.Join(root, "big")
		if err := os.Mkdir(dir, 0o755); err != nil { // GCT's sessions run as nobody
			t.Fatal(err)
		}
		for i := range many {
			name := fmt.Sprintf("f%05d", (i*7919)%many)
			want[name] = true
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := newServiceUser(t, startService(t, serviceConfig{}), "")
	c.addEndpoint("fg", startFerryConfig(t, ferryConfig{Root: fgRoot, Anonymous: true}))
	c.addEndpoint("gct", gct)
	for _, ep := range []struct{ name, big string }{{"fg", "/big"}, {"gct", gct.root + "/big"}} { // GCT's paths are the host's
		t.Run(ep.name, func(t *testing.T) {
			c := &serviceCLI{t: t, home: c.home, url: c.url} // fails this subtest
			got := map[string]int{}
			for name := range strings.Lines(c.ok("", "ls", "-U", ep.name+":"+ep.big)) {
				got[strings.TrimSuffix(name, "\n")]++
			}
			for name, n := range got {
				if n != 1 || !want[name] {
					t.Errorf("ls -U: %q printed %d times", name, n)
				}
			}
			if len(got) != many {
				t.Errorf("ls -U: %d names, want %d", len(got), many)
			}
			sorted := strings.Fields(c.ok("", "ls", ep.name+":"+ep.big))
			if len(sorted) != many || !slices.IsSorted(sorted) {
				t.Errorf("ls: %d names, sorted %v; want %d sorted", len(sorted), slices.IsSorted(sorted), many)
			}
			for _, name := range sorted {
				if got[name] != 1 {
					t.Errorf("ls lists %q, ls -U printed it %d times", name, got[name])
				}
			}
			r := c.run("", "ls", "-U", ep.name+":/nothere")
			if want := "ferry: list /nothere on alice#" + ep.name + ": no such file or directory\n"; r.code != 1 || r.stderr != want {
				t.Errorf("ls -U of no directory: want exit 1 and %q:\n%s", want, r)
			}
		})
	}
}
