package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/service/api"
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
	roRoot, roURL := readOnlyEndpoint(t)
	writeFile(t, filepath.Join(roRoot, "a.txt"), "a")
	s.login()
	s.ok("", "endpoint", "add", "epA", "--server", url)
	s.ok("", "endpoint", "add", "ro", "--server", roURL)

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

// readOnlyEndpoint serves a temp directory over GridFTP to anonymous
// sessions that only read: writes get GCT's 550 PERMISSION_DENIED reply
// of several lines. It returns the directory and the server's URL.
func readOnlyEndpoint(t *testing.T) (root, url string) {
	t.Helper()
	root, fs := servertest.Root(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &server.Server{FS: fs, Anonymous: true} // not servertest.Serve, which lets anonymous write
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return root, "ftp://" + ln.Addr().String()
}

// TestCLIRefusalWords: a server's refusal of a transfer reaches the task's
// fatal error and events, and ferry copy's lines, as the words of the
// reply in one line, without the lines only programs read.
func TestCLIRefusalWords(t *testing.T) {
	t.Parallel()
	s := startService(t, true)
	root, url := gridEndpoint(t)
	writeFile(t, filepath.Join(root, "a.txt"), "a")
	_, roURL := readOnlyEndpoint(t)
	s.login()
	s.ok("", "endpoint", "add", "epA", "--server", url)
	s.ok("", "endpoint", "add", "ro", "--server", roURL)
	raw := func(what, text string) {
		t.Helper()
		for _, machine := range []string{"GlobusError", "GridFTP-Errno", "End.", " / "} {
			if strings.Contains(text, machine) {
				t.Errorf("%s holds %q of the raw reply: %s", what, machine, text)
			}
		}
		if !strings.Contains(text, "Permission denied") {
			t.Errorf("%s does not say why: %s", what, text)
		}
	}

	id := strings.TrimSpace(s.ok("", "transfer", "epA:/a.txt", "ro:/b.txt"))
	if r := s.ferry("", "task", "wait", id, "--timeout", "30"); r.code != exitFailure {
		t.Fatalf("task wait: %+v", r)
	}
	var task api.Task
	s.okJSON(&task, "task", "show", id)
	if task.FatalError == nil {
		t.Fatalf("task show: %+v", task)
	}
	raw("the fatal error", task.FatalError.Description)
	var evs api.EventList
	s.okJSON(&evs, "task", "events", id)
	for _, e := range evs.Data {
		if e.Code == "FILE_FAILED" {
			raw("the FILE_FAILED event", e.Description)
		}
	}

	r := s.ferry("", "copy", filepath.Join(root, "a.txt"), roURL+"/b.txt")
	if r.code != exitFailure || !strings.HasSuffix(r.stderr, "\nferry: 1 of 1 file failed\n") {
		t.Fatalf("ferry copy to a read-only server: %+v", r)
	}
	raw("ferry copy's FAILED line", r.stdout+r.stderr)
}
