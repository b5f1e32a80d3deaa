package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"ferry/gridftp/server"
	"ferry/gridftp/server/servertest"
	"ferry/service/api"
	"ferry/service/core"
	"ferry/service/domain"
	"ferry/service/gridops"
	"ferry/service/httpapi"
	"ferry/service/secret"
	"ferry/service/sqlstore"
	"ferry/service/worker"
)

// ferryBin is the ferry binary the end-to-end tests run, built once.
var ferryBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ferry-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ferryBin = filepath.Join(dir, "ferry")
	build := exec.Command("go", "build", "-o", ferryBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	code := 1
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building ferry:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// gridEndpoint serves a temp directory over GridFTP to anonymous and to
// alice (password pw); it returns the directory and the server's URL.
func gridEndpoint(t *testing.T) (root, url string) {
	t.Helper()
	root, fs := servertest.Root(t)
	addr := servertest.Serve(t, &server.Server{FS: fs, Anonymous: true, Auth: servertest.Users{"alice": "pw"}})
	return root, "ftp://" + addr
}

// service is a ferry service (the REST API over SQLite, with or without a
// worker) with user alice, and the environment the CLI runs in.
type service struct {
	t    *testing.T
	url  string
	home string       // $XDG_CONFIG_HOME of the CLI
	db   *sqlstore.DB // the service's store
}

func startService(t *testing.T, withWorker bool) *service {
	t.Helper()
	return startServiceWrapped(t, withWorker, nil)
}

// startServiceWrapped is startService with the API's handler wrapped by
// wrap (nil: not wrapped).
func startServiceWrapped(t *testing.T, withWorker bool, wrap func(http.Handler) http.Handler) *service {
	t.Helper()
	db, err := sqlstore.Open(t.Context(), filepath.Join(t.TempDir(), "ferry.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	box, err := secret.New(bytes.Repeat([]byte{7}, secret.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("alice-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateUser(t.Context(), &domain.User{Name: "alice", PasswordHash: string(hash)}); err != nil {
		t.Fatal(err)
	}
	ops := &gridops.Ops{Timeout: 10 * time.Second}
	svc := &core.Service{Store: db, Ops: ops, Box: box}
	h := &httpapi.Server{Auth: svc, Users: svc, Bookmarks: svc, Endpoints: svc, Activations: svc, Files: svc, Tasks: svc}
	handler := h.Handler()
	if wrap != nil {
		handler = wrap(handler)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	if withWorker {
		ctx, cancel := context.WithCancel(context.Background())
		w := &worker.Worker{Store: db, Box: box, Ops: ops, ID: "test", Poll: 20 * time.Millisecond,
			FlushEvery: 50 * time.Millisecond, Backoff: 100 * time.Millisecond}
		var wg sync.WaitGroup
		wg.Go(func() { w.Serve(ctx) })
		t.Cleanup(func() { cancel(); wg.Wait() })
	}
	return &service{t: t, url: srv.URL, home: t.TempDir(), db: db}
}

// result is what a run of the CLI printed and its exit status.
type result struct {
	stdout, stderr string
	code           int
}

// ferry runs the CLI binary with args and stdin, against the service
// only through the saved login or the flags given.
func (s *service) ferry(stdin string, args ...string) result {
	s.t.Helper()
	cmd := s.command(args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{out.String(), errOut.String(), 0}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		s.t.Fatalf("ferry %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// command is the CLI with args, run against the service only through
// the saved login or the flags given.
func (s *service) command(args ...string) *exec.Cmd {
	cmd := exec.CommandContext(s.t.Context(), ferryBin, args...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, "FERRY_") || strings.HasPrefix(e, "XDG_CONFIG_HOME=")
	})
	cmd.Env = append(cmd.Env, "XDG_CONFIG_HOME="+s.home)
	return cmd
}

// ok runs the CLI and fails the test unless it exits 0.
func (s *service) ok(stdin string, args ...string) string {
	s.t.Helper()
	r := s.ferry(stdin, args...)
	if r.code != 0 {
		s.t.Fatalf("ferry %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// fails runs the CLI and fails the test unless it exits with code and one
// line on standard error holding want.
func (s *service) fails(code int, want string, args ...string) {
	s.t.Helper()
	r := s.ferry("", args...)
	if r.code != code || !strings.Contains(r.stderr, want) || !strings.HasPrefix(r.stderr, "ferry: ") || strings.Count(r.stderr, "\n") != 1 {
		s.t.Fatalf("ferry %s: exit %d, stderr %q; want exit %d and one line with %q", strings.Join(args, " "), r.code, r.stderr, code, want)
	}
}

// okJSON runs the CLI with -F json and decodes what it printed into v.
func (s *service) okJSON(v any, args ...string) {
	s.t.Helper()
	out := s.ok("", append(args, "-F", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		s.t.Fatalf("ferry %s -F json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (s *service) login() {
	s.t.Helper()
	s.ok("alice-pw\n", "login", "--url", s.url, "--username", "alice")
}

func writeFile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantFile(t *testing.T, p, data string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil || string(b) != data {
		t.Fatalf("%s: %q, %v; want %q", p, b, err, data)
	}
}

// TestCLITransfer drives the service through the CLI binary as a user
// would: log in, add and activate endpoints, browse, transfer, wait,
// inspect, copy scp-style and delete, with a worker running the tasks
// between two GridFTP servers.
func TestCLITransfer(t *testing.T) {
	t.Parallel()
	s := startService(t, true)
	srcRoot, srcURL := gridEndpoint(t)
	dstRoot, dstURL := gridEndpoint(t)
	writeFile(t, filepath.Join(srcRoot, "data/a.txt"), "alpha")
	writeFile(t, filepath.Join(srcRoot, "data/sub/b.txt"), "bravo")
	writeFile(t, filepath.Join(srcRoot, "data/.hidden"), "h")

	s.login()
	st, err := os.Stat(filepath.Join(s.home, "ferry", "token"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("saved login: %v, %v; want mode 0600", st, err)
	}

	var ep api.Endpoint
	s.okJSON(&ep, "endpoint", "add", "src", "--server", srcURL, "--description", "the source")
	if ep.DisplayName != "alice#src" || ep.AuthMethod != "anonymous" || len(ep.Servers) != 1 || ep.Servers[0].URI != srcURL {
		t.Fatalf("endpoint add: %+v", ep)
	}
	s.ok("", "endpoint", "add", "dst", "--server", dstURL, "--auth", "password")
	list := s.ok("", "endpoint", "list")
	if !strings.Contains(list, "alice#src") || !strings.Contains(list, "alice#dst") {
		t.Fatalf("endpoint list:\n%s", list)
	}
	if out := s.ok("", "endpoint", "show", "alice#dst"); !strings.Contains(out, "Activated:") || !strings.Contains(out, "no") {
		t.Fatalf("endpoint show:\n%s", out)
	}
	if r := s.ferry("wrong\n", "endpoint", "activate", "dst", "--username", "alice"); r.code != exitFailure || !strings.Contains(r.stderr, "refused the login") {
		t.Fatalf("activate with a wrong password: %+v", r)
	}
	s.fails(exitFailure, "password", "endpoint", "activate", "dst", "--username", "alice")
	if out := s.ok("pw\n", "endpoint", "activate", "dst", "--username", "alice", "--lifetime", "1h"); !strings.Contains(out, "activated") {
		t.Fatalf("endpoint activate: %s", out)
	}

	s.ok("", "mkdir", "dst:/made")
	if _, err := os.Stat(filepath.Join(dstRoot, "made")); err != nil {
		t.Fatalf("mkdir: %v", err)
	}
	s.ok("", "rename", "dst:/made", "dst:/renamed")
	if _, err := os.Stat(filepath.Join(dstRoot, "renamed")); err != nil {
		t.Fatalf("rename: %v", err)
	}
	if out := s.ok("", "ls", "src:/data"); out != "a.txt\nsub/\n" {
		t.Fatalf("ls:\n%s", out)
	}
	if out := s.ok("", "ls", "-a", "-r", "src:/data"); out != ".hidden\na.txt\nsub/\nsub/b.txt\n" {
		t.Fatalf("ls -a -r:\n%s", out)
	}
	if out := s.ok("", "ls", "-l", "src:/data"); !strings.Contains(out, "drwx") || !strings.Contains(out, " 5 ") {
		t.Fatalf("ls -l:\n%s", out)
	}

	id := strings.TrimSpace(s.ok("", "transfer", "-r", "src:/data", "dst:/out", "--label", "first", "-s", "checksum"))
	if out := s.ok("", "task", "wait", id, "--timeout", "30"); !strings.Contains(out, "SUCCEEDED") {
		t.Fatalf("task wait: %s", out)
	}
	wantFile(t, filepath.Join(dstRoot, "out/a.txt"), "alpha")
	wantFile(t, filepath.Join(dstRoot, "out/sub/b.txt"), "bravo")

	var task api.Task
	s.okJSON(&task, "task", "show", id)
	if task.Status != "SUCCEEDED" || task.Label != "first" || task.FilesTransferred != 3 || !task.VerifyChecksum ||
		task.SyncLevel == nil || *task.SyncLevel != 3 {
		t.Fatalf("task show: %+v", task)
	}
	var done api.SuccessfulTransfers
	s.okJSON(&done, "details", id, "-t")
	var paths []string
	for _, f := range done.Data {
		paths = append(paths, f.DestinationPath)
	}
	slices.Sort(paths)
	if want := []string{"/out/.hidden", "/out/a.txt", "/out/sub/b.txt"}; !slices.Equal(paths, want) {
		t.Fatalf("task show -t: %v, want %v", paths, want)
	}
	if out := s.ok("", "events", id); !strings.HasPrefix(out, "TIME ") || !strings.Contains(strings.SplitN(out, "\n", 2)[0], "DESCRIPTION") ||
		strings.Contains(out, "DETAILS") || !strings.Contains(out, "averaging") {
		t.Errorf("task events: want a table ending in the description (why in STARTED's), no details:\n%s", out)
	}
	if out := s.ok("", "events", id); !strings.Contains(out, "SUCCEEDED") {
		t.Fatalf("events:\n%s", out)
	}
	if out := s.ok("", "status"); !strings.Contains(out, id) || !strings.Contains(out, "alice#src") {
		t.Fatalf("status:\n%s", out)
	}

	batch := "# two files\nsub/b.txt  'b copy.txt'\n\n--recursive sub  tree  # a directory\n"
	id = strings.TrimSpace(s.ok(batch, "transfer", "src:/data", "dst:/batch", "--batch", "-"))
	s.ok("", "wait", id)
	wantFile(t, filepath.Join(dstRoot, "batch/b copy.txt"), "bravo")
	wantFile(t, filepath.Join(dstRoot, "batch/tree/b.txt"), "bravo")

	id = strings.TrimSpace(s.ok("", "transfer", "src:/data/a.txt", "dst:/secret/a.txt", "--encrypt-data"))
	s.ok("", "wait", id)
	wantFile(t, filepath.Join(dstRoot, "secret/a.txt"), "alpha")
	var enc api.Task
	if s.okJSON(&enc, "task", "show", id); !enc.EncryptData {
		t.Fatalf("task show of an encrypted transfer: %+v", enc)
	}
	if out := s.ok("", "scp", "src:/data/a.txt", "dst:/copies/"); !strings.Contains(out, "SUCCEEDED") {
		t.Fatalf("scp: %s", out)
	}
	wantFile(t, filepath.Join(dstRoot, "copies/a.txt"), "alpha")

	s.ok("", "rm", "-r", "dst:/out")
	if _, err := os.Stat(filepath.Join(dstRoot, "out")); !os.IsNotExist(err) {
		t.Fatalf("rm -r: %v", err)
	}
	s.fails(1, "delete /missing on alice#dst: no such file or directory", "rm", "dst:/missing")
	s.ok("", "rm", "--ignore-missing", "dst:/missing")

	s.ok("", "endpoint", "deactivate", "dst")
	s.fails(1, "not activated", "ls", "dst:/")
	s.ok("", "endpoint", "remove", "src")
	s.fails(1, "no endpoint", "endpoint", "show", "src")
}

// TestCLITasks covers what needs no worker: tasks stay queued, so they
// can be changed, waited for in vain, and canceled; then tokens, the
// output formats and exit statuses.
func TestCLITasks(t *testing.T) {
	t.Parallel()
	s := startService(t, false)
	root, url := gridEndpoint(t)
	writeFile(t, filepath.Join(root, "a"), "a")
	s.fails(exitAuth, "not logged in", "task", "list", "--url", s.url)
	s.fails(exitUsage, "which service?", "task", "list")
	s.login()
	s.ok("", "endpoint", "add", "ep", "--server", url)

	var dry api.Transfer
	s.okJSON(&dry, "transfer", "ep:/a", "ep:/b", "--dry-run", "--deadline", "2h", "--exclude", "*.tmp", "--include", "*")
	if dry.SourceEndpoint != "ep" || len(dry.Data) != 1 || dry.Data[0].SourcePath != "/a" || dry.Deadline.IsZero() ||
		len(dry.FilterRules) != 2 || dry.FilterRules[0].Method != "exclude" {
		t.Fatalf("--dry-run: %+v", dry)
	}
	if out := s.ok("", "task", "list"); strings.Count(out, "\n") != 1 {
		t.Fatalf("--dry-run submitted a task:\n%s", out)
	}

	var res api.SubmitResult
	s.okJSON(&res, "transfer", "ep:/a", "ep:/b", "--submission-id", "once", "--label", "queued")
	if res.Code != "Accepted" || res.TaskID == "" {
		t.Fatalf("transfer: %+v", res)
	}
	id := res.TaskID
	if again := strings.TrimSpace(s.ok("", "transfer", "ep:/a", "ep:/b", "--submission-id", "once")); again != id {
		t.Fatalf("re-submission: task %s, want %s", again, id)
	}

	s.ok("", "modify", id, "--label", "renamed", "--deadline", "3h")
	var task api.Task
	s.okJSON(&task, "task", "show", id)
	if task.Label != "renamed" || time.Until(task.Deadline) < 2*time.Hour || task.Status != "ACTIVE" {
		t.Fatalf("after modify: %+v", task)
	}
	s.fails(exitFailure, "not INACTIVE", "task", "resume", id)
	s.fails(exitTimeout, "still ACTIVE", "task", "wait", id, "--timeout", "0.2")
	s.fails(7, "still ACTIVE", "wait", id, "--timeout", "100ms", "--timeout-exit-code", "7")
	if out := s.ok("", "task", "list", "--filter-status", "ACTIVE"); !strings.Contains(out, id) {
		t.Fatalf("task list --filter-status ACTIVE:\n%s", out)
	}

	if out := s.ok("", "cancel", id); !strings.Contains(out, "cancel") {
		t.Fatalf("cancel: %s", out)
	}
	r := s.ferry("", "task", "wait", id, "--timeout", "5")
	if r.code != exitFailure || !strings.Contains(r.stdout, "FAILED") {
		t.Fatalf("wait for a canceled task: %+v", r)
	}
	var evs api.EventList
	s.okJSON(&evs, "task", "events", id)
	if len(evs.Data) == 0 || evs.Data[len(evs.Data)-1].Code != "CANCELED" {
		t.Fatalf("events: %+v", evs)
	}
	if out := s.ok("", "task", "list", "--filter-status", "ACTIVE"); strings.Contains(out, id) {
		t.Fatalf("canceled task still ACTIVE:\n%s", out)
	}

	var tokens api.TokenList
	s.okJSON(&tokens, "token", "list")
	if len(tokens.Data) != 1 || tokens.Data[0].Value != "" {
		t.Fatalf("token list: %+v", tokens)
	}
	s.ok("", "token", "revoke", fmt.Sprint(tokens.Data[0].ID))
	s.fails(exitAuth, "revoked", "task", "list")
	s.fails(exitAuth, "revoked", "endpoint", "list")
	s.ok("", "logout") // forgets the revoked token
	s.fails(exitUsage, "which service?", "task", "list")

	s.login()
	s.ok("", "logout")
	s.fails(exitAuth, "not logged in", "task", "list", "--url", s.url)
}

// TestCLIUsage checks that bad input gets one line and exit status 2,
// before anything is sent.
// TestCLIConnectHalfMade: ferry endpoint add --connect that fails makes
// nothing, not an endpoint without a setup key (here the service has no
// relay, so it can give none).
func TestCLIConnectHalfMade(t *testing.T) {
	t.Parallel()
	s := startService(t, false)
	s.login()
	s.fails(exitFailure, "relay", "endpoint", "add", "laptop", "--connect")
	if out := s.ok("", "endpoint", "list"); strings.Contains(out, "laptop") {
		t.Fatalf("a failed endpoint add --connect left an endpoint:\n%s", out)
	}
}

func TestCLIUsage(t *testing.T) {
	t.Parallel()
	s := &service{t: t, home: t.TempDir()}
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"unknown command", []string{"bogus"}},
		{"task needs a command", []string{"task"}},
		{`unknown command "bogus"`, []string{"task", "bogus"}},
		{"requires at least 2 arg(s)", []string{"transfer", "ep:/a"}},
		{"no path", []string{"transfer", "ep", "ep:/b"}},
		{"is a URL", []string{"transfer", "ftp://host/a", "ep:/b", "--dry-run"}},
		{"sync level", []string{"transfer", "ep:/a", "ep:/b", "--sync-level", "fast"}},
		{"--deadline", []string{"transfer", "ep:/a", "ep:/b", "--deadline", "soon"}},
		{"--notify", []string{"transfer", "ep:/a", "ep:/b", "--notify", "maybe"}},
		{"-r does not go with --batch", []string{"transfer", "ep:", "ep:", "-r", "--batch", "-"}},
		{"--batch", []string{"transfer", "ep:", "ep:", "--batch", "/does/not/exist"}},
		{"unknown flag", []string{"ls", "ep:/", "--bogus"}},
		{"-F", []string{"ls", "ep:/", "-F", "yaml"}},
		{"endpoint", []string{"ls", "bad name:/"}},
		{"one endpoint", []string{"rename", "a:/x", "b:/y"}},
		{"one endpoint", []string{"rm", "a:/x", "b:/y"}},
		{"--timeout", []string{"wait", "id", "--timeout", "forever"}},
		{"--polling-interval", []string{"wait", "id", "--polling-interval", "0"}},
		{"token ID", []string{"token", "revoke", "me"}},
		{"nothing to change", []string{"modify", "id"}},
		{"nothing to change", []string{"endpoint", "update", "ep"}},
		{"--server is required", []string{"endpoint", "add", "ep"}},
		{"--connect takes no --server", []string{"endpoint", "add", "ep", "--connect", "--server", "ftp://h:1"}},
		{"--service and --root are required", []string{"connect", "--root", "/tmp"}},
		{"--setup-key", []string{"connect", "--service", "http://127.0.0.1:1", "--root", "/tmp", "--setup-key", "nodot"}},
		{"--lifetime", []string{"endpoint", "activate", "ep", "--lifetime", "a while"}},
		{"which service?", []string{"endpoint", "list"}},
		{"service URL", []string{"endpoint", "list", "--url", "ftp://host"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			s.t = t
			s.fails(exitUsage, tc.want, tc.args...)
		})
	}
}

// TestCLISubmissionRefusals submits transfers that would destroy their
// own source or cannot work, through the CLI against a service with a
// worker: each is refused at once with a sentence naming the endpoint,
// and no source byte changes. A transfer whose endpoint does not answer
// is accepted, and fails at its first listing with the same sentence and
// no retry.
func TestCLISubmissionRefusals(t *testing.T) {
	t.Parallel()
	s := startService(t, true)
	aRoot, aURL := gridEndpoint(t)
	_, bURL := gridEndpoint(t)
	writeFile(t, filepath.Join(aRoot, "proj/README.txt"), "read me")
	writeFile(t, filepath.Join(aRoot, "loop/a.txt"), "a")
	writeFile(t, filepath.Join(aRoot, "file.txt"), "f")
	writeFile(t, filepath.Join(aRoot, "loop/sub/b.txt"), "b")
	writeFile(t, filepath.Join(aRoot, "proj/b/c.txt"), "c")
	if err := os.Symlink("loop/sub", filepath.Join(aRoot, "looplink")); err != nil {
		t.Fatal(err)
	}
	s.login()
	s.ok("", "endpoint", "add", "epA", "--server", aURL)
	s.ok("", "endpoint", "add", "epA2", "--server", aURL) // another endpoint on the same server
	s.ok("", "endpoint", "add", "epB", "--server", bURL)
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"destination /proj/README.txt on alice#epA: is the source /proj/README.txt itself", []string{"epA:/proj/README.txt", "epA:/proj/README.txt"}},
		{"destination /proj/README.txt on alice#epA2: is the source /proj/README.txt itself", []string{"epA:/proj/README.txt", "epA2:/proj/README.txt"}},
		{"destination /proj/README.txt on alice#epA: is the source /proj/README.txt itself", []string{"epA:/proj/README.txt", "epA:/proj/"}},
		{"destination /loop/inner on alice#epA: is inside the source /loop", []string{"-r", "epA:/loop", "epA:/loop/inner"}},
		{"destination /loop on alice#epA2: is the source /loop itself", []string{"-r", "epA:/loop", "epA2:/loop"}},
		{"destination /looplink/x on alice#epA: is inside the source /loop (through a symlink, it is /loop/sub/x)", []string{"-r", "epA:/loop", "epA:/looplink/x"}},
		{"destination /proj on alice#epA: holds the source /proj/b: deleting its extra entries would delete what lies beside the source",
			[]string{"-r", "--delete-destination-extra", "epA:/proj/b", "epA:/proj"}},
		{"destination /proj on alice#epA2: holds the source /proj/b: deleting its extra entries would delete what lies beside the source",
			[]string{"-r", "--delete-destination-extra", "epA:/proj/b", "epA2:/proj"}},
		{"source /loop on alice#epA: is a directory: transfer it recursively", []string{"epA:/loop", "epB:/x"}},
		{"source /proj/nothere on alice#epA: no such file or directory", []string{"epA:/proj/nothere", "epB:/x"}},
		{"destination /file.txt on alice#epA2: is a file; a directory is needed there", []string{"-r", "epA:/loop", "epA2:/file.txt"}},
	} {
		s.fails(exitFailure, tc.want, append([]string{"transfer"}, tc.args...)...)
	}
	wantFile(t, filepath.Join(aRoot, "proj/README.txt"), "read me")
	wantFile(t, filepath.Join(aRoot, "file.txt"), "f")
	if _, err := os.Stat(filepath.Join(aRoot, "loop/sub/x")); err == nil {
		t.Error("a refused transfer created its destination inside its source, through a symlink")
	}
	if _, err := os.Stat(filepath.Join(aRoot, "loop/inner")); err == nil {
		t.Error("a refused transfer created its destination")
	}
	if out := s.ok("", "task", "list"); strings.Count(out, "\n") != 1 {
		t.Fatalf("refused transfers made tasks:\n%s", out)
	}

	// An endpoint whose server is down: the same path on one endpoint is
	// refused without asking it; anything else is accepted, and its first
	// listing, once the server is up, fails it with the same sentence.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downAddr := ln.Addr().String()
	ln.Close()
	s.ok("", "endpoint", "add", "down", "--server", "ftp://"+downAddr)
	s.fails(exitFailure, "destination /x on alice#down: is the source /x itself", "transfer", "down:/x", "down:/x")
	s.fails(exitFailure, "destination /d/e on alice#down: is inside the source /d", "transfer", "-r", "down:/d", "down:/d/e")
	s.fails(exitFailure, "destination /d on alice#down: holds the source /d/e: deleting its extra entries would delete what lies beside the source",
		"transfer", "-r", "--delete-destination-extra", "down:/d/e", "down:/d")
	id := strings.TrimSpace(s.ok("", "transfer", "down:/nothere", "epB:/x", "--deadline", "1m"))
	_, fs := servertest.Root(t)
	if ln, err = net.Listen("tcp", downAddr); err != nil {
		t.Fatal(err)
	}
	srv := &server.Server{FS: fs, Anonymous: true, AnonymousWrite: true}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	r := s.ferry("", "task", "wait", id, "--timeout", "30")
	var task api.Task
	s.okJSON(&task, "task", "show", id)
	if r.code != exitFailure || task.Status != "FAILED" || task.FatalError == nil ||
		task.FatalError.Description != "source /nothere on alice#down: no such file or directory" {
		t.Fatalf("task of an endpoint down at submission: %+v %+v", r, task)
	}
	var evs api.EventList
	s.okJSON(&evs, "task", "events", id)
	said := 0
	for _, e := range evs.Data {
		if strings.Contains(e.Description, "no such file") {
			said++
		}
	}
	if said != 1 {
		t.Errorf("the missing source was tried more than once: %+v", evs.Data)
	}
}

// TestCLIEndpointServers: an endpoint of several servers of one storage
// (a transfer spreads large files over them); endpoint show probes each:
// up, or down and why.
func TestCLIEndpointServers(t *testing.T) {
	t.Parallel()
	s := startService(t, false)
	_, up := gridEndpoint(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "ftp://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	s.login()
	s.ok("", "endpoint", "add", "multi", "--server", up, "--server", down)
	out := s.ok("", "endpoint", "show", "multi")
	for _, want := range []string{"Server " + up + ":", "up\n", "Server " + down + ":", "down: ", "connection refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("endpoint show lacks %q:\n%s", want, out)
		}
	}
	var doc struct {
		api.Endpoint
		ServerState api.ServerStateList `json:"server_state"`
	}
	s.okJSON(&doc, "endpoint", "show", "multi")
	if st := doc.ServerState.Data; len(st) != 2 || !st[0].Up || st[0].Stripes != 1 || st[1].Up || st[1].URI != down {
		t.Errorf("endpoint show -F json: %+v", doc.ServerState)
	}
}
