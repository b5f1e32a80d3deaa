package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ferry/gridftp"
)

// dataChannel is a session's data connection setup: a passive listener or
// active addresses, and the MODE E streams cached across transfers.
type dataChannel struct {
	ln       net.Listener
	accepted chan net.Conn // filled by the accept goroutine of ln
	stop     chan struct{}
	wg       sync.WaitGroup
	// own is the address announced for ln while it is open, for the
	// connections of the session's layers (dialOut), which run beside it.
	own atomic.Pointer[netip.AddrPort]

	active []netip.AddrPort // PORT, EPRT, SPOR

	cache   []*gridftp.Stream   // open MODE E streams
	stripes [][]*gridftp.Stream // a striped sender's open streams, by receiving stripe
	stream  net.Conn            // the connection of a stream-mode transfer
}

// close ends the data channel: listener and cached streams.
func (d *dataChannel) close() {
	d.closeListener()
	d.active = nil
	d.dropCache()
	if d.stream != nil {
		d.stream.Close()
		d.stream = nil
	}
}

// closeListener closes the passive listener, if any, and the connections
// it accepted that no transfer took.
func (d *dataChannel) closeListener() {
	if d.ln == nil {
		return
	}
	d.own.Store(nil)
	d.ln.Close()
	close(d.stop)
	d.wg.Wait()
	for c := range d.accepted {
		c.Close()
	}
	d.ln, d.accepted, d.stop = nil, nil, nil
}

// dropCache closes the cached MODE E streams.
func (d *dataChannel) dropCache() {
	for _, s := range slices.Concat(append(d.stripes, d.cache)...) {
		s.Conn.Close()
	}
	d.cache, d.stripes = nil, nil
}

// stripesFit reports whether the cached striped streams are n to each of
// m receiving stripes.
func (d *dataChannel) stripesFit(m, n int) bool {
	if len(d.stripes) != m {
		return false
	}
	for _, ss := range d.stripes {
		if len(ss) != n {
			return false
		}
	}
	return true
}

// dropPending closes connections accepted but not yet taken by a
// transfer: after a failed transfer they belong to it (its sender
// connected them), not to the next one.
func (d *dataChannel) dropPending() {
	for {
		select {
		case c, ok := <-d.accepted:
			if !ok {
				return
			}
			c.Close()
		default:
			return
		}
	}
}

// drainStream reads and drops what the sender of a failed stream-mode
// receive still sends, until it ends the connection or for at most wait,
// and reports whether it ended. Done with its data, the sender then reads
// the reply that says why, as after any transfer: replied to first,
// globus-url-copy could finish its writes after the reply and then wait
// for ever (TestFerryFullDisk); cut first, it could report the reset
// instead of the reason (TestFerryMaxFileSize). A sender not done within
// wait is cut once the reply has gone (cutStream).
func (d *dataChannel) drainStream(wait time.Duration) bool {
	if d.stream == nil {
		return true
	}
	d.stream.SetReadDeadline(time.Now().Add(wait))
	_, err := io.Copy(io.Discard, d.stream)
	return err == nil
}

// cutStream makes the stream-mode connection, if any, close with a reset
// (SO_LINGER 0), so that a sender still writing sees its write fail.
func (d *dataChannel) cutStream() { cut(d.stream) }

// cutCache closes the MODE E streams with a reset, as cutStream.
func (d *dataChannel) cutCache() {
	for _, s := range d.cache {
		cut(s.Conn)
	}
	d.dropCache()
}

// cut makes c, when it is a TCP connection, close with a reset.
func cut(c net.Conn) {
	if tc, ok := gridftp.TCPConn(c); ok {
		tc.SetLinger(0)
	}
}

// lingerTime is how long the data connections of a failed transfer are
// drained before they close.
const lingerTime = 2 * time.Second

