package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// isProfile reports whether path holds a profile (gzip, as runtime/pprof
// writes them).
func isProfile(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && bytes.HasPrefix(b, []byte{0x1f, 0x8b})
}

// TestProfileEnv: the real binary with FERRY_CPUPROFILE or
// FERRY_MEMPROFILE set writes a CPU or heap profile there when it ends,
// and says so in a sentence when it cannot.
func TestProfileEnv(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, env, path string
		wantFile        bool
		wantErr         string
	}{
		{name: "cpu written", env: "FERRY_CPUPROFILE", path: filepath.Join(dir, "cpu.prof"), wantFile: true},
		{name: "cpu unwritable", env: "FERRY_CPUPROFILE", path: filepath.Join(dir, "missing", "cpu.prof"), wantErr: "FERRY_CPUPROFILE: the CPU profile could not start"},
		{name: "heap written", env: "FERRY_MEMPROFILE", path: filepath.Join(dir, "heap.prof"), wantFile: true},
		{name: "heap unwritable", env: "FERRY_MEMPROFILE", path: filepath.Join(dir, "missing", "heap.prof"), wantErr: "FERRY_MEMPROFILE: the heap profile could not be written"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(ferryBin, "version")
			cmd.Env = append(os.Environ(), tt.env+"="+tt.path)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("ferry version: %v: %s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr %q, want it to say %q", stderr.String(), tt.wantErr)
			}
			if got := isProfile(tt.path); got != tt.wantFile {
				t.Errorf("a gzip profile at %s: %v, want %v", tt.path, got, tt.wantFile)
			}
		})
	}
}

// TestMemProfileSignal: a running server with FERRY_MEMPROFILE set writes
// a heap profile when it gets SIGUSR1, and goes on.
func TestMemProfileSignal(t *testing.T) {
	dir := t.TempDir()
	t.Run("SIGUSR1", func(t *testing.T) {
		path := filepath.Join(dir, "running.prof")
		cmd := exec.Command(ferryBin, "gridftp", "--root", t.TempDir(), "--listen", "127.0.0.1:0", "--anonymous")
		cmd.Env = append(os.Environ(), "FERRY_MEMPROFILE="+path)
		out, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer cmd.Process.Kill()
		line, err := bufio.NewReader(out).ReadString('\n')
		if !strings.Contains(line, "serving") {
			t.Fatalf("ferry gridftp said %q, %v; want it serving", line, err)
		}
		go io.Copy(io.Discard, out)
		if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(30 * time.Second); !isProfile(path); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("no heap profile at %s after SIGUSR1", path)
			}
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("ferry gridftp, stopped with SIGTERM after SIGUSR1: %v", err)
		}
	})
}
