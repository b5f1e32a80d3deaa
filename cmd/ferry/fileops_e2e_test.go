package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/service/api"
	"ferry/storage"
)

// TestCLILsFilter: ls --filter lists the names that pass a pattern, as
// globus-cli's does, through the API's filter; with -r at every level.
func TestCLILsFilter(t *testing.T) {
	t.Parallel()
	s := startService(t, false)
	root, url := gridEndpoint(t)
	for _, f := range []string{"a.txt", "b.dat", "tmp1.txt", ".h.txt", "txtdir/c.txt", "txtdir/d.dat", "tmpdir/e.txt"} {
		writeFile(t, filepath.Join(root, "proj", f), f)
	}
	s.login()
	s.ok("", "endpoint", "add", "ep", "--server", url)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--filter", "~*.txt"}, "a.txt tmp1.txt"},
		{[]string{"--filter", "~*.txt", "-a"}, ".h.txt a.txt tmp1.txt"},
		{[]string{"--filter", "!~tmp*"}, "a.txt b.dat txtdir/"},
		{[]string{"--filter", "b.dat"}, "b.dat"},
		{[]string{"--filter", "=b.dat,a.txt"}, "a.txt b.dat"},
		{[]string{"--filter", "!=b.dat"}, "a.txt tmp1.txt tmpdir/ txtdir/"},
		{[]string{"--filter", "~*.[td]*"}, "a.txt b.dat tmp1.txt"},
		{[]string{"--filter", "!~tmp*", "-r"}, "a.txt b.dat txtdir/ txtdir/c.txt txtdir/d.dat"},
		{[]string{"--filter", "nothing"}, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out := s.ok("", append([]string{"ls", "ep:/proj"}, tc.args...)...)
			if got := strings.Join(strings.Fields(out), " "); got != tc.want {
				t.Fatalf("ls %v: %q, want %q", tc.args, got, tc.want)
			}
		})
	}
	s.fails(exitUsage, `--filter: name filter "~[a": "[a" is not a glob`, "ls", "ep:/proj", "--filter", "~[a")
	s.fails(exitUsage, `name filter "~a/b": want`, "ls", "ep:/proj", "--filter", "~a/b")
}

// countedLister counts the listings of a tree's directories.
type countedLister struct {
	storage.Driver
	mu     sync.Mutex
	listed map[string]int
}

func (c *countedLister) ListDir(ctx context.Context, name string, fn func(storage.Info) error) error {
	c.mu.Lock()
	c.listed[name]++
	c.mu.Unlock()
	return storage.ListDir(ctx, c.Driver, name, fn)
}

func (c *countedLister) ReadDir(ctx context.Context, name string) ([]storage.Info, error) {
	c.mu.Lock()
	c.listed[name]++
	c.mu.Unlock()
	return c.Driver.ReadDir(ctx, name)
}

func (c *countedLister) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listed[name]
}

