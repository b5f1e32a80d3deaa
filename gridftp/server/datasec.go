package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"ferry/gridftp"
)

// Who a session's data connections may be with.
//
// Authenticated (DCAU A, with the credential a client handed over by DCSC
// P, FEAT DATATLS): every data connection proves the credential in a TLS
// handshake (gridftp.SecureData), so passive ports admit any address: a
// stranger gets nothing and injects nothing, and a PORT aimed at another
// service moves no payload to it.
//
// Unauthenticated (DCAU N, the default, what GCT without GSI and plain FTP
// clients speak): a passive port admits only the control connection's
// peer and the addresses the client named with OPTS PASV From=IP,...; (the
// sender of a third-party transfer), unless the operator lets it admit any
// (Server.PassiveFromAnywhere, as GCT does).
//
// Either way, PORT, EPRT and SPOR may name the control connection's peer,
// and else only addresses the TargetPolicy allows: by default neither
// loopback (unless the control connection came in on loopback), link-local
// nor a cloud metadata address, and no port below 1024. A credential the
// client made itself proves nothing of the target it names, and the
// connection is made before any handshake: without the policy, DCSC P and
// DCAU A would make the server a blind scanner of its host and network.

// TargetPolicy decides where active data connections, and the connections
// a layer makes to other hosts, may go besides the control connection's
// peer.
type TargetPolicy struct {
	// Allow, when set, lists the networks a target may be in, in place of
	// the default rule; ports below 1024 stay refused.
	Allow []netip.Prefix
}

// metadata are the cloud providers' instance metadata addresses.
var metadata = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
}

// allows reports whether a connection the server makes for a client may
// go to target; peer is the control connection's remote address and local its
// local one.
func (p TargetPolicy) allows(target netip.AddrPort, peer, local netip.Addr) error {
	ip := target.Addr().Unmap()
	switch {
	case !ip.IsValid() || ip.IsUnspecified() || ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("%v is no host", ip)
	case ip == peer.Unmap():
		return nil
	case target.Port() < 1024:
		return fmt.Errorf("port %d is a system port of another host than the client", target.Port())
	}
	if len(p.Allow) > 0 {
		for _, n := range p.Allow {
			if n.Contains(ip) {
				return nil
			}
		}
		return fmt.Errorf("%v is outside the networks this server sends data to", ip)
	}
	switch {
	case ip.IsLoopback() && !local.Unmap().IsLoopback():
		return fmt.Errorf("%v is a loopback address of this host", ip)
	case ip.IsLinkLocalUnicast():
		return fmt.Errorf("%v is a link-local address", ip)
	}
	for _, m := range metadata {
		if ip == m {
			return fmt.Errorf("%v is a cloud metadata address", ip)
		}
	}
	return nil
}

// checkTarget refuses a data target the policy does not allow, whatever
// DCAU says.
func (ss *session) checkTarget(ap netip.AddrPort) error {
	return ss.srv.TargetPolicy.allows(ap, ss.peerIP(), ss.localIP())
}

// dialOut opens a connection a layer makes to another host (a multicast
// child's control connection, and its data connections to wherever the
// child's PASV answer points) to the first of addr's addresses that the
// TargetPolicy allows, as for a PORT: a client cannot make the server
// connect to what it could not reach with one (an FTP bounce by another
// road), nor can a hostile child. Nor does it connect to the session's own
// passive data port (errOwnDataPort).
func (ss *session) dialOut(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", port, err)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	var refused error
	for _, ip := range ips {
		ap := netip.AddrPortFrom(ip.Unmap(), uint16(pn))
		err := ss.checkTarget(ap)
		if err == nil && ss.ownDataPort(ap) {
			err = errOwnDataPort
		}
		if err != nil {
			refused = cmp.Or(refused, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		d := net.Dialer{Control: gridftp.DataControl}
		return d.DialContext(ctx, network, ap.String())
	}
	if refused == nil {
		refused = fmt.Errorf("%s: no address", addr)
	}
	return nil, refused
}

// errOwnDataPort refuses a layer's connection to its session's own
// passive data port: while the session receives, the port takes every
// connection as a stream of the transfer, so that a multicast child there
// (a port the kernel gave the listener after the child's server had left
// it) would wait for a banner inside the transfer that waits for it to
// take its blocks, until its setup timeout closed it and so cut the
// transfer short.
var errOwnDataPort = errors.New("the session's own data port")

// ownDataPort reports whether ap is the address the session's passive
// listener announced.
func (ss *session) ownDataPort(ap netip.AddrPort) bool {
	own := ss.data.own.Load()
	return own != nil && *own == ap
}

// passiveFrom is whom the passive listener opened now admits: nil for
// anyone, when each connection proves the session's credential (DCAU A) or
// the operator lets any come; else the control connection's peer and the
// addresses the client named (OPTS PASV From).
func (ss *session) passiveFrom() []netip.Addr {
	if ss.dcauA || ss.srv.PassiveFromAnywhere || ss.client.anywhere {
		return nil
	}
	return append([]netip.Addr{ss.peerIP()}, ss.pasvFrom...)
}

// admitter is how the passive listener opened now admits connections: the
// TLS handshake of an authenticated session, else the address rule for
// from (passiveFrom), unless Server.Listen's listener applies it.
func (ss *session) admitter(from []netip.Addr) func(net.Conn) (net.Conn, error) {
	if ss.dcauA {
		cred, private, timeout := ss.dataCred, ss.protP, ss.srv.dataTimeout()
		return func(c net.Conn) (net.Conn, error) {
			sc, err := gridftp.SecureData(ss.ctx, c, cred, false, private, timeout)
			if err != nil {
				ss.log.Warn("data connection refused", "remote", c.RemoteAddr().String(), "err", err)
				return nil, err
			}
			return sc, nil
		}
	}
	if from == nil || ss.srv.Listen != nil {
		// A connect agent's passive ports are the relay's: it was told
		// whom to admit, and checks before the agent joins.
		return nil
	}
	return func(c net.Conn) (net.Conn, error) {
		if ip := gridftp.AddrIP(c.RemoteAddr()); !slices.Contains(from, ip) {
			ss.log.Warn("data connection refused: not the client's address", "remote", c.RemoteAddr().String())
			return c, fmt.Errorf("data connection from %v: not the client", ip)
		}
		return c, nil
	}
}

// secureActive authenticates an active data connection the session
// opened, when DCAU A.
func (ss *session) secureActive(c net.Conn) (net.Conn, error) {
	if !ss.dcauA {
		return c, nil
	}
	sc, err := gridftp.SecureData(ss.ctx, c, ss.dataCred, true, ss.protP, ss.srv.dataTimeout())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errDataConn, err)
	}
	return sc, nil
}

