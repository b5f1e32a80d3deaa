package main

import (
	"path/filepath"
	"strings"
	"testing"
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
