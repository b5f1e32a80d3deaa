// Package smtptest runs a real SMTP server for tests: aiosmtpd (Debian:
// python3-aiosmtpd) on a free port of 127.0.0.1, keeping every message it
// receives in a maildir. The tests run only with the interop build tag, as
// the other tests that need the peers do (interoptest); without aiosmtpd
// they skip, unless FERRY_INTEROP=required (set by .ci/run), when they
// fail.
package smtptest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"ferry/internal/interoptest"
)

const missing = "aiosmtpd is not installed (apt-get install python3-aiosmtpd)"

// python finds an interpreter with aiosmtpd: Debian's package installs it
// for the system python3, which another python3 (pyenv) may shadow on PATH.
func python(t testing.TB) string {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import aiosmtpd").Run() == nil {
			return py
		}
	}
	interoptest.Missing(t, missing)
	return ""
}

// Start runs aiosmtpd until t ends and returns its host:port and the
// maildir that receives the messages (new ones appear in maildir/new).
func Start(t testing.TB) (addr, maildir string) {
	t.Helper()
	interoptest.Need(t)
	py := python(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	maildir = filepath.Join(t.TempDir(), "mail")
	cmd := exec.Command(py, "-m", "aiosmtpd", "-n", "-l", addr, "-c", "aiosmtpd.handlers.Mailbox", maildir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr, maildir
		}
		if time.Now().After(end) {
			t.Fatal("aiosmtpd did not start")
		}
	}
}