// dcscLifetime bounds how far ahead a handed-over credential may be valid
// for ferry's own: a session's credential lives with the session anyway.
const dcscLifetime = 7 * 24 * time.Hour

// handleDCSC takes a credential for the data channels: "DCSC P <base64 of
// PEM>", or "DCSC D" to drop it. Either ends the data channel.
func (ss *session) handleDCSC(arg string) bool {
	kind, blob, _ := strings.Cut(strings.TrimSpace(arg), " ")
	switch strings.ToUpper(kind) {
	case "D":
		ss.data.close()
		// Back to the login's credential: a GSI session's delegated one,
		// or the server's own.
		ss.dataCred, ss.dcsc, ss.dcauA, ss.protP = cmp.Or(ss.gsi.dataCred, ss.srv.DataCred), "", ss.gsi.dataCred != nil, false
		ss.reply(gridftp.CodeFileActionOK, "OK.")
	case "P":
		cred, err := gridftp.ParseDCSC(strings.TrimSpace(blob), time.Now())
		if err != nil {
			ss.replyf(gridftp.CodeBadArguments, "DCSC: %v.", err)
			return true
		}
		ss.data.close()
		ss.dataCred, ss.dcsc = cred, strings.TrimSpace(blob)
		ss.reply(gridftp.CodeFileActionOK, "OK.")
	default:
		ss.reply(gridftp.CodeParamNotSupported, "DCSC: expected P <credential> or D.")
	}
	return true
}

func (ss *session) handleDCAU(arg string) bool {
	mode, _, _ := strings.Cut(strings.TrimSpace(arg), " ")
	switch strings.ToUpper(mode) {
	case "N":
		if ss.dcauA {
			ss.data.close()
		}
		ss.dcauA, ss.protP = false, false
		ss.reply(gridftp.CodeOK, "DCAU N.")
	case "A":
		if ss.dataCred == nil {
			ss.reply(gridftp.CodeParamNotSupported, "DCAU A needs a credential for the data channels: send DCSC P first.")
			return true
		}
		if !ss.dcauA {
			ss.data.close()
		}
		ss.dcauA, ss.gsi.subject = true, ""
		ss.reply(gridftp.CodeOK, "DCAU A.")
	case "S":
		subject := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(arg), mode))
		switch {
		case subject == "":
			ss.reply(gridftp.CodeBadArguments, "DCAU S expected subject.")
		case ss.gsi.dataCred == nil || ss.dataCred != ss.gsi.dataCred:
			ss.reply(gridftp.CodeParamNotSupported, "DCAU S needs a GSI login with a delegated credential; DCAU N and A are available.")
		default:
			if !ss.dcauA {
				ss.data.close()
			}
			ss.dcauA, ss.gsi.subject = true, subject
			ss.reply(gridftp.CodeOK, "DCAU S.")
		}
		return true
	default:
		ss.reply(gridftp.CodeParamNotSupported, "Bad DCAU mode.")
	}
	return true
}

func (ss *session) handlePROT(arg string) bool {
	level := strings.ToUpper(strings.TrimSpace(arg))
	switch level {
	case "C":
		if ss.protP {
			ss.data.close()
		}
		ss.protP = false
	case "P", "S": // TLS gives integrity and privacy together
		if !ss.dcauA {
			ss.replyf(gridftp.CodeProtNotSupported, "Protection level %s needs DCAU A.", level)
			return true
		}
		if !ss.protP {
			ss.data.close()
		}
		ss.protP = true
	default:
		ss.replyf(gridftp.CodeProtNotSupported, "Protection level %s is not supported.", arg)
		return true
	}
	ss.replyf(gridftp.CodeOK, "Protection level set to %s.", level)
	return true
}

// optsPASV reads "OPTS PASV From=IP,IP;": the addresses, besides the
// client's, that an unauthenticated passive port admits (a third-party
// transfer's sender). Other items, such as GCT's AllowDelayed, are refused.
func (ss *session) optsPASV(arg string) error {
	var from []netip.Addr
	for _, item := range strings.Split(arg, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(item), "=")
		switch {
		case k == "":
		case strings.EqualFold(k, "From"):
			for _, s := range strings.Split(v, ",") {
				ip, err := netip.ParseAddr(strings.TrimSpace(s))
				if err != nil {
					return fmt.Errorf("From: %q is no IP address", s)
				}
				from = append(from, ip.Unmap())
			}
		default:
			return fmt.Errorf("%s is not supported", k)
		}
	}
	if len(from) > 16 {
		return fmt.Errorf("From: at most 16 addresses")
	}
	ss.pasvFrom = from
	return nil
}
