//go:build interop

package interop

// `ferry copy`, the built binary, against real servers: local paths and
// ftp:// URLs on ferry and GCT, globus-url-copy style flags, sync, checksums,
// and the errors a user sees.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cliRun is one run of the ferry binary.
type cliRun struct {
	args           []string
	stdout, stderr string
	code           int // exit status; -1 when it did not exit normally
	elapsed        time.Duration
}

func (r cliRun) String() string {
	return "ferry " + strings.Join(r.args, " ") + "\nexit " + strconv.Itoa(r.code) +
		"\nstdout:\n" + r.stdout + "\nstderr:\n" + r.stderr
}

// ferryCopy runs `ferry copy args...` with a time limit.
func ferryCopy(t *testing.T, args ...string) cliRun {
	t.Helper()
	return runFerryCLI(t, 90*time.Second, nil, "", append([]string{"copy"}, args...)...)
}

// runFerryCLI runs the ferry binary with args, stdin and, when env is not
// nil, that environment; it fails the test if the run takes longer than
// timeout or cannot start.
func runFerryCLI(t *testing.T, timeout time.Duration, env []string, stdin string, args ...string) cliRun {
	t.Helper()
	needFerry(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r := cliRun{args: args}
	cmd := exec.CommandContext(ctx, ferryBin, r.args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	err := cmd.Run()
	r.elapsed = time.Since(start)
	r.stdout, r.stderr = out.String(), errb.String()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("ferry %s: %v", strings.Join(r.args, " "), err)
	}
	if ctx.Err() != nil {
		t.Fatalf("ferry %s did not finish within %v:\n%s", r.args[0], timeout, r)
	}
	return r
}

// mustCopy runs ferry copy and fails the test unless it exits 0.
func mustCopy(t *testing.T, args ...string) cliRun {
	t.Helper()
	r := ferryCopy(t, args...)
	if r.code != 0 {
		t.Fatalf("ferry copy failed:\n%s", r)
	}
	t.Logf("ferry %s (%v):\n%s", strings.Join(r.args, " "), r.elapsed.Round(time.Millisecond), r.stderr)
	return r
}

var summaryRE = regexp.MustCompile(`(?m)^(\d+) files?: (\d+) transferred, (\d+) skipped, (\d+) failed; .*; (\d+) faults?$`)

// checkSummary checks the summary line's counts.
func checkSummary(t *testing.T, r cliRun, files, transferred, skipped int) {
	t.Helper()
	m := summaryRE.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("no summary line in the output:\n%s", r)
	}
	want := []int{files, transferred, skipped, 0, 0}
	for i, w := range want {
		if got, _ := strconv.Atoi(m[i+1]); got != w {
			t.Errorf("summary %q: want %d files: %d transferred, %d skipped, 0 failed; 0 faults", m[0], files, transferred, skipped)
			break
		}
	}
}

// settingsLine is the "settings: ..." line of the output.
func settingsLine(r cliRun) string {
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.HasPrefix(l, "settings: ") {
			return l
		}
	}
	return ""
}

// TestCopyCLIFerry: a local tree up to a ferry server (-r, DST/ receives the
// tree by name), the same again with --sync-level size (nothing to send),
// back down to a local directory, and one file to a local file name.
func TestCopyCLIFerry(t *testing.T) {
	needTools(t)
	srv := shmFerry(t)
	local := bigTempDir(t)
	tree := filepath.Join(local, "tree")
	n := makeEngineTree(t, tree, true)

	r := mustCopy(t, "-r", tree, srv.URL("up/"))
	checkSummary(t, r, n, n, 0)
	if err := compareTrees(tree, srv.Path("up/tree")); err != nil {
		t.Fatalf("up: %v", err)
	}

	// -v says what the tuner chose and why.
	r = mustCopy(t, "-v", "-r", tree, srv.URL("again/"))
	if !strings.Contains(r.stderr, "tuner: --cc ") || !strings.Contains(r.stderr, "averaging") || !strings.Contains(r.stderr, "local link") {
		t.Errorf("-v: want the tuner's settings and why:\n%s", r.stderr)
	}

	r = mustCopy(t, "-r", "--sync-level", "size", tree, srv.URL("up/"))
	checkSummary(t, r, n, 0, n)
	if !strings.Contains(r.stderr, " 0 transferred,") {
		t.Errorf("second run: the summary should say 0 transferred:\n%s", r.stderr)
	}

	r = mustCopy(t, "-r", srv.URL("up/tree"), filepath.Join(local, "down")+"/")
	checkSummary(t, r, n, n, 0)
	if err := compareTrees(tree, filepath.Join(local, "down", "tree")); err != nil {
		t.Fatalf("down: %v", err)
	}

	r = mustCopy(t, srv.URL("up/tree/naïve ünï 文件.txt"), filepath.Join(local, "one", "got.txt"))
	checkSummary(t, r, 1, 1, 0)
	if err := compareFiles(filepath.Join(tree, "naïve ünï 文件.txt"), filepath.Join(local, "one", "got.txt")); err != nil {
		t.Fatal(err)
	}
}

