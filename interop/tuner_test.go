//go:build interop

package interop

// The tuner's view of the link, through the ferry binary: a server on this
// host is never behind a wide-area link, however late a reply comes.

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// startLateProxy forwards connections on a loopback port to addr, and
// holds the server's first reply after the client's first command for
// delay: a login's round trip as long as a server that forks or is busy
// makes it. It returns its address.
func startLateProxy(t *testing.T, addr string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			asked := make(chan struct{})
			wg.Go(func() { // client to server
				defer s.Close()
				var once sync.Once
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						once.Do(func() { close(asked) })
						if _, err := s.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
			wg.Go(func() { // server to client
				defer c.Close()
				banner := make([]byte, 512)
				n, err := s.Read(banner)
				if err != nil {
					return
				}
				if _, err := c.Write(banner[:n]); err != nil {
					return
				}
				select {
				case <-asked:
					time.Sleep(delay)
				case <-time.After(10 * time.Second):
				}
				io.Copy(c, s)
			})
		}
	})
	return ln.Addr().String()
}

// TestCopyLinkJudgedLocal: ferry copy -v from a ferry server whose
// login's reply comes 20 ms late (a wide-area round trip, by one sample)
// and from GCT (which forks a process for each session) to a local
// directory: both ends are on this host, a local link, whatever the round
// trips, and -v says so.
func TestCopyLinkJudgedLocal(t *testing.T) {
	needTools(t)
	srv := startFerry(t)
	if err := os.WriteFile(srv.Path("f.dat"), make([]byte, 100_000), 0o644); err != nil {
		t.Fatal(err)
	}
	gct := startGCT(t)
	if err := os.WriteFile(gct.Path("f.dat"), make([]byte, 100_000), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, url string }{
		{"ferry, the login's reply late", "ftp://" + startLateProxy(t, srv.Addr(), 20*time.Millisecond) + "/f.dat"},
		{"gct", gct.URL("f.dat")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustCopy(t, "-v", tc.url, filepath.Join(t.TempDir(), "f.dat"))
			checkSummary(t, r, 1, 1, 0)
			if !strings.Contains(r.stderr, "over a local link (both ends on the same host)") {
				t.Errorf("want the link judged local, both ends on this host:\n%s", r.stderr)
			}
		})
	}
}
