package server

import (
	"context"
	"net"

	"ferry/gridftp"
)

// growth is what a session's sends may do with OPTS RETR Parallelism's
// maximum: add streams up to max while they add throughput
// (gridftp.Growth). What a send proved carries over to the next ones:
// they start with the streams that paid (kept), and once a probe did not
// pay, the session probes no more (done). A new OPTS RETR starts afresh.
type growth struct {
	max  int
	kept int
	done bool
}

// growth returns how a MODE E send over n streams may grow; nil when it
// may not: no maximum above n, probing over, or a data channel this
// sender does not open itself (it connects after PORT; after PASV the
// receiver does) or that is striped.
func (ss *session) growth(n int) *gridftp.Growth {
	if ss.grow.max <= n || ss.grow.done || ss.data.ln != nil || len(ss.data.active) == 0 || ss.striped() || ss.stripe.count > 1 {
		return nil
	}
	have := n
	return &gridftp.Growth{
		Max: ss.grow.max,
		Dial: func(ctx context.Context, k int) ([]*gridftp.Stream, error) {
			conns, err := gridftp.DialAll(ctx, k, func(ctx context.Context, i int) (net.Conn, error) {
				return ss.dial(ctx, have+i)
			})
			if err != nil {
				return nil, err
			}
			streams := make([]*gridftp.Stream, len(conns))
			for i, c := range conns {
				tune(c, ss.retrBuf)
				streams[i] = gridftp.NewStream(c)
			}
			have += len(conns)
			return streams, nil
		},
		Period:     ss.srv.GrowPeriod,
		AnyControl: ss.srv.GrowAnyControl,
		Clock:      ss.srv.growClock,
	}
}

// grown records what a send that started with n streams did: the streams
// that joined stay cached with the others (the next send keeps those that
// paid), and the probe's outcome carries over.
func (ss *session) grown(n int, res gridftp.GrowthResult) {
	ss.data.cache = append(ss.data.cache, res.Added...)
	if len(res.Added) > 0 || res.Done {
		ss.log.Info("streams grown", "from", n, "to", n+len(res.Added), "kept", max(res.Kept, n), "done", res.Done)
	}
	ss.grow.kept = max(res.Kept, ss.parallel)
	ss.grow.done = res.Done
}
