package popen

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ferry/stack"
	"ferry/storage"
	"ferry/storage/posix"
)

func TestParseWhitelist(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []Program // nil: an error
	}{
		{"/bin/tar", []Program{{Path: "/bin/tar"}}},
		{"tar:/bin/tar,/usr/bin/md5sum", []Program{{Alias: "tar", Path: "/bin/tar"}, {Path: "/usr/bin/md5sum"}}},
		{"tar:bin/tar", nil},
		{"tar", nil},
		{"/bin/tar,", nil},
		{"", nil},
		{":/bin/tar", nil},
		{"tar:", nil},
	} {
		got, err := ParseWhitelist(tt.in)
		switch {
		case tt.want == nil && err == nil:
			t.Errorf("%q: %v, want an error", tt.in, got)
		case tt.want != nil && err != nil:
			t.Errorf("%q: %v", tt.in, err)
		case tt.want != nil && !equal(got, tt.want):
			t.Errorf("%q: %v, want %v", tt.in, got, tt.want)
		}
	}
}

func equal(a, b []Program) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Alias != b[i].Alias || a[i].Path != b[i].Path || a[i].Args != nil || b[i].Args != nil {
			return false
		}
	}
	return true
}

// anyArgs lets the test programs take any arguments.
var anyArgs = pattern{{kind: "{any}", max: -1}}

var testWhitelist = []Program{{"sh", "/bin/sh", anyArgs}, {"", "/usr/bin/env", nil}, {"gone", "/nonexistent/prog", nil}}

// sessionEnv is a session's Env for the tree dir, which it closes at
// cleanup.
func sessionEnv(t *testing.T, dir string, readOnly bool) stack.Env {
	t.Helper()
	fsys, err := posix.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return stack.Env{FS: fsys, Dir: dir, ReadOnly: readOnly}
}

// testDir is a temp dir that programs, run as nobody when the tests run
// as root, may write: t.TempDir's parent is 0700.
func testDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ferry-popen-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// build makes the stack spec with popen on offer to every session.
func build(t *testing.T, spec string, env []string, senv stack.Env) (*stack.Stack, error) {
	t.Helper()
	entries, err := stack.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return buildEntries(spec, entries, Config{Programs: testWhitelist, Env: env, Anonymous: true}, senv)
}

func buildEntries(spec string, entries []stack.Entry, c Config, senv stack.Env) (*stack.Stack, error) {
	reg := stack.Kinds()
	reg[Name] = Kind(c)
	return stack.Build(spec, entries, reg, senv)
}

