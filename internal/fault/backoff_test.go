package fault_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"ferry/gridftp"
	"ferry/gridftp/client"
	"ferry/internal/fault"
)

// TestBackoff: the wait grows twofold from Base with each failure in a
// row, never passes Max (jitter included), and starts from Base again
// after Reset.
func TestBackoff(t *testing.T) {
	tests := []struct {
		name      string
		base, max time.Duration
		steps     string // f: a failure, r: a reset
		want      time.Duration
	}{
		{"first", time.Second, time.Minute, "f", time.Second},
		{"second", time.Second, time.Minute, "ff", 2 * time.Second},
		{"grows", time.Second, time.Minute, "fffff", 16 * time.Second},
		{"capped", time.Second, time.Minute, "ffffffffff", time.Minute},
		{"long after the cap", time.Second, time.Minute, "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", time.Minute},
		{"reset", time.Second, time.Minute, "ffffffffrf", time.Second},
		{"grows after reset", time.Second, time.Minute, "ffffffffrfff", 4 * time.Second},
		{"defaults", 0, 0, "fffffffffff", time.Minute},
		{"default base", 0, 0, "f", time.Second},
		{"max below base", time.Second, time.Second / 2, "ff", time.Second / 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 { // the jitter differs each time
				b := fault.Backoff{Base: tc.base, Max: tc.max}
				var got time.Duration
				for _, s := range tc.steps {
					if s == 'r' {
						b.Reset()
					} else {
						got = b.Next()
					}
				}
				if got < tc.want/2 || got > tc.want {
					t.Fatalf("wait %v, want between %v and %v", got, tc.want/2, tc.want)
				}
			}
		})
	}
}

// TestUnanswered: an endpoint that did not answer (no connection, a
// session that broke, a transfer that stalled) is told from one that
// answered with a refusal.
func TestUnanswered(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", &client.HandshakeError{Stage: client.StageConnect, Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, true},
		{"session broke", &client.EndError{Err: io.EOF}, true},
		{"stalled", &client.StallError{After: 15 * time.Second}, true},
		{"refused", &client.EndError{Err: &gridftp.Error{Reply: gridftp.Reply{Code: 451, Lines: []string{"busy"}}}}, false},
		{"cut short", &client.EndError{Dest: true, Err: io.ErrUnexpectedEOF}, true},
		{"timed out", &client.EndError{Err: &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}}, true},
		{"damaged", fmt.Errorf("checksum mismatch: MD5 a at source, b at destination"), false},
		{"canceled", context.Canceled, false},
		{"login refused", &client.HandshakeError{Stage: client.StageLogin, Err: &gridftp.Error{Reply: gridftp.Reply{Code: 530, Lines: []string{"no"}}}}, false},
	}
	for _, tc := range tests {
		if got := fault.Unanswered(tc.err); got != tc.want {
			t.Errorf("%s: Unanswered = %v, want %v", tc.name, got, tc.want)
		}
	}
}
