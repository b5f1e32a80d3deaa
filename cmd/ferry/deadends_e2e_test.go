package main

import (
	"net"
	"strings"
	"testing"
)

// TestCLIServiceUnreachable: every command that calls the API, logged in
// or not, says in one line that the service cannot be reached and what to
// start, not the Go error of the dial.
func TestCLIServiceUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	s := &service{t: t, url: url, home: t.TempDir()}
	want := `ferry: cannot reach the ferry service at ` + url + `: is "ferry server" running?` + "\n"
	for _, args := range [][]string{
		{"login", "--url", url, "--username", "alice"},
		{"endpoint", "search", "x", "--url", url, "--token", "t"},
		{"endpoint", "list", "--url", url, "--token", "t"},
		{"task", "list", "--url", url, "--token", "t"},
		{"ls", "ep:/", "--url", url, "--token", "t"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			r := s.ferry("pw\n", args...)
			if r.code != exitFailure || r.stderr != want {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", r.code, r.stderr, exitFailure, want)
			}
		})
	}
}
