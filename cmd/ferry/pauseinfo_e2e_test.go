package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/service/api"
)

// TestCLIPauseInfo: a transfer to an endpoint that was never activated
// waits INACTIVE; task pause-info says so, names the endpoint and the
// command that resumes it, and that command does.
func TestCLIPauseInfo(t *testing.T) {
	t.Parallel()
	s := startService(t, true)
	srcRoot, srcURL := gridEndpoint(t)
	dstRoot, dstURL := gridEndpoint(t)
	writeFile(t, filepath.Join(srcRoot, "a.txt"), "alpha")
	s.login()
	s.ok("", "endpoint", "add", "src", "--server", srcURL)
	s.ok("", "endpoint", "add", "dst", "--server", dstURL, "--auth", "password")

	id := strings.TrimSpace(s.ok("", "transfer", "src:/a.txt", "dst:/a.txt"))
	var pi api.PauseInfo
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if s.okJSON(&pi, "task", "pause-info", id); pi.IsPaused || time.Now().After(deadline) {
			break
		}
	}
	if !pi.IsPaused || pi.NiceStatus != "NOT_ACTIVATED" || !strings.Contains(pi.Description, "alice#dst") ||
		len(pi.Endpoints) != 1 || pi.Endpoints[0].DisplayName != "alice#dst" || pi.Endpoints[0].Resume != api.ResumeActivate {
		t.Fatalf("pause-info of a task waiting for an activation: %+v", pi)
	}
	out := s.ok("", "task", "pause-info", id)
	for _, want := range []string{"Paused:     yes (NOT_ACTIVATED)", "Endpoint:   alice#dst", "To resume:  ferry endpoint activate alice#dst"} {
		if !strings.Contains(out, want) {
			t.Errorf("task pause-info lacks %q:\n%s", want, out)
		}
	}

	s.ok("pw\n", "endpoint", "activate", "alice#dst", "--username", "alice") // what it said to run
	if out := s.ok("", "task", "wait", id, "--timeout", "30"); !strings.Contains(out, "SUCCEEDED") {
		t.Fatalf("task wait after the activation: %s", out)
	}
	wantFile(t, filepath.Join(dstRoot, "a.txt"), "alpha")
	if out := s.ok("", "task", "pause-info", id); !strings.Contains(out, "Paused:   no") {
		t.Fatalf("pause-info of a task that ended:\n%s", out)
	}
	s.fails(exitFailure, "not found", "task", "pause-info", "6a1c2b9e-0000-4000-8000-000000000000")
}
