package engine

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"ferry/gridftp/client"
	"ferry/gridftp/server"
	"ferry/storage/posix"
)

// TestRetryWaitAfterRestarts: while an endpoint restarts, again and
// again, the retries of a file wait longer each time, never past
// MaxBackoff; once it answers again (a pair connects) the next wait is
// the first one again, not minutes.
func TestRetryWaitAfterRestarts(t *testing.T) {
	fs, err := posix.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &server.Server{FS: fs, Anonymous: true}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	ep := Endpoint{Addr: ln.Addr().String()}
	const base, ceiling = 100 * time.Millisecond, 3 * time.Second
	c := &copier{src: ep, dst: ep, opts: Options{Backoff: base, MaxBackoff: ceiling, Deadline: time.Now().Add(time.Hour)}}
	u := &unit{f: &file{src: "/f", dst: "/f"}, n: -1}
	broke := &client.EndError{Err: io.EOF} // the endpoint went away mid-transfer
	for round := range 3 {
		var wait time.Duration
		for range 12 { // the endpoint is down for a while
			wait, _ = c.retryDelay(u, broke)
			if wait > ceiling {
				t.Fatalf("round %d: a retry waits %v, past MaxBackoff %v", round, wait, ceiling)
			}
		}
		if wait < ceiling/2 {
			t.Fatalf("round %d: after 12 failures in a row the wait is %v: it does not grow", round, wait)
		}
		p, err := c.connect(context.Background()) // it answers again
		if err != nil {
			t.Fatal(err)
		}
		p.Close()
		if wait, _ = c.retryDelay(u, broke); wait > base {
			t.Fatalf("round %d: the endpoint answered again, yet the next retry waits %v (want at most %v)", round, wait, base)
		}
	}
}
