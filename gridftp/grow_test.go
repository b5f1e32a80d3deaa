package gridftp_test

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"ferry/gridftp"
)

// slowSource is a source whose every read takes a while, so that a send
// lasts several of a probe's periods: on its own per read (perStream, so
// more streams move more, as over a lossy path) or one read at a time (so
// the rate is the same with any number, as over a full link).
type slowSource struct {
	data      []byte
	delay     time.Duration
	perStream bool
	mu        sync.Mutex
}

func (s *slowSource) ReadAt(p []byte, off int64) (int, error) {
	if !s.perStream {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	time.Sleep(s.delay)
	return copy(p, s.data[off:]), nil
}

// TestSendGrowing: a send that may grow adds streams while they add
// throughput and no more once they do not; every stream that joined is
// counted in the EOF, and the receiver, which takes streams that join
// during the transfer, gets every byte.
func TestSendGrowing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		perStream bool
		size      int
		kept      int
		joined    int
		done      bool
	}{
		// Each send lasts, whatever the machine, well past the periods
		// its probe needs (8 and 4): the reads take their time.
		{"loss-bound", true, 24 << 20, 8, 6, true}, // 2, 3, 5, 8: each probe pays
		{"link-bound", false, 3 << 20, 2, 1, true}, // the one probe, which does not
	} {
		t.Run(tc.name, func(t *testing.T) {
			const block = 16 << 10
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			accept := make(chan net.Conn)
			go func() {
				defer close(accept)
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					t.Cleanup(func() { c.Close() })
					accept <- c
				}
			}()
			dial := func(ctx context.Context, n int) ([]*gridftp.Stream, error) {
				var out []*gridftp.Stream
				for range n {
					var d net.Dialer
					c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
					if err != nil {
						return nil, err
					}
					t.Cleanup(func() { c.Close() })
					out = append(out, gridftp.NewStream(c))
				}
				return out, nil
			}
			first, err := dial(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			data := randomData(t, tc.size)
			src := &slowSource{data: data, delay: 10 * time.Millisecond, perStream: tc.perStream}
			dst := &memFile{}
			r := &gridftp.Receiver{Dst: dst, Pool: gridftp.NewBufferPool(block), Timeout: 10 * time.Second}
			got := make(chan error, 1)
			go func() {
				var streams []*gridftp.Stream
				for range 2 {
					streams = append(streams, gridftp.NewStream(<-accept))
				}
				_, err := r.Run(ctx, streams, accept, nil)
				got <- err
			}()
			g := &gridftp.Growth{Max: 8, Dial: dial, Period: 100 * time.Millisecond, AnyControl: true}
			// The rates are measured in the path's time, which passes
			// with the bytes it carries (and a nanosecond at each
			// reading, so that no two are the same): over a full link
			// at its rate whatever the number of streams, over a lossy
			// path at a stream's rate times the streams. A busy
			// machine that runs the streams late makes a period carry
			// less, not its rate differ.
			const rate = 1 << 20 // bytes a second: the link's, or a stream's
			clock, last := time.Now(), int64(0)
			g.Clock = func(streams int, moved int64) time.Time {
				r := int64(rate)
				if tc.perStream {
					r *= int64(streams)
				}
				clock = clock.Add(time.Duration((moved-last)*int64(time.Second)/r) + 1)
				last = moved
				return clock
			}
			res, err := gridftp.SendGrowing(ctx, first, gridftp.NewPlan([]gridftp.Range{{Start: 0, End: int64(len(data))}}, block),
				src, 0, gridftp.NewBufferPool(block), nil, g)
			if err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("receiver: %v", err)
			}
			if !bytes.Equal(dst.bytes(), data) {
				t.Fatal("the receiver's data differs")
			}
			if res.Kept != tc.kept || res.Done != tc.done || len(res.Added) != tc.joined {
				t.Fatalf("kept %d of %d streams (%d joined), done %v; want %d kept of %d, done %v",
					res.Kept, 2+len(res.Added), len(res.Added), res.Done, tc.kept, 2+tc.joined, tc.done)
			}
		})
	}
}