// program builds a popen stack of argv, "#"-joined; unlike a stack sent
// by a client, its arguments may hold ";".
func program(t *testing.T, argv string, env []string, senv stack.Env) *stack.Stack {
	t.Helper()
	s, err := buildEntries(argv, []stack.Entry{{Name: Name, Opts: []stack.Option{{Key: "argv", Value: "#" + argv}}}}, Config{Programs: testWhitelist, Env: env, Anonymous: true}, senv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRefusals: what a client may not run is refused when it sets the
// stack, in GCT's words where GCT refuses it too.
func TestRefusals(t *testing.T) {
	senv := sessionEnv(t, testDir(t), false)
	for _, tt := range []struct {
		spec    string
		refusal string // "" when the stack builds
	}{
		{"popen:argv=#sh#-c#true", ""},
		{"popen:argv=#/bin/sh#-c#true,ordering", ""},
		{"popen:argv=#/usr/bin/env;blocking=true", ""},
		{"popen:argv=#/bin/ls", "Approving popen arguments failed.|program '/bin/ls' not whitelisted."},
		{"popen:argv=#env", "Approving popen arguments failed.|program 'env' not whitelisted."},
		{"popen:argv=#/bin/./sh", "Approving popen arguments failed.|program '/bin/./sh' not whitelisted."},
		{"popen:argv=#gone", "Approving popen arguments failed.|program '/nonexistent/prog' cannot be run: no such file or directory."},
		{"popen", "popen argv not supplied."},
		{"popen:argv=", "popen argv not supplied."},
		{"popen:argv=##x", "popen argv not supplied."},
		{"popen:argv=#sh;env=#A=1", "popen option env refused: programs get the server's environment."},
		{"popen:argv=#sh;pass_env=true", "popen option pass_env refused: programs get the server's environment."},
		{"popen:argv=#sh;ignore_errors=true", "popen option ignore_errors refused: a failing program fails its transfer."},
		{"popen:argv=#sh;shell=1", "popen has no option shell."},
		{"file,popen:argv=#sh", "popen must be the bottom of the stack."},
	} {
		_, err := build(t, tt.spec, nil, senv)
		var r *stack.Refusal
		switch {
		case tt.refusal == "" && err != nil:
			t.Errorf("%s: %v", tt.spec, err)
		case tt.refusal != "" && (!errors.As(err, &r) || strings.Join(r.Lines, "|") != tt.refusal):
			t.Errorf("%s: %v, want the refusal %q", tt.spec, err, tt.refusal)
		}
	}
	_, err := build(t, "popen:argv=#sh", nil, stack.Env{})
	var r *stack.Refusal
	if !errors.As(err, &r) {
		t.Errorf("popen without a local directory: %v", err)
	}

	// Anonymous and read-only sessions, unless the server lets them.
	spec := []stack.Entry{{Name: Name, Opts: []stack.Option{{Key: "argv", Value: "#sh"}}}}
	for _, tt := range []struct {
		anonymous, readOnly, allowed bool
	}{
		{true, false, false},
		{false, true, false},
		{true, true, false},
		{false, false, true},
		{true, true, true},
	} {
		senv := sessionEnv(t, t.TempDir(), tt.readOnly)
		senv.Anonymous = tt.anonymous
		_, err := buildEntries("sh", spec, Config{Programs: testWhitelist, Anonymous: tt.allowed && tt.anonymous}, senv)
		refused := errors.As(err, &r) && strings.Join(r.Lines, "|") == "popen is not offered to anonymous or read-only sessions."
		if want := !tt.allowed; refused != want || !refused && err != nil {
			t.Errorf("%+v: %v", tt, err)
		}
	}
}

// open builds a stack of argv (joined with "#") and opens it for reading.
func open(t *testing.T, ctx context.Context, argv string, env []string, dir string) *Source {
	t.Helper()
	src, err := program(t, argv, env, sessionEnv(t, dir, true)).Open(ctx, &stack.Transfer{Name: "/ignored"})
	if err != nil {
		t.Fatal(err)
	}
	return src.(*Source)
}

func create(t *testing.T, ctx context.Context, argv string, dir string) *Sink {
	t.Helper()
	sink, err := program(t, argv, nil, sessionEnv(t, dir, false)).Create(ctx, &stack.Transfer{Name: "/ignored"})
	if err != nil {
		t.Fatal(err)
	}
	return sink.(*Sink)
}

// TestRun: a program reads the transfer or writes it, in the served
// directory, with the environment the server gives and nothing else; one
// that fails shows its exit status and the start of its standard error.
func TestRun(t *testing.T) {
	ctx := context.Background()
	dir := testDir(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), 100_000)

	sink := create(t, ctx, "sh#-c#cat >out", dir)
	if _, err := io.Copy(sink, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "out")); !bytes.Equal(b, data) {
		t.Fatalf("the program got %d bytes, want %d", len(b), len(data))
	}

	var se *stack.ShownError
	for _, tt := range []struct {
		argv string
		env  []string
		out  string
		err  string // the shown error; "": none
	}{
		{"sh#-c#cat out", nil, string(data), ""},
		{"/usr/bin/env", nil, "", ""},
		{"/usr/bin/env", []string{"A=1", "PATH=/bin"}, "A=1\nPATH=/bin\n", ""},
		{"sh#-c#printf part; echo 'tar: x: Cannot open' >&2; exit 3", nil, "part", "popened program exited with an error (exit code: 3):\ntar: x: Cannot open"},
		{"sh#-c#exit 1", nil, "", "popened program exited with an error (exit code: 1)"},
		{"sh#-c#for i in $(seq 100); do echo line $i >&2; done; exit 2", nil, "",
			"popened program exited with an error (exit code: 2):\nline 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8\nline 9\nline 10"},
	} {
		src := open(t, ctx, tt.argv, tt.env, dir)
		out, err := io.ReadAll(src)
		if err != nil || string(out) != tt.out {
			t.Errorf("%s: read %.40q, %v; want %.40q", tt.argv, out, err, tt.out)
		}
		err = src.Close()
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.argv, err)
		case tt.err != "" && (!errors.As(err, &se) || se.Text != tt.err):
			t.Errorf("%s: %v, want the shown error %q", tt.argv, err, tt.err)
		}
	}

	// A program killed from outside (it leads its PID namespace: a signal
	// it sends itself is ignored).
	src := open(t, ctx, "sh#-c#echo up; exec sleep 1000", nil, dir)
	if _, err := io.ReadFull(src, make([]byte, 3)); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(src.cmd.Process.Pid, syscall.SIGKILL)
	io.Copy(io.Discard, src)
	if err := src.Close(); !errors.As(err, &se) || se.Text != "popened program was terminated by a signal (killed)" {
		t.Errorf("a killed program: %v", err)
	}

	// Standard error is kept up to stderrBytes.
	src = open(t, ctx, "sh#-c#head -c 1000000 /dev/zero | tr '\\0' x >&2; exit 1", nil, dir)
	io.Copy(io.Discard, src)
	if err := src.Close(); !errors.As(err, &se) || len(se.Text) > stderrBytes+100 || !strings.Contains(se.Text, "xxxx") {
		t.Errorf("a long standard error: %.100v", err)
	}
}