// TestCopyCLIGCT: ferry copy with GCT: a local file up (parent directories
// created), back down to a local file name, --verify-checksum with MD5 (a
// chunked file, each chunk checked with GCT's ranged CKSM), and a tree both
// ways with globus-url-copy's -cc 2 -pp -p 4.
func TestCopyCLIGCT(t *testing.T) {
	needTools(t)
	gct := startGCT(t)
	local := bigTempDir(t)

	t.Run("put-get", func(t *testing.T) {
		src := filepath.Join(local, "file.dat")
		writeRandomFile(t, src, 5<<20+12345)
		r := mustCopy(t, src, gct.URL("in/sub/file.dat"))
		checkSummary(t, r, 1, 1, 0)
		if err := compareFiles(src, gct.Path("in/sub/file.dat")); err != nil {
			t.Fatalf("put: %v", err)
		}
		got := filepath.Join(local, "back", "got.dat")
		r = mustCopy(t, gct.URL("in/sub/file.dat"), got)
		checkSummary(t, r, 1, 1, 0)
		if err := compareFiles(src, got); err != nil {
			t.Fatalf("get: %v", err)
		}
	})

	t.Run("verify-md5", func(t *testing.T) {
		src := filepath.Join(local, "verify.dat")
		writeRandomFile(t, src, 20<<20+1)
		r := mustCopy(t, "--verify-checksum", "--checksum-algorithm", "MD5", "--chunk-size", "4M", src, gct.URL("verify.dat"))
		checkSummary(t, r, 1, 1, 0)
		if s := settingsLine(r); !strings.Contains(s, "checksum MD5") || !strings.Contains(s, "chunks 4.0 MiB") {
			t.Errorf("settings line %q: want MD5 checksums and 4 MiB chunks", s)
		}
		if err := compareFiles(src, gct.Path("verify.dat")); err != nil {
			t.Fatal(err)
		}
		// And back, whole files, checked the same way.
		got := filepath.Join(local, "verify back.dat")
		r = mustCopy(t, "--verify-checksum", "--checksum-algorithm", "md5", gct.URL("verify.dat"), got)
		checkSummary(t, r, 1, 1, 0)
		if err := compareFiles(src, got); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("globus-flags", func(t *testing.T) {
		tree := filepath.Join(local, "tree")
		n := makeEngineTree(t, tree, false) // GCT cannot address non-ASCII names
		r := mustCopy(t, "-cc", "2", "-pp", "-p", "4", "-r", tree, gct.URL("flags/"))
		checkSummary(t, r, n, n, 0)
		// Bare -pp keeps the plan's pipelining: 16 on a local link, which
		// both ends on this host are however long GCT's login takes (it
		// forks a process for it).
		if s := settingsLine(r); !strings.HasPrefix(s, "settings: --cc 2 -p 4 --pp 16,") {
			t.Errorf("settings line %q: want --cc 2 -p 4 --pp 16", s)
		}
		if err := compareTrees(tree, gct.Path("flags/tree")); err != nil {
			t.Fatalf("up: %v", err)
		}
		r = mustCopy(t, "-cc", "2", "-pp", "-p", "4", "-r", gct.URL("flags/tree"), filepath.Join(local, "flags down"))
		checkSummary(t, r, n, n, 0)
		if err := compareTrees(tree, filepath.Join(local, "flags down")); err != nil {
			t.Fatalf("down: %v", err)
		}
	})
}

// TestCopyCLIErrors: failures a user makes or meets end quickly with a
// non-zero exit status and one clear line on stderr, and nothing else.
func TestCopyCLIErrors(t *testing.T) {
	needTools(t)
	srv := shmFerry(t)
	gct := startGCT(t)
	local := t.TempDir()
	file := filepath.Join(local, "file.dat")
	writeRandomFile(t, file, 1000)
	cases := []struct {
		name string
		args []string
		want []string // substrings of the error line, case-insensitive
	}{
		{"unreachable source", []string{"ftp://127.0.0.1:1/x.dat", filepath.Join(local, "out.dat")},
			[]string{"127.0.0.1:1", "refused"}},
		{"unreachable destination", []string{file, "ftp://127.0.0.1:1/x.dat"},
			[]string{"127.0.0.1:1", "refused"}},
		{"bad scheme", []string{"http://127.0.0.1/x.dat", filepath.Join(local, "out.dat")},
			[]string{"scheme", "http"}},
		{"bad destination scheme", []string{file, "sftp://127.0.0.1/x.dat"},
			[]string{"scheme", "sftp"}},
		{"missing local source", []string{filepath.Join(local, "nope.dat"), srv.URL("x.dat")},
			[]string{"nope.dat", "no such file"}},
		{"missing source on ferry", []string{srv.URL("nope.dat"), filepath.Join(local, "out.dat")},
			[]string{"nope.dat"}},
		{"missing source on GCT", []string{gct.URL("nope.dat"), filepath.Join(local, "out.dat")},
			[]string{"nope.dat"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ferryCopy(t, c.args...)
			t.Logf("%v: exit %d, stderr %q", r.elapsed.Round(time.Millisecond), r.code, r.stderr)
			if r.code == 0 {
				t.Fatalf("exit status 0, want non-zero:\n%s", r)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
			msg := strings.TrimRight(r.stderr, "\n")
			if msg == "" || strings.Contains(msg, "\n") {
				t.Errorf("stderr should be exactly one line:\n%s", r.stderr)
			}
			if !strings.HasPrefix(msg, "ferry: ") {
				t.Errorf("error line %q should start with \"ferry: \"", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(strings.ToLower(msg), strings.ToLower(w)) {
					t.Errorf("error line %q should mention %q", msg, w)
				}
			}
			if strings.Contains(msg, "Usage:") {
				t.Errorf("error line %q carries the usage text", msg)
			}
			if r.elapsed > 15*time.Second {
				t.Errorf("took %v to fail, want a prompt error", r.elapsed)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(local, "out.dat")); err == nil {
		t.Errorf("a failed copy left %s behind", filepath.Join(local, "out.dat"))
	}
}
