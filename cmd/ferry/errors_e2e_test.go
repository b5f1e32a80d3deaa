package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
)

// TestCLIErrorSentences: what goes wrong is told in one sentence that
// names the path and the endpoint, never a GridFTP reply or a field of
// the API's documents; only a failure of the service itself shows the
// request ID that its log knows.
func TestCLIErrorSentences(t *testing.T) {
	t.Parallel()
	s := startService(t, false)
	root, url := gridEndpoint(t)
	writeFile(t, filepath.Join(root, "proj/a.txt"), "a")
	os.Symlink(t.TempDir(), filepath.Join(root, "out")) // leads out of the root
	roRoot, fs := servertest.Root(t)
	writeFile(t, filepath.Join(roRoot, "a.txt"), "a")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ro := &server.Server{FS: fs, Anonymous: true} // anonymous sessions only read
	go ro.Serve(ln)
	t.Cleanup(func() { ro.Close() })
	s.login()
	s.ok("", "endpoint", "add", "epA", "--server", url)
	s.ok("", "endpoint", "add", "ro", "--server", "ftp://"+ln.Addr().String())

	for _, tc := range []struct {
		args []string
		want string // the whole line after "ferry: "
	}{
		{[]string{"ls", "epA:/proj/nothere"}, "list /proj/nothere on alice#epA: no such file or directory"},
		{[]string{"ls", "epA:/proj/a.txt"}, "list /proj/a.txt on alice#epA: not a directory"},
		{[]string{"mkdir", "epA:/proj"}, "mkdir /proj on alice#epA: already exists"},
		{[]string{"mkdir", "epA:/out/x"}, "mkdir /out/x on alice#epA: permission denied"},
		{[]string{"mkdir", "ro:/new"}, "mkdir /new on alice#ro: permission denied"},
		{[]string{"rename", "ro:/a.txt", "ro:/b.txt"}, "rename /a.txt on alice#ro: permission denied"},
		{[]string{"rename", "epA:/nope", "epA:/x"}, "rename /nope on alice#epA: no such file or directory"},
		{[]string{"endpoint", "add", "bad", "--server", "bogus://x"}, `server "bogus://x": scheme "bogus" is not supported: want ftp://host:port or gsiftp://host:port`},
		{[]string{"endpoint", "add", "bad", "--server", "ftp://h:99999"}, `server "ftp://h:99999": port 99999 is out of range (1 to 65535)`},
		{[]string{"endpoint", "add", "bad", "--server", "ftp://"}, `server "ftp://" names no host: want ftp://host:port or gsiftp://host:port`},
		{[]string{"endpoint", "show", "nothere"}, `no endpoint "nothere"`},
		{[]string{"transfer", "nothere:/a", "epA:/b"}, `no source endpoint "nothere"`},
		{[]string{"transfer", "epA:/proj/a.txt", "nothere:/b"}, `no destination endpoint "nothere"`},
		{[]string{"transfer", "epA:/proj/a.txt", "ro:/b", "ro:/b"}, "destinations 1 and 2 are one place: /b on alice#ro"},
		{[]string{"rm", "-r", "epA:/"}, "the root of an endpoint cannot be deleted"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := s.ferry("", tc.args...)
			if r.code != exitFailure || r.stderr != "ferry: "+tc.want+"\n" {
				t.Fatalf("exit %d, stderr %q; want exit 1 and %q", r.code, r.stderr, "ferry: "+tc.want+"\n")
			}
		})
	}

	// A failure of the service itself (its database is gone): the
	// request ID, for its operator.
	s.db.Close()
	r := s.ferry("", "endpoint", "list")
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, "ferry: internal error (request ") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("a failure of the service: exit %d, stderr %q; want one line with its request ID", r.code, r.stderr)
	}
}
