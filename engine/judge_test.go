package engine_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"ferry/engine"
)

// lateConn delays one reply from the server by delay: the first read
// after at writes (0: the banner, 1: the reply to the login's commands),
// as a server does that forks for a session (GCT) or is busy a moment.
// It is no TCP connection: its addresses prove nothing, and the round
// trips decide.
type lateConn struct {
	net.Conn
	delay  time.Duration
	at     int32
	writes atomic.Int32
	late   atomic.Bool
}

func (c *lateConn) Read(p []byte) (int, error) {
	if c.writes.Load() == c.at && c.late.CompareAndSwap(false, true) {
		time.Sleep(c.delay)
	}
	return c.Conn.Read(p)
}

func (c *lateConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestLinkLeastRoundTrip: one late reply does not set the round trip the
// tuner sees, nor make a wide-area link of loopback: the least of the
// samples does, and the tuner says how many. Every reply late
// (slowConn) is a wide-area link still.
func TestLinkLeastRoundTrip(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	writeFile(t, filepath.Join(src.root, "f"), random(1000))
	const late, slow = 100 * time.Millisecond, 6 * time.Millisecond
	for _, tc := range []struct {
		name string
		wrap func(net.Conn) net.Conn
		wan  bool
	}{
		{"the banner late", func(c net.Conn) net.Conn { return &lateConn{Conn: c, delay: late, at: 0} }, false},
		{"the login's reply late", func(c net.Conn) net.Conn { return &lateConn{Conn: c, delay: late, at: 1} }, false},
		{"every reply late", func(c net.Conn) net.Conn { return newSlowConn(c, slow) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return tc.wrap(c), nil
			}
			s, d := src.Endpoint, dst.Endpoint
			s.Dial, d.Dial = dial, dial
			res, err := engine.Copy(context.Background(), s, d, []engine.Item{{Src: "/f", Dst: "/" + tc.name}}, fastOptions(), nil)
			if err != nil || res.Transferred != 1 {
				t.Fatalf("%+v %v", res, err)
			}
			set := res.Settings
			if !strings.Contains(set.Why, "the least of ") || set.RTTSamples < 2 {
				t.Errorf("tuner: %q, %d samples; want the round trip the least of 2 or more", set.Why, set.RTTSamples)
			}
			switch {
			case tc.wan && (set.RTT < slow || !strings.Contains(set.Why, "over a wide-area link (round trip")):
				t.Errorf("round trip %v, tuner: %q; want a wide-area link, every round trip %v or more", set.RTT, set.Why, slow)
			case !tc.wan && set.RTT >= late:
				t.Errorf("round trip %v, tuner: %q; want the least of the samples, not the late one", set.RTT, set.Why)
			}
		})
	}
}