// TestSinkExitsEarly: a program that stops reading and fails fails the
// write with its exit status, not a broken pipe.
func TestSinkExitsEarly(t *testing.T) {
	sink := create(t, context.Background(), "sh#-c#echo 'bad input' >&2; exit 4", testDir(t))
	_, err := io.Copy(sink, bytes.NewReader(make([]byte, 4<<20)))
	var se *stack.ShownError
	if !errors.As(err, &se) || se.Text != "popened program exited with an error (exit code: 4):\nbad input" {
		t.Fatalf("write to a failed program: %v", err)
	}
	if err := stack.End(sink, err); !errors.As(err, &se) {
		t.Fatalf("End: %v", err)
	}
}

// TestReadOnly: a read-only session reads programs' output but feeds none.
func TestReadOnly(t *testing.T) {
	s, err := build(t, "popen:argv=#sh#-c#true", nil, sessionEnv(t, testDir(t), true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(context.Background(), &stack.Transfer{}); !errors.Is(err, storage.ErrPermission) {
		t.Fatalf("Create in a read-only session: %v", err)
	}
	src, err := s.Open(context.Background(), &stack.Transfer{})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
}

// hang is a program that neither reads nor writes, with a child of its
// own in its process group.
const hang = "sh#-c#sleep 1000; :"

// TestAbortKillsGroup: Abort, or the end of the transfer's context while
// a read or write waits on a hanging program, kills its whole process
// group and reaps it.
func TestAbortKillsGroup(t *testing.T) {
	dir := testDir(t)
	for _, tt := range []struct {
		name string
		run  func(t *testing.T, ctx context.Context, cancel context.CancelFunc) (*proc, io.Closer)
	}{
		{"Abort on a source", func(t *testing.T, ctx context.Context, _ context.CancelFunc) (*proc, io.Closer) {
			src := open(t, ctx, hang, nil, dir)
			waitChild(t, src.proc)
			src.Abort(errors.New("test"))
			return src.proc, src
		}},
		{"cancel during a read", func(t *testing.T, ctx context.Context, cancel context.CancelFunc) (*proc, io.Closer) {
			src := open(t, ctx, hang, nil, dir)
			waitChild(t, src.proc)
			time.AfterFunc(100*time.Millisecond, cancel)
			if n, err := src.Read(make([]byte, 10)); n != 0 || err != io.EOF {
				t.Errorf("read of a killed program: %d, %v", n, err)
			}
			return src.proc, src
		}},
		{"cancel during a write", func(t *testing.T, ctx context.Context, cancel context.CancelFunc) (*proc, io.Closer) {
			sink := create(t, ctx, hang, dir)
			waitChild(t, sink.proc)
			time.AfterFunc(100*time.Millisecond, cancel)
			if _, err := sink.Write(make([]byte, 1<<20)); err == nil {
				t.Error("a write to a killed program went through")
			}
			return sink.proc, sink
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pr, s := tt.run(t, ctx, cancel)
			pgid := pr.cmd.Process.Pid
			select {
			case <-pr.exited:
			case <-time.After(5 * time.Second):
				t.Fatal("the program was not reaped")
			}
			if s.Close() == nil {
				t.Error("Close of a killed program reports no error")
			}
			if err := syscall.Kill(pgid, 0); err != syscall.ESRCH {
				t.Errorf("the program's pid is still there: %v", err)
			}
			groupGone(t, pgid)
		})
	}
}

// waitChild waits until the program's shell has started its child.
func waitChild(t *testing.T, pr *proc) {
	t.Helper()
	for range 500 {
		if members(pr.cmd.Process.Pid) >= 2 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the program did not start its child")
}

// members counts the live processes of group pgid.
func members(pgid int) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			n++
		}
	}
	return n
}

// groupGone fails unless every process of the group dies at once and the
// group is gone soon after: a killed child of the program is a zombie
// until init, its new parent, reaps it (in ~2 s in some containers).
func groupGone(t *testing.T, pgid int) {
	t.Helper()
	for i := 0; members(pgid) > 0; i++ {
		if i == 50 {
			t.Fatalf("processes of group %d outlived the transfer", pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 1000 {
		if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process group %d is still there", pgid)
}

// TestTreeDies: what a program started dies when it ends, also a child
// that left its process group (setsid), whether the server is root (a
// PID namespace) or not (a user namespace too, where the kernel allows).
func TestTreeDies(t *testing.T) {
	tag := "1000." + strconv.Itoa(os.Getpid())
	src := open(t, context.Background(), "sh#-c#setsid sleep "+tag+" </dev/null >/dev/null 2>&1 & echo up", nil, testDir(t))
	if _, err := io.ReadAll(src); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if !src.isolated {
		if os.Geteuid() == 0 {
			t.Fatal("a server that runs as root started a program outside a PID namespace")
		}
		t.Skip("the kernel gives this user no namespaces")
	}
	for i := 0; sleeping(tag); i++ {
		if i == 1000 {
			t.Fatalf("sleep %s outlived its program", tag)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sleeping reports whether a live process runs "sleep tag".
func sleeping(tag string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), "sleep\x00"+tag+"\x00") {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 0 && f[0] != "Z" {
				return true
			}
		}
	}
	return false
}
