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

// TestTakeBackCountsWhatArrived: a whole file's try fails; what its
// markers said arrived stays counted, whether its byte count (112) was
// ahead of its ranges (111) or behind them, and what is left to count
// once the file is found whole (or the next try moves the rest) brings the
// file's progress to its size, never past it.
func TestTakeBackCountsWhatArrived(t *testing.T) {
	const size = 100
	for _, tc := range []struct {
		name     string
		had      int64 // ranges at the try's start
		reported int64 // its byte count from 112 markers
		have     int64 // its ranges from 111 markers, had included
		err      error
		kept     int64 // progress counted after the take-back
	}{
		{name: "no markers", err: io.EOF},
		{name: "count ahead of ranges", reported: 60, have: 50, err: io.EOF, kept: 50},
		{name: "count behind ranges", reported: 40, have: 50, err: io.EOF, kept: 50},
		{name: "a restart", had: 30, reported: 30, have: 60, err: io.EOF, kept: 60},
		{name: "a restart, count behind ranges", had: 30, reported: 20, have: 60, err: io.EOF, kept: 60},
		{name: "damaged", reported: size, have: size, err: errMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec progressRecorder
			c := &copier{rep: &rec}
			f := &file{src: "/f", dst: "/f", size: size}
			u := &unit{f: f, n: -1}
			u.part.Have.Add(0, tc.had)
			f.have.Add(0, tc.have)
			c.progress(f, tc.had+tc.reported) // the try's start and its markers
			u.reported = tc.reported
			c.takeBack(u, tc.err)
			if f.moved != tc.kept || rec.n != tc.kept {
				t.Errorf("after the take-back: %d bytes counted (the reporter has %d), want %d", f.moved, rec.n, tc.kept)
			}
			c.reportRest(u) // found whole (recheck), or the next try's end
			if f.moved != size || rec.n != size {
				t.Errorf("once whole: %d bytes counted (the reporter has %d), want %d", f.moved, rec.n, size)
			}
		})
	}
}

// progressRecorder is a Reporter that sums the progress.
type progressRecorder struct {
	nopReporter
	n int64
}

func (r *progressRecorder) Progress(d int64) { r.n += d }
