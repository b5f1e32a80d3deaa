//go:build interop

package interop

// FTP bounce: an anonymous client must not make ferry gridftp send bytes
// it chose to a service only the server's host can reach, nor connect to
// one at all, whether or not it hands the server a data credential of its
// own (DCSC P, DCAU A). The server runs
// in a network namespace on a routable address, beside a service that
// listens on the namespace's loopback; the client is outside.

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ferry/gridftp"
)

func TestFTPBounce(t *testing.T) {
	needNetns(t)
	needFerry(t)
	ns := newFirewalledNS(t, "ferryBnc", 13)
	ns.exec(t, "nft", "flush", "ruleset") // this test's namespace takes connections
	root := t.TempDir()
	payload := "POST /internal HTTP/1.0\r\nContent-Length: 0\r\n\r\n"
	if err := os.WriteFile(filepath.Join(root, "payload"), []byte(payload), 0o644); err != nil {
		t.Fatal(err)
	}
	// The internal service: what it is sent lands in a file.
	got := filepath.Join(t.TempDir(), "received")
	listening := filepath.Join(t.TempDir(), "listening")
	svc := &child{t: t, name: "internal service", bin: "ip", log: &logBuffer{}, args: []string{"netns", "exec", ns.name,
		"python3", "-c", `import signal,socket,sys
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 5000)); s.listen(8)
open(sys.argv[2], "w").close()
while True:
    c,_=s.accept()
    with open(sys.argv[1],"ab") as f:
        while True:
            b=c.recv(65536)
            if not b: break
            f.write(b)
    c.close()`, got, listening}}
	svc.launch()
	t.Cleanup(func() { svc.stop(5 * time.Second) })
	// Until it listens, a bounce to it would prove nothing (and a SIGTERM
	// before its handler is set is no clean exit).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(listening); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the internal service did not listen within 30s")
		}
	}
	addr := net.JoinHostPort(ns.ip, "2811")
	srv := &child{t: t, name: "ferry gridftp", bin: "ip", log: &logBuffer{}, args: []string{"netns", "exec", ns.name,
		ferryBin, "gridftp", "--root", root, "--listen", addr, "--anonymous"}}
	p := srv.launch()
	t.Cleanup(func() { srv.stop(5 * time.Second) })
	if err := waitBanner(p, addr, 20*time.Second); err != nil {
		t.Fatal(err)
	}

	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	cmd := func(line string) gridftp.Reply {
		t.Helper()
		if line != "" {
			fmt.Fprintf(c, "%s\r\n", line)
		}
		rep, err := gridftp.ReadReply(r)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return rep
	}
	cmd("") // banner
	cmd("USER anonymous")
	if rep := cmd("PASS x"); rep.Code != gridftp.CodeLoggedIn {
		t.Fatalf("login: %s", rep)
	}
	refused := func() {
		t.Helper()
		for _, tc := range []struct{ line, why string }{
			{"PORT 127,0,0,1,19,136", "loopback address of this host"},
			{"EPRT |1|127.0.0.1|5000|", "loopback address of this host"},
			{"PORT 169,254,169,254,0,80", "system port"},
			{"EPRT |1|169.254.169.254|8080|", "link-local"},
			{"SPOR 127,0,0,1,19,136", "loopback address of this host"},
		} {
			if rep := cmd(tc.line); rep.Code != gridftp.CodeBadArguments || !strings.Contains(rep.Text(), tc.why) {
				t.Errorf("%s: %s, want 501 saying %q", tc.line, rep, tc.why)
			}
		}
		if rep := cmd("RETR payload"); rep.Code/100 == 1 || rep.Code/100 == 2 {
			t.Errorf("RETR after refused PORTs: %s", rep)
		}
	}
	refused()
	// A credential the client made itself proves nothing of the target:
	// the same are refused with DCAU A.
	cred, err := gridftp.NewDataCredential(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	blob, err := cred.DCSC()
	if err != nil {
		t.Fatal(err)
	}
	if rep := cmd("DCSC P " + blob); rep.Code != gridftp.CodeFileActionOK {
		t.Fatalf("DCSC P: %s", rep)
	}
	if rep := cmd("DCAU A"); rep.Code != gridftp.CodeOK {
		t.Fatalf("DCAU A: %s", rep)
	}
	refused()
	// The client's own address is fine, also on a system port.
	hostPort := fmt.Sprintf("PORT %s,0,21", strings.ReplaceAll(ns.hostIP, ".", ","))
	if rep := cmd(hostPort); rep.Code != gridftp.CodeOK {
		t.Errorf("%s: %s, want 200: the client's own address", hostPort, rep)
	}
	cmd("QUIT")
	time.Sleep(200 * time.Millisecond)
	if b, _ := os.ReadFile(got); len(b) > 0 {
		t.Fatalf("the internal service received %q", b)
	}
}
