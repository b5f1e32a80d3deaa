package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"ferry/gridftp/client"
)

// perfMarker is a one-stripe 112 reply of n bytes.
func perfMarker(n int) string {
	return fmt.Sprintf("112-Perf Marker\r\n Timestamp:  1.0\r\n Stripe Index: 0\r\n"+
		" Stripe Bytes Transferred: %d\r\n Total Stripe Count: 1\r\n112 End.\r\n", n)
}

// TestFinishStalled: a transfer whose markers stop growing (a silent black
// hole of the data path: the sessions answer, no data moves) ends with
// ErrStalled once Pair.Stall passes without progress, long before the
// reply timeout or the caller's deadline; one whose markers grow until
// its end is not stalled, however short Stall is.
func TestFinishStalled(t *testing.T) {
	tests := []struct {
		name    string
		dst     string // the destination's replies to STOR
		stalled bool
	}{
		{"markers stop growing", "150 Go.\r\n" + perfMarker(0) + perfMarker(4096) + perfMarker(4096) +
			"111 Range Marker 0-4096\r\n", true},
		{"markers grow to the end", "150 Go.\r\n" + perfMarker(0) + perfMarker(4096) + perfMarker(8192) +
			"111 Range Marker 0-8192\r\n226 Done.\r\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := dialScripted(t, scripted(t, loginStep, step{
				[]string{"MODE E", "OPTS RETR Parallelism=1,1,1;Markers=5;", "PORT 127,0,0,1,4,1"},
				"200 MODE E ok.\r\n200 OPTS ok.\r\n200 PORT Command successful.\r\n",
			}, step{[]string{"RETR /a"}, "150 Go.\r\n" + map[bool]string{false: "226 Done.\r\n"}[tc.stalled]}))
			dst := dialScripted(t, scripted(t, loginStep, step{
				[]string{"MODE E", "PASV"},
				"200 MODE E ok.\r\n227 Entering Passive Mode (127,0,0,1,4,1)\r\n",
			}, step{[]string{"STOR /b"}, tc.dst}))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, c := range []*client.Conn{src, dst} {
				if err := c.Login(ctx, "anonymous", "ferry@"); err != nil {
					t.Fatal(err)
				}
				c.Timeout = time.Hour // only the stall rule may end the wait
			}
			p := &client.Pair{Src: src, Dst: dst, Stall: 200 * time.Millisecond}
			if err := p.Setup(ctx, 1); err != nil {
				t.Fatal(err)
			}
			part := client.Part{SrcPath: "/a", DstPath: "/b", Length: -1}
			if err := p.Start(part); err != nil {
				t.Fatal(err)
			}
			err := p.Finish(ctx, part, client.Markers{})
			if got := errors.Is(err, client.ErrStalled); got != tc.stalled {
				t.Fatalf("Finish = %v; stalled %v, want %v", err, got, tc.stalled)
			}
			if !tc.stalled && err != nil {
				t.Fatalf("Finish = %v", err)
			}
			var timeout net.Error
			if tc.stalled && (!errors.As(err, &timeout) || !timeout.Timeout()) {
				t.Fatalf("Finish = %v: not a net.Error that timed out", err)
			}
		})
	}
}