// linger drops the MODE E streams after a receive that failed before it
// began (the file would not open), whose state is unknown. They are
// drained for a moment first: closing one with unread data resets it,
// and a sender that sees the reset (globus-url-copy) reports that instead
// of the error reply that says why.
func (d *dataChannel) linger() {
	conns := make([]net.Conn, 0, len(d.cache))
	for _, s := range d.cache {
		conns = append(conns, s.Conn)
	}
	d.cache = nil
	for _, c := range conns {
		go func(c net.Conn) {
			c.SetReadDeadline(time.Now().Add(lingerTime))
			io.Copy(io.Discard, c)
			c.Close()
		}(c)
	}
}

// maxPendingConns bounds connections accepted ahead of a transfer.
const maxPendingConns = gridftp.MaxStreams

// listen opens a passive listener — on the data interface, or the one
// Server.Listen gives — and starts accepting into d.accepted. It returns
// the address to announce.
func (ss *session) listen() (netip.AddrPort, error) {
	ss.data.close()
	var ln net.Listener
	var ap netip.AddrPort
	var err error
	from := ss.passiveFrom()
	if ss.srv.Listen != nil {
		if ln, err = ss.srv.Listen(from); err != nil {
			return netip.AddrPort{}, err
		}
		ap = ln.Addr().(*net.TCPAddr).AddrPort()
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	} else {
		ip := ss.srv.DataInterface
		if !ip.IsValid() {
			local, err := netip.ParseAddrPort(ss.conn.LocalAddr().String())
			if err != nil {
				return netip.AddrPort{}, err
			}
			ip = local.Addr().Unmap()
		}
		if ln, err = ss.srv.listenData(ip); err != nil {
			return netip.AddrPort{}, err
		}
		ap = netip.AddrPortFrom(ip, uint16(ln.Addr().(*net.TCPAddr).Port))
	}
	d := &ss.data
	d.ln, d.accepted, d.stop = ln, make(chan net.Conn, maxPendingConns), make(chan struct{})
	d.own.Store(&ap)
	admit := ss.admitter(from)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		gridftp.Accept(ln, d.accepted, d.stop, admit)
	}()
	return ap, nil
}

