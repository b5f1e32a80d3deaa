package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ferry/gridftp"
)

// A data mover (Server.Mover) is a server that only its front end talks
// to, over TLS with the mover key (moverkey.go). Its sessions start logged
// in: the front end has checked the user. Two SITE commands, which only a
// mover has, tell a session what the front end knows and it does not:
// SITE CLIENT names the client, whose address the data channel rules use
// in place of the front end's, and SITE STRIPE which part of a striped
// send is this mover's.

// stripeRole is a mover session's part of the next sends: the index-th of
// count movers.
type stripeRole struct{ index, count int }

// clientView is what SITE CLIENT tells a mover session of the client.
type clientView struct {
	peer, local netip.Addr // the client's address and the front end's
	anywhere    bool       // the front end admits passive data from anywhere
}

// peerIP is the address the data channel rules treat as the client's:
// the control connection's peer, or for a mover the client the front end
// named.
func (ss *session) peerIP() netip.Addr {
	if ss.client.peer.IsValid() {
		return ss.client.peer
	}
	return gridftp.AddrIP(ss.conn.RemoteAddr())
}

// localIP is the address the client reached this server at.
func (ss *session) localIP() netip.Addr {
	if ss.client.local.IsValid() {
		return ss.client.local
	}
	return gridftp.AddrIP(ss.conn.LocalAddr())
}

// siteCLIENT reads "SITE CLIENT PEER LOCAL [ANY]" (movers only).
func (ss *session) siteCLIENT(arg string) {
	f := strings.Fields(arg)
	var v clientView
	var err1, err2 error
	if len(f) >= 2 {
		v.peer, err1 = netip.ParseAddr(f[0])
		v.local, err2 = netip.ParseAddr(f[1])
	}
	if !ss.srv.Mover || len(f) < 2 || len(f) > 3 || err1 != nil || err2 != nil || (len(f) == 3 && !strings.EqualFold(f[2], "ANY")) {
		ss.reply(gridftp.CodeSyntaxError, "Invalid command.")
		return
	}
	v.anywhere = len(f) == 3
	v.peer, v.local = v.peer.Unmap(), v.local.Unmap()
	ss.data.close()
	ss.client = v
	ss.reply(gridftp.CodeOK, "Client noted.")
}

// siteSTRIPE reads "SITE STRIPE INDEX COUNT" (movers only).
func (ss *session) siteSTRIPE(arg string) {
	i, c, _ := strings.Cut(arg, " ")
	index, err1 := strconv.Atoi(strings.TrimSpace(i))
	count, err2 := strconv.Atoi(strings.TrimSpace(c))
	if !ss.srv.Mover || err1 != nil || err2 != nil || count < 1 || count > maxMovers || index < 0 || index >= count {
		ss.reply(gridftp.CodeSyntaxError, "Invalid command.")
		return
	}
	ss.stripe = stripeRole{index: index, count: count}
	ss.reply(gridftp.CodeOK, "Stripe noted.")
}

// maxMovers bounds the movers of one front end.
const maxMovers = 64

// handshakeMover runs a mover's TLS handshake before the banner, within
// the login time: a peer without the mover key is dropped without a
// word.
func (ss *session) handshakeMover() bool {
	tc, ok := ss.conn.(*tls.Conn)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(ss.ctx, ss.srv.loginTimeout())
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		ss.log.Warn("mover: refused a peer without the mover key", "err", err)
		return false
	}
	ss.user, ss.loggedIn = "front end", true
	ss.loggedInOnce.Store(true)
	return true
}

// striped reports whether a send is one of several senders' (a mover's)
// or goes to several receiving stripes (SPOR with more than one address):
// then each stripe gets the blocks the layout gives it, and its own EOF.
func (ss *session) striped() bool {
	return ss.modeE && ss.data.ln == nil && (ss.stripe.count > 1 || len(ss.data.active) > 1)
}

// sendStriped sends this session's part of segs, of the region [base,
// end), to the receiving stripes (the active addresses): as many
// connections as the parallelism to each stripe, kept from the previous
// transfer when they fit (gridftp.PlanStripes says why every sender
// connects to every stripe).
func (ss *session) sendStriped(ctx context.Context, src io.ReaderAt, segs []gridftp.Range, base, end int64) error {
	n, m, p := max(ss.stripe.count, 1), len(ss.data.active), max(ss.parallel, 1)
	plan := gridftp.PlanStripes(ss.layout, segs, base, end, ss.stripe.index, n, m, p)
	reused := ss.data.stripesFit(m, p)
	ok := false
	defer func() {
		if !ok {
			ss.data.dropCache() // their state is unknown
		}
	}()
	if !reused {
		ss.data.dropCache()
		ss.data.stripes = make([][]*gridftp.Stream, m)
		for j := range m {
			conns, err := gridftp.DialAll(ctx, p, func(ctx context.Context, _ int) (net.Conn, error) { return ss.dial(ctx, j) })
			if err != nil {
				return err
			}
			for _, c := range conns {
				tune(c, ss.retrBuf)
				ss.data.stripes[j] = append(ss.data.stripes[j], gridftp.NewStream(c))
			}
		}
	}
	ss.beginReply(reused)
	var sent atomic.Int64
	if ss.retrMarks > 0 {
		stop := ss.markers(ss.retrMarks, &sent, nil)
		defer stop()
	}
	var wg sync.WaitGroup
	errs := make([]error, m)
	for j, streams := range ss.data.stripes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[j] = gridftp.SendStripe(ctx, streams, gridftp.NewPlan(plan.Segs[j], ss.srv.blockSize()), src, base, ss.buffers, &sent, plan.EOF[j])
		}()
	}
	wg.Wait()
	ss.moved += sent.Load()
	for _, err := range errs {
		if err != nil {
			return ss.dataErr(ctx, err)
		}
	}
	ok = true
	return nil
}

// moverDialTimeout bounds a front end's connection and handshake with a
// mover.
const moverDialTimeout = 10 * time.Second

// moverError names the mover that failed a front end's request.
func moverError(i int, addr string, err error) error {
	return fmt.Errorf("data mover %d (%s): %w", i, addr, err)
}
