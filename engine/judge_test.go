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

// TestLinkLeastRoundTrip: one late reply does not make a wide-area link
// of loopback; the least round trip decides, and the tuner says so. Every
// reply late (slowConn) still does.
func TestLinkLeastRoundTrip(t *testing.T) {
	src := startEndpoint(t, "", nil)
	dst := startEndpoint(t, "", nil)
	writeFile(t, filepath.Join(src.root, "f"), random(1000))
	const late = 20 * time.Millisecond
	for _, tc := range []struct {
		name string
		wrap func(net.Conn) net.Conn
		link string
	}{
		{"the banner late", func(c net.Conn) net.Conn { return &lateConn{Conn: c, delay: late, at: 0} }, "over a local link (round trip"},
		{"the login's reply late", func(c net.Conn) net.Conn { return &lateConn{Conn: c, delay: late, at: 1} }, "over a local link (round trip"},
		{"every reply late", func(c net.Conn) net.Conn { return newSlowConn(c, 6*time.Millisecond) }, "over a wide-area link (round trip"},
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
			if !strings.Contains(res.Settings.Why, tc.link) {
				t.Errorf("tuner: %q; want %q", res.Settings.Why, tc.link)
			}
		})
	}
}