// listenData binds a data listener within the configured port range.
func (s *Server) listenData(ip netip.Addr) (net.Listener, error) {
	lc := net.ListenConfig{Control: gridftp.DataControl}
	if s.PortLow <= 0 || s.PortHigh < s.PortLow {
		return lc.Listen(context.Background(), "tcp", netip.AddrPortFrom(ip, 0).String())
	}
	span := s.PortHigh - s.PortLow + 1
	start := int(time.Now().UnixNano() % int64(span))
	var lastErr error
	for i := range span {
		port := s.PortLow + (start+i)%span
		ln, err := lc.Listen(context.Background(), "tcp", netip.AddrPortFrom(ip, uint16(port)).String())
		if err == nil {
			return ln, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("no free data port in %d-%d: %w", s.PortLow, s.PortHigh, lastErr)
}

func (ss *session) handlePASV(string) bool {
	ap, err := ss.listen()
	if err != nil || !ap.Addr().Is4() {
		ss.log.Warn("PASV failed", "err", err)
		ss.reply(gridftp.CodeCantOpenData, "Cannot open passive data port; use EPSV.")
		return true
	}
	ss.replyf(gridftp.CodePassive, "Entering Passive Mode (%s)", gridftp.FormatHostPort(ap))
	return true
}

func (ss *session) handleEPSV(arg string) bool {
	if strings.EqualFold(strings.TrimSpace(arg), "ALL") {
		ss.reply(gridftp.CodeOK, "EPSV ALL command successful.")
		return true
	}
	ap, err := ss.listen()
	if err != nil {
		ss.log.Warn("EPSV failed", "err", err)
		ss.reply(gridftp.CodeCantOpenData, "Cannot open passive data port.")
		return true
	}
	ss.replyf(gridftp.CodeExtPassive, "Entering Extended Passive Mode (|||%d|)", ap.Port())
	return true
}

func (ss *session) handleSPAS(string) bool {
	ap, err := ss.listen()
	if err != nil || !ap.Addr().Is4() {
		ss.log.Warn("SPAS failed", "err", err)
		ss.reply(gridftp.CodeCantOpenData, "Cannot open passive data port.")
		return true
	}
	ss.reply(gridftp.CodeExtPassive, "Entering Striped Passive Mode.", " "+gridftp.FormatHostPort(ap), "End")
	return true
}

func (ss *session) setActive(addrs []netip.AddrPort) {
	same := len(addrs) == len(ss.data.active)
	for i := 0; same && i < len(addrs); i++ {
		same = addrs[i] == ss.data.active[i]
	}
	if same && ss.data.ln == nil {
		return // keep cached streams to the same peer
	}
	ss.data.close()
	ss.data.active = addrs
}

func (ss *session) handlePORT(arg string) bool {
	ap, err := gridftp.ParseHostPort(arg)
	if err != nil {
		ss.reply(gridftp.CodeBadArguments, "Bad PORT address.")
		return true
	}
	return ss.active("PORT", []netip.AddrPort{ap})
}

func (ss *session) handleEPRT(arg string) bool {
	ap, err := gridftp.ParseEPRT(arg)
	if err != nil {
		ss.reply(gridftp.CodeBadArguments, "Bad EPRT address.")
		return true
	}
	return ss.active("EPRT", []netip.AddrPort{ap})
}

func (ss *session) handleSPOR(arg string) bool {
	aps, err := gridftp.ParseHostPorts(arg)
	if err != nil {
		ss.reply(gridftp.CodeBadArguments, "Bad SPOR address list.")
		return true
	}
	return ss.active("SPOR", aps)
}

// active takes the addresses of PORT, EPRT or SPOR, if the session may
// send data there (checkTarget).
func (ss *session) active(verb string, aps []netip.AddrPort) bool {
	for _, ap := range aps {
		if err := ss.checkTarget(ap); err != nil {
			ss.log.Warn("data target refused", "verb", verb, "target", ap.String(), "why", err)
			ss.replyf(gridftp.CodeBadArguments, "%s to %v refused: %v.", verb, ap, err)
			return true
		}
	}
	ss.setActive(aps)
	ss.replyf(gridftp.CodeOK, "%s Command successful.", verb)
	return true
}

var errNoDataSetup = errors.New("no PASV or PORT before the transfer")

// acceptOne waits for the next passive connection.
func (ss *session) acceptOne(ctx context.Context) (net.Conn, error) {
	if ss.data.ln == nil {
		return nil, errNoDataSetup
	}
	t := time.NewTimer(ss.srv.dataTimeout())
	defer t.Stop()
	select {
	case c, ok := <-ss.data.accepted:
		if !ok {
			return nil, fmt.Errorf("data listener closed: %w", errDataConn)
		}
		return c, nil
	case <-t.C:
		return nil, fmt.Errorf("no data connection within %v: %w", ss.srv.dataTimeout(), errDataConn)
	case <-ctx.Done():
		return nil, errAborted
	}
}

// dial opens an active data connection to the i-th address (round robin).
func (ss *session) dial(ctx context.Context, i int) (net.Conn, error) {
	if len(ss.data.active) == 0 {
		return nil, errNoDataSetup
	}
	ap := ss.data.active[i%len(ss.data.active)]
	if err := ss.checkTarget(ap); err != nil {
		return nil, fmt.Errorf("refusing data connection to %v: %v: %w", ap, err, errDataConn)
	}
	d := net.Dialer{Timeout: ss.srv.dataTimeout(), Control: gridftp.DataControl}
	c, err := d.DialContext(ctx, "tcp", ap.String())
	if err != nil {
		if ctx.Err() != nil {
			return nil, errAborted
		}
		return nil, fmt.Errorf("connect %v: %w", ap, errDataConn)
	}
	return ss.secureActive(c)
}

// tune applies SITE STORBUFSIZE / RETRBUFSIZE to a data connection.
func tune(c net.Conn, size int) {
	if tc, ok := gridftp.TCPConn(c); ok && size > 0 {
		tc.SetReadBuffer(size)
		tc.SetWriteBuffer(size)
	}
}
