// Package pgtest gives tests throwaway PostgreSQL databases: one cluster
// per test binary, started on 127.0.0.1 from the PostgreSQL programs
// installed on the machine (Debian: /usr/lib/postgresql/<version>/bin),
// and one fresh database per test. FERRY_DSN_POSTGRES (a postgres:// URL)
// names a server to use instead. The tests run only with the interop build
// tag, as the other tests that need the peers do (interoptest); without
// PostgreSQL they skip, unless FERRY_INTEROP=required (set by .ci/run),
// when they fail.
//
// A package that uses it runs its tests through Main:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// or, when TestMain has more to do after the tests, calls Run.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"

	"ferry/internal/interoptest"
)

// server is the one PostgreSQL server of the test binary.
var server struct {
	main  bool // Main runs the tests
	once  sync.Once
	skip  string   // why there is no server to use
	err   error    // why the server did not start
	base  *url.URL // DSN of its maintenance database
	admin *sql.DB  // connected to base, for CREATE and DROP DATABASE
	dir   string   // the throwaway cluster's directory; "" for FERRY_DSN_POSTGRES
	pg    *exec.Cmd
	exit  chan error // the postgres process's exit
}

// Main runs the tests, then stops the cluster and removes its files.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain with more to do: it runs the tests, stops
// the cluster, removes its files and returns the exit code for os.Exit.
func Run(m *testing.M) int {
	server.main = true
	code := m.Run()
	if server.admin != nil {
		server.admin.Close()
	}
	if server.pg != nil {
		stop()
	}
	if server.dir != "" {
		os.RemoveAll(server.dir)
	}
	return code
}

// DSN returns the postgres:// URL of a new, empty database, dropped when
// t ends.
func DSN(t testing.TB) string {
	t.Helper()
	interoptest.Need(t)
	if !server.main {
		t.Fatal("pgtest: the package's TestMain must call pgtest.Main or pgtest.Run")
	}
	server.once.Do(start)
	switch {
	case server.skip != "":
		interoptest.Missing(t, server.skip)
	case server.err != nil:
		t.Fatalf("pgtest: %v", server.err)
	}
	var b [6]byte
	rand.Read(b[:])
	name := "ferry_test_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := server.admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if _, err := server.admin.ExecContext(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	u := *server.base
	u.Path = "/" + name
	return u.String()
}

// start finds the server to use, starting a cluster if need be.
func start() {
	if dsn := os.Getenv("FERRY_DSN_POSTGRES"); dsn != "" {
		u, err := url.Parse(dsn)
		if err == nil {
			server.base = u
			server.err = connect()
		} else {
			server.err = fmt.Errorf("FERRY_DSN_POSTGRES: %w", err)
		}
		return
	}
	bin := binDir()
	if bin == "" {
		server.skip = "PostgreSQL is not installed (Debian: apt-get install postgresql; `bash .ci/run` installs it), " +
			"and FERRY_DSN_POSTGRES is not set"
		return
	}
	if server.err = startCluster(bin); server.err != nil {
		return
	}
	server.err = connect()
}

// binDir is the directory of the newest installed initdb and postgres.
func binDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d
		}
	}
	return ""
}

// startCluster creates a cluster in a temporary directory and starts
// postgres on a free port of 127.0.0.1, as an unprivileged user when the
// tests run as root (initdb refuses root).
func startCluster(bin string) error {
	dir, err := os.MkdirTemp("", "ferry-pgtest-")
	if err != nil {
		return err
	}
	server.dir = dir
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGQUIT} // no postgres outlives a killed test binary
	if os.Geteuid() == 0 {
		cred, err := unprivileged()
		if err != nil {
			return err
		}
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
		attr.Credential = cred
	}
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir, cmd.SysProcAttr = dir, attr
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		return cmd
	}
	data := filepath.Join(dir, "data")
	if out, err := command("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync").CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	// Durability is of no use to a throwaway cluster.
	server.pg = command("postgres", "-D", data, "-k", dir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300", "-F",
		"-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	server.pg.Stdout, server.pg.Stderr = logf, logf
	if err := server.pg.Start(); err != nil {
		server.pg = nil
		return err
	}
	server.exit = make(chan error, 1)
	go func() { server.exit <- server.pg.Wait() }()
	server.base = &url.URL{Scheme: "postgres", User: url.User("postgres"), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Path: "/postgres", RawQuery: "sslmode=disable"}
	return nil
}

// unprivileged is the user postgres (or nobody) to run the cluster as.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root, and there is no user postgres or nobody to run PostgreSQL as")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// connect opens the admin connection, waiting up to 30 s for the server.
func connect() error {
	db, err := sql.Open("pgx", server.base.String())
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			server.admin = db
			return nil
		}
		select {
		case exit := <-server.exit: // never ready without a cluster of ours
			db.Close()
			return fmt.Errorf("postgres exited (%v):\n%s", exit, logTail())
		default:
		}
		if time.Now().After(deadline) {
			db.Close()
			return fmt.Errorf("postgres at %s: %w\n%s", server.base.Host, err, logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logTail is the end of the cluster's log, for error messages.
func logTail() string {
	b, _ := os.ReadFile(filepath.Join(server.dir, "postgres.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return strings.TrimSpace(string(b))
}

// stop shuts the cluster down (fast shutdown), killing it after 10 s.
func stop() {
	server.pg.Process.Signal(syscall.SIGINT)
	select {
	case <-server.exit:
	case <-time.After(10 * time.Second):
		server.pg.Process.Kill()
		<-server.exit
	}
}