// TestCLILsHugeDirectory: ferry ls of a directory of 30,000 entries
// prints its first page before it asks for the second, prints every name
// once, and the endpoint's server lists the directory once for all the
// pages; -l and -F json (one JSON document) too.
func TestCLILsHugeDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("30,000 files")
	}
	t.Parallel()
	const many = 30000
	root, fs := servertest.Root(t)
	counted := &countedLister{Driver: fs, listed: map[string]int{}}
	addr := servertest.Serve(t, &server.Server{FS: counted, Anonymous: true})
	want := map[string]bool{}
	for i := range many {
		name := fmt.Sprintf("f%05d", i)
		want[name] = true
		writeFile(t, filepath.Join(root, "big", name), "")
	}

	// The CLI's request for a page after the first waits until the
	// CLI has printed a line (or, if it never does, a minute).
	var (
		mu      sync.Mutex
		printed chan struct{}
		early   bool
	)
	s := startServiceWrapped(t, false, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var wait chan struct{}
			if strings.HasSuffix(r.URL.Path, "/ls") && r.URL.Query().Get("offset") == "1000" {
				mu.Lock()
				wait, printed = printed, nil
				mu.Unlock()
			}
			if wait != nil {
				select {
				case <-wait:
					mu.Lock()
					early = true
					mu.Unlock()
				case <-time.After(time.Minute):
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	s.login()
	s.ok("", "endpoint", "add", "ep", "--server", "ftp://"+addr)

	mu.Lock()
	printed = make(chan struct{})
	signal := printed
	mu.Unlock()
	got, err := printedLines(t, s.command("ls", "ep:/big"), func() { close(signal) })
	if err != nil {
		t.Fatalf("ferry ls: %v", err)
	}
	mu.Lock()
	if !early {
		t.Errorf("ferry ls printed nothing before it asked for the second page")
	}
	mu.Unlock()
	checkNames(t, "ls", got, want)
	if n := counted.count("/big"); n != 1 {
		t.Errorf("ls of %d entries: the server listed the directory %d times, want once", many, n)
	}

	checkNames(t, "ls -l", lastFields(s.ok("", "ls", "-l", "ep:/big")), want)

	var l api.FileList
	s.okJSON(&l, "ls", "ep:/big")
	got = map[string]int{}
	for _, f := range l.Data {
		got[f.Name]++
	}
	checkNames(t, "ls -F json", got, want)
	if l.Total != many || l.Length != many || l.Path != "/big" || l.DataType != "file_list" {
		t.Errorf("ls -F json: %+v", l.PageInfo)
	}
	if n := counted.count("/big"); n != 3 {
		t.Errorf("three ls: the server listed the directory %d times, want 3", n)
	}
}

// heldDir is a tree whose listings stop after held entries until the
// test has read a line of ferry ls (or, if it never prints one while the
// listing is held, a minute has passed).
type heldDir struct {
	storage.Driver
	held    int
	printed chan struct{} // closed by the test at the first line
	late    atomic.Bool   // a listing was let go only by the minute
}

func (h *heldDir) ListDir(ctx context.Context, name string, fn func(storage.Info) error) error {
	n := 0
	return storage.ListDir(ctx, h.Driver, name, func(in storage.Info) error {
		if n++; n == h.held {
			select {
			case <-h.printed:
			case <-time.After(time.Minute):
				h.late.Store(true)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return fn(in)
	})
}

// TestCLILsUnsorted: ferry ls -U of a directory of 10,000 entries prints
// its first line while the endpoint's server is still listing it (held
// after 5,000 entries), and prints every name once; -l and -F json too.
func TestCLILsUnsorted(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 files")
	}
	t.Parallel()
	const many = 10000
	root, fs := servertest.Root(t)
	held := &heldDir{Driver: fs, held: many / 2, printed: make(chan struct{})}
	// MODE E sends full blocks: several before the hold.
	addr := servertest.Serve(t, &server.Server{FS: held, Anonymous: true, BlockSize: 64 << 10})
	want := map[string]bool{}
	for i := range many {
		name := fmt.Sprintf("f%05d", i)
		want[name] = true
		writeFile(t, filepath.Join(root, "big", name), "")
	}
	s := startService(t, false)
	s.login()
	s.ok("", "endpoint", "add", "ep", "--server", "ftp://"+addr)

	cmd := s.command("ls", "-U", "ep:/big")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	got, err := printedLines(t, cmd, func() { close(held.printed) })
	if err != nil {
		t.Fatalf("ferry ls -U: %v: %s", err, stderr.String())
	}
	if held.late.Load() {
		t.Errorf("ferry ls -U printed nothing while the server's listing was held after %d entries", held.held)
	}
	checkNames(t, "ls -U", got, want)

	checkNames(t, "ls -U -l", lastFields(s.ok("", "ls", "-U", "-l", "ep:/big")), want)

	var l api.FileList
	s.okJSON(&l, "ls", "-U", "ep:/big")
	got = map[string]int{}
	for _, f := range l.Data {
		got[f.Name]++
	}
	checkNames(t, "ls -U -F json", got, want)
	if l.Total != many || l.Length != many {
		t.Errorf("ls -U -F json: %+v", l.PageInfo)
	}
}

// checkNames checks that got counts each name of want once, and no other.
// printedLines runs cmd and counts each line it prints, calling first
// once the first line is read (while cmd still runs); the error is cmd's.
func printedLines(t *testing.T, cmd *exec.Cmd, first func()) (map[string]int, error) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if len(got) == 0 {
			first()
		}
		got[sc.Text()]++
	}
	return got, cmd.Wait()
}

// lastFields counts the last field of each line of out (the name in ls -l).
func lastFields(out string) map[string]int {
	got := map[string]int{}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		got[f[len(f)-1]]++
	}
	return got
}

func checkNames(t *testing.T, what string, got map[string]int, want map[string]bool) {
	t.Helper()
	for name, n := range got {
		if n != 1 || !want[name] {
			t.Errorf("%s: %q printed %d times", what, name, n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d names printed, want %d", what, len(got), len(want))
	}
}
