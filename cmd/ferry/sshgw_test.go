package main

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"ferry/service/sshgw"
)

// TestSSHCommand: over SSH only the service commands run, with no flag
// that reaches the service's host (another service, a token, a local
// file); refusals need no service.
func TestSSHCommand(t *testing.T) {
	r := remote{api: "http://127.0.0.1:1", public: "https://ferry.example", token: "t", user: "alice"}
	big := strings.Repeat("a.txt b.txt\n", maxSSHInput/12+1)
	for _, c := range []struct {
		line, in string
		code     int
		says     string
	}{
		{"help", "", 0, "ferry's service commands"},
		{"ferry --help", "", 0, "ferry's service commands"},
		{"", "", 0, "Available Commands"},
		{"/bin/sh", "", exitNotFound, "/bin/sh: not a ferry command"},
		{"sh -c id", "", exitNotFound, "sh: not a ferry command"},
		{"bash", "", exitNotFound, "not a ferry command"},
		{"scp -t /etc/passwd", "", 2, "unknown shorthand flag: 't'"},
		{"ferry login", "", exitNotFound, "login: not a ferry command"},
		{"logout", "", exitNotFound, "not a ferry command"},
		{"token list", "", exitNotFound, "not a ferry command"},
		{"copy ftp://a/ ftp://b/", "", exitNotFound, "not a ferry command"},
		{"gridftp --root /", "", exitNotFound, "not a ferry command"},
		{"server --data /tmp", "", exitNotFound, "not a ferry command"},
		{"user key add alice", "", exitNotFound, "not a ferry command"},
		{"connect", "", exitNotFound, "not a ferry command"},
		{"passwd", "", exitNotFound, "not a ferry command"},
		{"completion bash", "", exitNotFound, "not a ferry command"},
		{"ls ep:/ --url http://elsewhere", "", exitUsage, "unknown flag: --url"},
		{"task list --token secret", "", exitUsage, "unknown flag: --token"},
		{"transfer --batch /etc/passwd a: b:", "", exitUsage, "over SSH, give --batch -"},
		{"ls 'ep:/x", "", exitUsage, "unterminated ' quote"},
		{"ls ep:/ $(id)", "", exitUsage, "accepts 1 arg"},
		{"task wait x --timeout soon", "", exitUsage, "--timeout"},
		{"transfer --batch - a:/ b:/", big, exitFailure, "standard input over SSH is limited to 16 MiB"},
	} {
		t.Run(c.line, func(t *testing.T) {
			var out, errOut strings.Builder
			code := sshCommand(context.Background(), r, sshgw.IO{In: strings.NewReader(c.in), Out: &out, Err: &errOut}, c.line)
			if code != c.code || !strings.Contains(out.String()+errOut.String(), c.says) {
				t.Fatalf("exit %d, want %d saying %q:\nstdout: %s\nstderr: %s", code, c.code, c.says, out.String(), errOut.String())
			}
		})
	}
}

// TestSelfAddr: the gateway reaches its process's API on loopback when
// the API listens on every address.
func TestSelfAddr(t *testing.T) {
	for _, c := range []struct{ listen, want string }{
		{"0.0.0.0:8080", "127.0.0.1:8080"},
		{"[::]:8080", "[::1]:8080"},
		{"127.0.0.1:8080", "127.0.0.1:8080"},
		{"192.0.2.7:443", "192.0.2.7:443"},
	} {
		if got := selfAddr(net.TCPAddrFromAddrPort(netip.MustParseAddrPort(c.listen))); got != c.want {
			t.Errorf("selfAddr(%s) = %s, want %s", c.listen, got, c.want)
		}
	}
}
