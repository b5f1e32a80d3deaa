//go:build interop

package interop

// The managed service end to end: real `ferry server` processes (on SQLite,
// and two of them on one PostgreSQL), real endpoint servers (ferry gridftp
// and the GCT globus-gridftp-server) and the real CLI binary. A server is
// killed with SIGKILL mid-transfer and the task goes on elsewhere; a
// credential expires mid-task; notifications reach a real SMTP server and a
// webhook.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"ferry/internal/passwd"
	"ferry/internal/pgtest"
	"ferry/internal/smtptest"
	"ferry/service/api"
	"ferry/service/domain"
	"ferry/service/notify"
)

// serviceLease is the --lease of the servers: short, so that a task whose
// server was killed is claimed again soon.
const serviceLease = 2 * time.Second

// serviceConfig says how to start a ferry server.
type serviceConfig struct {
	Data     string        // --data; "" means a new temp dir
	DB       string        // --db; "" means SQLite under Data
	KeyFile  string        // --key-file; "" means the server's default, Data/secret.key
	WorkerID string        // --worker-id; "" means the server's default
	Lease    time.Duration // --lease; 0 means serviceLease
	Args     []string      // more flags, e.g. --smtp HOST:PORT
}

// ferryService is a `ferry server` child process.
type ferryService struct {
	child
	cfg  serviceConfig
	addr string
}

// startService starts ferry server on 127.0.0.1 and a free port with a
// short lease, waits until /healthz answers, and stops it (SIGTERM, then
// SIGKILL) at cleanup. Its log goes to the test log if the test fails.
func startService(t *testing.T, cfg serviceConfig) *ferryService {
	t.Helper()
	needFerry(t)
	if cfg.Data == "" {
		cfg.Data = t.TempDir()
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	args := append([]string{"server", "--listen", addr, "--lease", cmp.Or(cfg.Lease, serviceLease).String()}, storeArgs(cfg)...)
	if cfg.KeyFile != "" {
		args = append(args, "--key-file", cfg.KeyFile)
	}
	if cfg.WorkerID != "" {
		args = append(args, "--worker-id", cfg.WorkerID)
	}
	s := &ferryService{child: child{t: t, name: "ferry server", args: append(args, cfg.Args...), log: &logBuffer{}}, cfg: cfg, addr: addr}
	t.Cleanup(s.stop)
	s.start()
	return s
}

// storeArgs are the flags that name a service's database.
func storeArgs(cfg serviceConfig) []string {
	args := []string{"--data", cfg.Data}
	if cfg.DB != "" {
		args = append(args, "--db", cfg.DB)
	}
	return args
}

func (s *ferryService) start() {
	s.t.Helper()
	p := s.launch()
	client := &http.Client{Timeout: time.Second}
	var last error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if p.exited() {
			s.t.Fatalf("ferry server exited before serving: %v\n%s", p.err, s.log)
		}
		resp, err := client.Get(s.URL() + "/healthz")
		if err != nil {
			last = err
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		last = fmt.Errorf("/healthz: %s", resp.Status)
	}
	s.t.Fatalf("ferry server on %s not healthy within 20s: %v\n%s", s.addr, last, s.log)
}

// URL is the service's base URL, as FERRY_URL takes it.
func (s *ferryService) URL() string { return "http://" + s.addr }

// restart starts the server again with the same data, port and flags.
func (s *ferryService) restart() { s.t.Helper(); s.start() }

func (s *ferryService) stop() { s.child.stop(15 * time.Second) }

// addUser runs `ferry user add` against the service's database.
func (s *ferryService) addUser(name, password, email string) {
	s.t.Helper()
	args := append([]string{"user", "add", name}, storeArgs(s.cfg)...)
	if email != "" {
		args = append(args, "--email", email)
	}
	if r := runFerryCLI(s.t, time.Minute, nil, password+"\n", args...); r.code != 0 {
		s.t.Fatalf("ferry user add failed:\n%s", r)
	}
}

// claimedBy reports whether the server's log since offset from says it
// claimed task id.
func (s *ferryService) claimedBy(id string, from int) bool {
	for _, line := range strings.Split(string(s.log.Bytes()[from:]), "\n") {
		if strings.Contains(line, `msg="task claimed"`) && strings.Contains(line, "task="+id) {
			return true
		}
	}
	return false
}

// tookBack reports whether the server's log since offset from says it
// took task id back after a restart.
func (s *ferryService) tookBack(id string, from int) bool {
	return strings.Contains(string(s.log.Bytes()[from:]), `msg="task taken back after a restart" task=`+id)
}

// serviceCLI runs the CLI as one user: its own XDG_CONFIG_HOME holds the
// saved login, FERRY_URL names the service.
type serviceCLI struct {
	t    *testing.T
	home string
	url  string
}

const servicePassword = "s3rvice pw"

// newServiceUser adds user alice (with email, if given) to svc's database
// and logs the CLI in as her.
func newServiceUser(t *testing.T, svc *ferryService, email string) *serviceCLI {
	t.Helper()
	svc.addUser("alice", servicePassword, email)
	c := &serviceCLI{t: t, home: t.TempDir()}
	c.login(svc)
	return c
}

// login logs in to svc with ferry login and makes it the service of the
// commands that follow.
func (c *serviceCLI) login(svc *ferryService) {
	c.t.Helper()
	c.url = svc.URL()
	c.ok(servicePassword+"\n", "login", "--username", "alice")
}

func (c *serviceCLI) env() []string {
	env := slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, "FERRY_") || strings.HasPrefix(e, "XDG_CONFIG_HOME=")
	})
	return append(env, "XDG_CONFIG_HOME="+c.home, "FERRY_URL="+c.url)
}

