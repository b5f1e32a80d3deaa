package agent

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"ferry/connect/tunnel"
	"ferry/gridftp/server"
	"ferry/storage/posix"
)

// The agent's GridFTP server, on a control connection through the
// tunnel, tells a timeout from a broken connection, as on a socket: a
// client that does not log in in time is told why it is dropped.
func TestTimeoutThroughTunnel(t *testing.T) {
	fs, err := posix.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ln := newStreamListener()
	srv := &server.Server{FS: fs, Anonymous: true, LoginTimeout: 100 * time.Millisecond}
	go srv.Serve(ln)
	defer srv.Close()

	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	c, err := net.Dial("tcp", tl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := tl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	agentSide, relaySide := tunnel.Client(c), tunnel.Server(s)
	defer agentSide.Close()
	defer relaySide.Close()
	go func() {
		st, err := agentSide.Accept()
		if err == nil && !ln.push(st) {
			st.Close()
		}
	}()

	st, err := relaySide.Open(tunnel.KindGridFTP)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.SetReadDeadline(time.Now().Add(30 * time.Second)) // did not hang
	r := bufio.NewReader(st)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the server dropped the connection without a reply (%v); want 421 Login timeout", err)
		}
		if strings.HasPrefix(line, "421") && strings.Contains(line, "Login timeout") {
			return
		}
	}
}
