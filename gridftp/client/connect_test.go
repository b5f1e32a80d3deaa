package client

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestRedial: a peer that does not answer is tried again on a fresh
// attempt each step, until it answers or the bound passes; an answer of
// any kind ends it at once.
func TestRedial(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		name      string
		silent    int   // attempts that get no answer before the peer answers
		answer    error // what the peer answers then (nil: it accepts)
		within    time.Duration
		wantCalls int // 0: more than one, bounded by within
		wantErr   bool
	}{
		{name: "answers at once", wantCalls: 1},
		{name: "answers on the third attempt", silent: 2, within: time.Minute, wantCalls: 3},
		{name: "refuses", answer: refused, within: time.Minute, wantCalls: 1, wantErr: true},
		{name: "refuses after a black hole", silent: 1, answer: refused, within: time.Minute, wantCalls: 2, wantErr: true},
		{name: "never answers", silent: 1 << 30, within: 200 * time.Millisecond, wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			within := c.within
			if within == 0 {
				within = time.Minute
			}
			calls := 0
			conn, err := redial(context.Background(), 20*time.Millisecond, within, func(ctx context.Context) (net.Conn, error) {
				calls++
				if calls <= c.silent {
					<-ctx.Done() // a SYN into a black hole
					return nil, &net.OpError{Op: "dial", Net: "tcp", Err: ctx.Err()}
				}
				if c.answer != nil {
					return nil, c.answer
				}
				a, b := net.Pipe()
				b.Close()
				return a, nil
			})
			if conn != nil {
				conn.Close()
			}
			if (err != nil) != c.wantErr {
				t.Fatalf("err %v, want an error: %v", err, c.wantErr)
			}
			if c.wantCalls > 0 && calls != c.wantCalls {
				t.Errorf("%d attempts, want %d", calls, c.wantCalls)
			}
			if c.wantCalls == 0 && calls < 2 {
				t.Errorf("%d attempts: a peer that never answers was not tried again", calls)
			}
		})
	}
}

// TestRedialCanceled: the caller's context ends the attempts.
func TestRedialCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	_, err := redial(ctx, 10*time.Millisecond, time.Hour, func(actx context.Context) (net.Conn, error) {
		calls++
		if calls == 3 {
			cancel()
		}
		<-actx.Done()
		return nil, actx.Err()
	})
	if !errors.Is(err, context.Canceled) || calls != 3 {
		t.Errorf("err %v after %d attempts, want canceled after 3", err, calls)
	}
}