// run runs the CLI; a run over a minute fails the test.
func (c *serviceCLI) run(stdin string, args ...string) cliRun {
	c.t.Helper()
	return runFerryCLI(c.t, time.Minute, c.env(), stdin, args...)
}

// ok runs the CLI and fails the test unless it exits 0.
func (c *serviceCLI) ok(stdin string, args ...string) string {
	c.t.Helper()
	r := c.run(stdin, args...)
	if r.code != 0 {
		c.t.Fatalf("CLI failed:\n%s", r)
	}
	return r.stdout
}

// decode runs the CLI with -F json and decodes its output into v.
func (c *serviceCLI) decode(v any, args ...string) {
	c.t.Helper()
	out := c.ok("", append(args, "-F", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("ferry %s -F json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// addEndpoint creates endpoint name served by srv.
func (c *serviceCLI) addEndpoint(name string, srv server, flags ...string) {
	c.t.Helper()
	c.ok("", append([]string{"endpoint", "add", name, "--server", "ftp://" + srv.Addr()}, flags...)...)
}

// transfer submits a transfer and returns the task ID it printed.
func (c *serviceCLI) transfer(args ...string) string {
	c.t.Helper()
	id := strings.TrimSpace(c.ok("", append([]string{"transfer"}, args...)...))
	if id == "" || strings.ContainsAny(id, " \n") {
		c.t.Fatalf("ferry transfer printed %q, want a task ID", id)
	}
	return id
}

func (c *serviceCLI) task(id string) api.Task {
	c.t.Helper()
	var t api.Task
	c.decode(&t, "task", "show", id)
	return t
}

// recorded is the task's successful transfers so far, by source path.
func (c *serviceCLI) recorded(id string) map[string]api.SuccessfulTransfer {
	c.t.Helper()
	var l api.SuccessfulTransfers
	c.decode(&l, "task", "show", id, "-t")
	m := map[string]api.SuccessfulTransfer{}
	for _, f := range l.Data {
		m[f.SourcePath] = f
	}
	return m
}

// events is the task's event list as ferry task events prints it.
func (c *serviceCLI) events(id string) string {
	c.t.Helper()
	return c.run("", "task", "events", id).stdout
}

// waitFor polls the task until cond holds, failing the test when it ends
// otherwise or within passes first.
func (c *serviceCLI) waitFor(id, what string, within time.Duration, cond func(api.Task) bool) api.Task {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		t := c.task(id)
		switch {
		case cond(t):
			return t
		case domain.Done(t.Status):
			c.t.Fatalf("task %s ended %s (%s) before %s; events:\n%s", id, t.Status, fatalText(t), what, c.events(id))
		case time.Now().After(deadline):
			c.t.Fatalf("task %s is %s %s, not %s after %v; events:\n%s", id, t.Status, t.NiceStatus, what, within, c.events(id))
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// wait runs ferry task wait and returns the task as it ended; a task
// still running after within fails the test.
func (c *serviceCLI) wait(id string, within time.Duration) api.Task {
	c.t.Helper()
	r := c.run("", "task", "wait", id, "--timeout", within.String(), "-F", "json")
	var t api.Task
	if err := json.Unmarshal([]byte(r.stdout), &t); err != nil || !domain.Done(t.Status) {
		c.t.Fatalf("ferry task wait: %v\n%s\nevents:\n%s", err, r, c.events(id))
	}
	if (r.code == 0) != (t.Status == domain.StatusSucceeded) {
		c.t.Errorf("ferry task wait exited %d for a %s task", r.code, t.Status)
	}
	return t
}

// succeeded waits for the task and fails the test unless it SUCCEEDED
// with every file transferred.
func (c *serviceCLI) succeeded(id string, within time.Duration) api.Task {
	c.t.Helper()
	t := c.wait(id, within)
	if t.Status != domain.StatusSucceeded || t.SubtasksFailed != 0 || t.FilesTransferred+t.FilesSkipped != t.Files {
		c.t.Fatalf("task %s ended %s (%s): %d files, %d transferred, %d skipped, %d failed; events:\n%s",
			id, t.Status, fatalText(t), t.Files, t.FilesTransferred, t.FilesSkipped, t.SubtasksFailed, c.events(id))
	}
	return t
}

func fatalText(t api.Task) string {
	if t.FatalError == nil {
		return t.NiceStatus
	}
	return t.FatalError.Code + ": " + t.FatalError.Description
}

// throttle slows a ferry gridftp server down by letting it run for `run`
// of every `period` (SIGCONT, SIGSTOP of its process group): ferry moves a
// hundred MiB over loopback in a fraction of a second, too fast to stop a
// task midway otherwise. There is no rate limit to set instead.
type throttle struct {
	srv   signaler
	quit  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	ended bool
}

// startThrottle starts throttling srv until freeze or release (release
// runs at cleanup, before srv stops).
func startThrottle(t *testing.T, srv signaler, run, period time.Duration) *throttle {
	th := &throttle{srv: srv, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(th.done)
		for {
			for _, step := range []struct {
				sig syscall.Signal
				d   time.Duration
			}{{syscall.SIGCONT, run}, {syscall.SIGSTOP, period - run}} {
				srv.signal(step.sig)
				select {
				case <-th.quit:
					return
				case <-time.After(step.d):
				}
			}
		}
	}()
	t.Cleanup(th.release)
	return th
}

// end stops the cycle and leaves the server stopped or running.
func (th *throttle) end(sig syscall.Signal) {
	th.mu.Lock()
	defer th.mu.Unlock()
	if !th.ended {
		th.ended = true
		close(th.quit)
		<-th.done
	}
	th.srv.signal(sig)
}

// freeze stops the cycle with the server stopped: nothing it serves moves.
func (th *throttle) freeze() { th.end(syscall.SIGSTOP) }

// release stops the cycle and lets the server run at full speed.
func (th *throttle) release() { th.end(syscall.SIGCONT) }

// retrieved counts the RETR and ERET commands per path in the debug log
// of a ferry gridftp server: each is a file (or part of one) sent.
func retrieved(t *testing.T, log []byte) map[string]int { return commands(t, log, "RETR", "ERET", 4) }

// stored counts the STOR and ESTO commands per path: a file (or part of
// one) received.
func stored(t *testing.T, log []byte) map[string]int { return commands(t, log, "STOR", "ESTO", 3) }

// commands counts, per path, the commands whole and part in the debug log
// of a ferry gridftp server; part's path is its fields'th field ("ERET P
// OFFSET LENGTH PATH": 4). The argument is quoted when it holds blanks.
func commands(t *testing.T, log []byte, whole, part string, fields int) map[string]int {
	t.Helper()
	re := regexp.MustCompile(`msg=command .*verb=(` + whole + `|` + part + `) arg=("(?:[^"\\]|\\.)*"|\S+)`)
	n := map[string]int{}
	for _, m := range re.FindAllSubmatch(log, -1) {
		arg := string(m[2])
		if strings.HasPrefix(arg, `"`) {
			var err error
			if arg, err = strconv.Unquote(arg); err != nil {
				t.Fatalf("log line %q: %v", m[0], err)
			}
		}
		if string(m[1]) == part {
			if f := strings.SplitN(arg, " ", fields); len(f) == fields {
				arg = f[fields-1]
			}
		}
		n[arg]++
	}
	return n
}

// fileID is what tells whether a file was written again: a file sent
// again gets a new inode or a new modification and change time.
type fileID struct {
	ino          uint64
	size         int64
	mtime, ctime syscall.Timespec
}

// fileIDs stats the files rels (slash-separated, relative to root).
func fileIDs(t *testing.T, root string, rels []string) map[string]fileID {
	t.Helper()
	m := map[string]fileID{}
	for _, rel := range rels {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(root, filepath.FromSlash(rel)), &st); err != nil {
			t.Fatal(err)
		}
		m[rel] = fileID{st.Ino, st.Size, st.Mtim, st.Ctim}
	}
	return m
}

// doneBefore is what a test knows of a task at the moment its run was
// stopped (server killed, credential expired): the files recorded done,
// those whole at the destination without a record yet, their destination
// copies, and how far the source's log went.
type doneBefore struct {
	paths  []string          // source paths, which are also the destination paths
	whole  []string          // not recorded, but their copies are complete
	ids    map[string]fileID // of the destination copies of both
	logEnd int               // length of the source server's log
}

// snapshotDone records what the task has recorded done so far and, when
// tree names the source directory of the transfer, which files of it are
// whole at the destination without a record.
func snapshotDone(t *testing.T, c *serviceCLI, id string, src, dst *ferryServer, tree string) doneBefore {
	t.Helper()
	rec := c.recorded(id)
	d := doneBefore{paths: sortedKeys(rec)}
	for _, p := range d.paths {
		if f := rec[p]; f.DestinationPath != p {
			t.Fatalf("recorded %s -> %s; the test expects the same path at both ends", p, f.DestinationPath)
		}
	}
	if tree != "" {
		filepath.WalkDir(src.Path(tree), func(p string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(src.Root(), p)
			rel = "/" + filepath.ToSlash(rel)
			if _, ok := rec[rel]; ok {
				return nil
			}
			a, _ := os.ReadFile(p)
			b, err := os.ReadFile(dst.Path(rel))
			if err == nil && bytes.Equal(a, b) {
				d.whole = append(d.whole, rel)
			}
			return nil
		})
	}
	d.ids = fileIDs(t, dst.Root(), append(slices.Clone(d.paths), d.whole...))
	return d
}

// checkNotResent fails the test if a file recorded done before was sent
// again: RETRieved from the source after logEnd, or its copy rewritten.
func checkNotResent(t *testing.T, d doneBefore, src, dst *ferryServer) {
	t.Helper()
	again := retrieved(t, src.log.Bytes()[d.logEnd:])
	after := fileIDs(t, dst.Root(), append(slices.Clone(d.paths), d.whole...))
	bad := 0
	for _, set := range []struct {
		what  string
		paths []string
	}{{"was recorded done", d.paths}, {"was whole at the destination", d.whole}} {
		for _, p := range set.paths {
			if n := again[p]; n > 0 {
				t.Errorf("%s %s, then retrieved %d more times", p, set.what, n)
				bad++
			}
			if after[p] != d.ids[p] {
				t.Errorf("%s %s, then its copy was written again: %+v, was %+v", p, set.what, after[p], d.ids[p])
				bad++
			}
			if bad > 10 {
				t.Fatal("more files were sent again; giving up the list")
			}
		}
	}
	sent := 0
	for _, n := range again {
		sent += n
	}
	t.Logf("%d files recorded done and %d more whole before the stop, none sent again; %d RETR/ERET after it",
		len(d.paths), len(d.whole), sent)
}

// makeServiceTree fills dir with n files of 64 to 256 KiB and big files of
// 20 MiB, and returns the number of files.
func makeServiceTree(t *testing.T, dir string, n, big int) int {
	t.Helper()
	makeRandomFiles(t, dir, "f-%04d.dat", n, 64<<10, 256<<10)
	for i := range big {
		writeRandomFile(t, filepath.Join(dir, fmt.Sprintf("big-%d.dat", i)), 20<<20)
	}
	return n + big
}

// killFixture is a slow transfer to kill a server in the middle of: a
// source ferry gridftp (debug log, to count RETRs) and a destination one,
// both on the disk, and the task between them.
type killFixture struct {
	src, dst *ferryServer
	th       *throttle
	files    int
}

func newKillFixture(t *testing.T) *killFixture {
	t.Helper()
	root := t.TempDir()
	f := &killFixture{files: makeServiceTree(t, filepath.Join(root, "tree"), 400, 2)}
	f.src = startFerryConfig(t, ferryConfig{Root: root, Anonymous: true, Args: []string{"--log-level", "debug"}})
	f.dst = startFerryConfig(t, ferryConfig{Anonymous: true})
	return f
}

// submit creates the endpoints, throttles the source and submits the
// transfer of the tree.
func (f *killFixture) submit(t *testing.T, c *serviceCLI) string {
	t.Helper()
	c.addEndpoint("src", f.src)
	c.addEndpoint("dst", f.dst)
	f.th = startThrottle(t, f.src, time.Millisecond, 40*time.Millisecond)
	return c.transfer("src:/tree", "dst:/tree", "-r", "--label", "kill -9")
}

// midway waits until the task has recorded some files done, freezes the
// source so that nothing more moves, and checks that the task is midway.
func (f *killFixture) midway(t *testing.T, c *serviceCLI, id string) {
	t.Helper()
	c.waitFor(id, "files recorded done", 30*time.Second, func(t api.Task) bool { return t.FilesTransferred > 0 })
	f.th.freeze()
	task := c.task(id)
	if task.Status != domain.StatusActive || task.FilesTransferred >= int64(f.files) {
		t.Fatalf("task %s %s with %d of %d files transferred: not midway", id, task.Status, task.FilesTransferred, f.files)
	}
	t.Logf("midway: %d of %d files recorded done, %d bytes", task.FilesTransferred, f.files, task.BytesTransferred)
}

// finish checks the task's end: SUCCEEDED, every file identical, nothing
// recorded done before the kill sent again.
func (f *killFixture) finish(t *testing.T, c *serviceCLI, id string, d doneBefore) {
	t.Helper()
	task := c.succeeded(id, time.Minute)
	if task.Files != int64(f.files) {
		t.Errorf("task counts %d files, want %d", task.Files, f.files)
	}
	if err := compareTrees(f.src.Path("tree"), f.dst.Path("tree")); err != nil {
		t.Fatal(err)
	}
	checkNotResent(t, d, f.src, f.dst)
	// The tree's small files moved as tar streams: the resume above is
	// that of members, reported one by one as they were unpacked.
	if ev := c.events(id); !strings.Contains(ev, "they move as tar streams") {
		t.Errorf("no tar streams in the task's events:\n%s", ev)
	}
}

// TestServiceKill9PostgreSQL: two ferry server processes on one PostgreSQL;
// the one running a transfer is killed with SIGKILL; the other claims the
// task once its lease lapses and finishes it from the persisted progress.
func TestServiceKill9PostgreSQL(t *testing.T) {
	needFerry(t)
	dsn := pgtest.DSN(t)
	key := filepath.Join(t.TempDir(), "secret.key")
	f := newKillFixture(t)
	a := startService(t, serviceConfig{DB: dsn, KeyFile: key, WorkerID: "server-a"})
	c := newServiceUser(t, a, "")
	id := f.submit(t, c)
	f.midway(t, c, id)
	if !a.claimedBy(id, 0) {
		t.Fatalf("server A did not log claiming task %s", id)
	}
	// Only now the second process: the task is A's for sure.
	b := startService(t, serviceConfig{DB: dsn, KeyFile: key, WorkerID: "server-b"})
	d := snapshotDone(t, c, id, f.src, f.dst, "tree")
	a.kill9()
	d.logEnd = len(f.src.log.Bytes())
	f.th.release()
	c.login(b)
	f.finish(t, c, id, d)
	if !b.claimedBy(id, 0) {
		t.Errorf("server B did not log claiming task %s", id)
	}
}

// TestServiceKill9SQLite: one ferry server on SQLite, killed with SIGKILL
// mid-transfer and started again on the same data: with a lease of a
// minute, it takes the task back at once (its own lease) and finishes it
// without sending again what was done or whole at the destination.
func TestServiceKill9SQLite(t *testing.T) {
	needFerry(t)
	f := newKillFixture(t)
	s := startService(t, serviceConfig{Lease: time.Minute})
	c := newServiceUser(t, s, "")
	id := f.submit(t, c)
	f.midway(t, c, id)
	d := snapshotDone(t, c, id, f.src, f.dst, "tree")
	s.kill9()
	d.logEnd = len(f.src.log.Bytes())
	restarted := len(s.log.Bytes())
	f.th.release()
	s.restart()
	back := time.Now()
	for !s.claimedBy(id, restarted) && !s.tookBack(id, restarted) {
		if time.Since(back) > 2*time.Second {
			t.Fatalf("the restarted server did not take task %s back within 2 s", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("task taken back %v after the server answered again", time.Since(back).Round(time.Millisecond))
	f.finish(t, c, id, d)
}

// TestServiceGCT: transfers through the service between ferry gridftp and
// the GCT server, both ways, with checksums verified.
func TestServiceGCT(t *testing.T) {
	needTools(t)
	src := startFerryConfig(t, ferryConfig{Anonymous: true})
	makeTree(t, src.Path("tree"))
	makeServiceTree(t, src.Path("tree/many"), 40, 1)
	gct := startGCTServer(t)
	dst := startFerryConfig(t, ferryConfig{Anonymous: true})
	s := startService(t, serviceConfig{})
	c := newServiceUser(t, s, "")
	c.addEndpoint("ferry-src", src)
	c.addEndpoint("gct", gct)
	c.addEndpoint("ferry-dst", dst)

	// GCT's data channels cannot take ferry's credential: encryption is
	// refused when the transfer is submitted.
	if r := c.run("", "transfer", "ferry-src:/tree", "gct:"+epPath(gct, "enc"), "-r", "--encrypt-data"); r.code != 1 ||
		!strings.Contains(r.stderr, "cannot encrypt their data channels") {
		t.Errorf("an encrypted transfer to GCT: %s", r)
	}

	for _, leg := range []struct{ from, to string }{
		{"ferry-src:/tree", "gct:" + epPath(gct, "tree")},
		{"gct:" + epPath(gct, "tree"), "ferry-dst:/tree"},
	} {
		id := c.transfer(leg.from, leg.to, "-r", "--verify-checksum")
		task := c.succeeded(id, time.Minute)
		if !task.VerifyChecksum || task.BytesChecksummed == 0 {
			t.Errorf("%s -> %s: verify_checksum %v, %d bytes checksummed", leg.from, leg.to, task.VerifyChecksum, task.BytesChecksummed)
		}
		t.Logf("%s -> %s: %d files, %d bytes", leg.from, leg.to, task.FilesTransferred, task.BytesTransferred)
	}
	if err := compareTrees(src.Path("tree"), gct.Path("tree")); err != nil {
		t.Errorf("ferry -> GCT: %v", err)
	}
	if err := compareTrees(src.Path("tree"), dst.Path("tree")); err != nil {
		t.Errorf("GCT -> ferry: %v", err)
	}
}

// TestServiceActivation: a password endpoint. A task submitted before
// activation waits INACTIVE (NOT_ACTIVATED); a wrong password is refused
// in one line; the right one with a short lifetime runs the task until the
// credential expires (INACTIVE, CREDENTIAL_EXPIRED); activating again
// resumes it, and it SUCCEEDS without sending again what was done.
func TestServiceActivation(t *testing.T) {
	needFerry(t)
	// bcrypt's lowest cost: at ferry passwd's (12) the logins of a task's
	// sessions take seconds of this machine's two cores.
	pwfile := filepath.Join(t.TempDir(), "passwd")
	if err := passwd.Set(pwfile, "bob", "bob-secret", bcrypt.MinCost); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	files := makeServiceTree(t, filepath.Join(root, "tree"), 300, 0)
	src := startFerryConfig(t, ferryConfig{Root: root, Args: []string{"--password-file", pwfile, "--log-level", "debug"}})
	dst := startFerryConfig(t, ferryConfig{Anonymous: true})
	s := startService(t, serviceConfig{})
	c := newServiceUser(t, s, "")
	c.addEndpoint("src", src, "--auth", "password")
	c.addEndpoint("dst", dst)

	id := c.transfer("src:/tree", "dst:/tree", "-r")
	c.waitFor(id, "INACTIVE (NOT_ACTIVATED)", 30*time.Second, func(t api.Task) bool {
		return t.Status == domain.StatusInactive && t.NiceStatus == domain.NiceNotActivated
	})

	r := c.run("wrong\n", "endpoint", "activate", "src", "--username", "bob")
	if r.code == 0 || !strings.HasPrefix(r.stderr, "ferry: ") || strings.Count(r.stderr, "\n") != 1 ||
		!strings.Contains(r.stderr, "refused") {
		t.Fatalf("activate with a wrong password: want one line on stderr saying it was refused, and a failure:\n%s", r)
	}
	t.Logf("wrong password: exit %d: %s", r.code, strings.TrimSpace(r.stderr))

	// Slow the destination, not the source: bcrypt checks of bob's password
	// would take seconds on a throttled source.
	th := startThrottle(t, dst, time.Millisecond, 40*time.Millisecond)
	out := c.ok("bob-secret\n", "endpoint", "activate", "src", "--username", "bob", "--lifetime", "3s")
	if !strings.Contains(out, "1 waiting task resumed") {
		t.Errorf("activate: %q; want it to say the task resumed", out)
	}
	// Some files done, then nothing moves until the credential expires.
	c.waitFor(id, "files recorded done", 30*time.Second, func(t api.Task) bool { return t.FilesTransferred > 0 })
	th.freeze()
	task := c.waitFor(id, "INACTIVE (CREDENTIAL_EXPIRED)", 30*time.Second, func(t api.Task) bool {
		return t.Status == domain.StatusInactive && t.NiceStatus == domain.NiceCredentialExpired
	})
	if task.FilesTransferred == 0 || task.FilesTransferred >= int64(files) {
		t.Fatalf("the credential expired with %d of %d files transferred: want it midway", task.FilesTransferred, files)
	}
	t.Logf("credential expired with %d of %d files transferred", task.FilesTransferred, files)
	if ev := c.events(id); !strings.Contains(ev, "expired") {
		t.Errorf("no event says the credential expired:\n%s", ev)
	}
	// The paused run persisted everything before the task turned INACTIVE.
	d := snapshotDone(t, c, id, nil, dst, "")
	d.logEnd = len(src.log.Bytes())
	if int64(len(d.paths)) != task.FilesTransferred {
		t.Errorf("%d successful transfers recorded, the task counts %d", len(d.paths), task.FilesTransferred)
	}
	th.release()

	out = c.ok("bob-secret\n", "endpoint", "activate", "src", "--username", "bob")
	if !strings.Contains(out, "1 waiting task resumed") {
		t.Errorf("activate again: %q; want it to say the task resumed", out)
	}
	c.succeeded(id, time.Minute)
	if err := compareTrees(src.Path("tree"), dst.Path("tree")); err != nil {
		t.Fatal(err)
	}
	checkNotResent(t, d, src, dst)
}

// webhookSink is an HTTP server that keeps the notifications it receives.
type webhookSink struct {
	*httptest.Server
	mu   sync.Mutex
	got  []notify.Payload
	errs []error
}

func startWebhookSink(t *testing.T, secret string) *webhookSink {
	w := &webhookSink{}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var p notify.Payload
		switch {
		case err != nil:
		case r.Method != http.MethodPost:
			err = fmt.Errorf("method %s", r.Method)
		case r.Header.Get(notify.SignatureHeader) != notify.Sign(secret, body):
			err = fmt.Errorf("signature %q does not match the body", r.Header.Get(notify.SignatureHeader))
		default:
			err = json.Unmarshal(body, &p)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			w.errs = append(w.errs, err)
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		w.got = append(w.got, p)
	}))
	t.Cleanup(w.Close)
	return w
}

// posts is what the webhook received about task id.
func (w *webhookSink) posts(id string) []notify.Payload {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []notify.Payload
	for _, p := range w.got {
		if p.TaskID == id {
			out = append(out, p)
		}
	}
	return out
}

// mailMessage is an e-mail as the test reads it.
type mailMessage struct {
	header  mail.Header
	subject string
	body    string
}

// mailbox reads every message aiosmtpd delivered to maildir.
func mailbox(t *testing.T, maildir string) []mailMessage {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(maildir, "new", "*"))
	var out []mailMessage
	for _, n := range names {
		m, err := mail.ReadMessage(bytes.NewReader(readFile(t, n)))
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(quotedprintable.NewReader(m.Body))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, mailMessage{m.Header, subject, string(body)})
	}
	return out
}

// TestServiceNotifications: a task that succeeds and one that fails each
// send one e-mail (to a real SMTP server, aiosmtpd) and one signed webhook
// POST saying how they ended.
func TestServiceNotifications(t *testing.T) {
	needFerry(t)
	smtpAddr, maildir := smtptest.Start(t)
	const secret = "hook-secret"
	hook := startWebhookSink(t, secret)
	src := startFerryConfig(t, ferryConfig{Anonymous: true})
	writeRandomFile(t, src.Path("data/one.dat"), 100<<10)
	dst := startFerryConfig(t, ferryConfig{Anonymous: true})
	s := startService(t, serviceConfig{Args: []string{"--smtp", smtpAddr, "--webhook", hook.URL, "--webhook-secret", secret}})
	c := newServiceUser(t, s, "Alice <alice@example.org>")
	c.addEndpoint("src", src)
	c.addEndpoint("dst", dst)

	ok := c.transfer("src:/data/one.dat", "dst:/data/one.dat", "--label", "good one")
	c.succeeded(ok, time.Minute)
	src.stop() // the next task's source is down until its deadline
	bad := c.transfer("src:/data/one.dat", "dst:/data/two.dat", "--label", "bad one", "--deadline", "3s")
	if task := c.wait(bad, time.Minute); task.Status != domain.StatusFailed {
		t.Fatalf("the task of an endpoint that is down ended %s, want FAILED", task.Status)
	}

	for _, want := range []struct{ id, label, status string }{{ok, "good one", "SUCCEEDED"}, {bad, "bad one", "FAILED"}} {
		// Notifications go out after the task ends: wait for them.
		var mails []mailMessage
		var posts []notify.Payload
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			mails = slices.DeleteFunc(mailbox(t, maildir), func(m mailMessage) bool { return !strings.Contains(m.body, want.id) })
			posts = hook.posts(want.id)
			if len(mails) > 0 && len(posts) > 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(mails) != 1 {
			t.Errorf("task %s: %d e-mails, want 1", want.status, len(mails))
		}
		for _, m := range mails {
			if rcpt := m.header.Get("X-RcptTo"); rcpt != "alice@example.org" {
				t.Errorf("e-mail delivered to %q, want alice@example.org", rcpt)
			}
			if wantSubject := "ferry: task " + want.label + " " + want.status; m.subject != wantSubject {
				t.Errorf("subject %q, want %q", m.subject, wantSubject)
			}
			if line := fmt.Sprintf("Task %s is %s.", want.id, want.status); !strings.Contains(m.body, line) {
				t.Errorf("e-mail body lacks %q:\n%s", line, m.body)
			}
			if want.status == "FAILED" && !strings.Contains(m.body, "CONNECT_FAILED") {
				t.Errorf("the e-mail of the failed task does not say why:\n%s", m.body)
			}
		}
		if len(posts) != 1 {
			t.Errorf("task %s: %d webhook posts, want 1: %+v", want.status, len(posts), posts)
		}
		for _, p := range posts {
			if p.Status != want.status || p.User != "alice" || p.Label != want.label || p.CompletionTime == nil {
				t.Errorf("webhook payload %+v; want status %s, user alice, label %q, a completion time", p, want.status, want.label)
			}
			if want.status == "FAILED" && (p.FatalError == nil || p.FatalError.Code != "CONNECT_FAILED") {
				t.Errorf("webhook payload of the failed task: fatal error %+v, want CONNECT_FAILED", p.FatalError)
			}
			if want.status == "SUCCEEDED" && (p.FilesTransferred != 1 || p.BytesTransferred != 100<<10) {
				t.Errorf("webhook payload: %d files, %d bytes transferred; want 1 file, %d bytes", p.FilesTransferred, p.BytesTransferred, 100<<10)
			}
		}
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if len(hook.errs) > 0 {
		t.Errorf("bad webhook requests: %v", hook.errs)
	}
	if len(hook.got) != 2 {
		t.Errorf("%d webhook posts in all, want 2", len(hook.got))
	}
}
