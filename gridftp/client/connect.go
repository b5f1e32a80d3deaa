package client

import (
	"context"
	"errors"
	"net"
	"time"
)

// A connection to a server whose path drops packets silently (a black
// hole, a link that is down somewhere beyond the first hop) is tried
// again on a fresh socket every connectStep, for up to connectWithin in
// all. The kernel retransmits a lost SYN at doubling intervals (1, 2, 4,
// 8, 16, 32 s), so a path that comes back finds the next SYN up to half a
// minute away; a fresh attempt every few seconds finds it within one step.
// A step is far longer than any round trip a SYN needs.
const (
	connectStep   = 3 * time.Second
	connectWithin = 2 * time.Minute
)

// dialTCP connects to addr over TCP, again while the peer does not
// answer (redial).
func dialTCP(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return redial(ctx, connectStep, connectWithin, func(ctx context.Context) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	})
}

// redial calls once with a context bounded by step, again while it times
// out, until within has passed or ctx ends. Any other outcome (a
// connection, a refusal, no route) ends it at once.
func redial(ctx context.Context, step, within time.Duration, once func(context.Context) (net.Conn, error)) (net.Conn, error) {
	end := time.Now().Add(within)
	for {
		actx, cancel := context.WithTimeout(ctx, min(step, time.Until(end)))
		c, err := once(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !timedOut(err) || time.Until(end) <= 0 {
			return c, err
		}
	}
}

// timedOut reports an attempt that got no answer in its time.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
