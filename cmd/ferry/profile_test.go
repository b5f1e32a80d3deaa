package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUProfileEnv: the real binary with FERRY_CPUPROFILE set writes a
// CPU profile (gzip, as runtime/pprof writes it) there when it ends, and
// says so in a sentence when it cannot.
func TestCPUProfileEnv(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, path string
		wantFile   bool
		wantErr    string
	}{
		{name: "written", path: filepath.Join(dir, "cpu.prof"), wantFile: true},
		{name: "unwritable", path: filepath.Join(dir, "missing", "cpu.prof"), wantErr: "FERRY_CPUPROFILE: the CPU profile could not start"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(ferryBin, "version")
			cmd.Env = append(os.Environ(), "FERRY_CPUPROFILE="+tt.path)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("ferry version: %v: %s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr %q, want it to say %q", stderr.String(), tt.wantErr)
			}
			b, err := os.ReadFile(tt.path)
			if got := err == nil && bytes.HasPrefix(b, []byte{0x1f, 0x8b}); got != tt.wantFile {
				t.Errorf("a gzip profile at %s: %v (read: %v), want %v", tt.path, got, err, tt.wantFile)
			}
		})
	}
}
