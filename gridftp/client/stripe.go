package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"ferry/gridftp"
)

// ParseStripedPassive reads the addresses of a reply to SPAS: the RFC 2389
// style 229 with one " h1,h2,h3,h4,p1,p2" line per stripe that GCT and
// ferry send, or a one-line reply that names one address.
func ParseStripedPassive(rep gridftp.Reply) ([]netip.AddrPort, error) {
	if rep.Code != gridftp.CodeExtPassive {
		return nil, fmt.Errorf("%w: SPAS answered %d", gridftp.ErrBadAddress, rep.Code)
	}
	if len(rep.Lines) < 2 {
		ap, err := gridftp.ParsePassive(rep.Text())
		if err != nil {
			return nil, err
		}
		return []netip.AddrPort{ap}, nil
	}
	var fields []string
	for _, l := range rep.Lines[1 : len(rep.Lines)-1] {
		if s := strings.TrimSpace(l); s != "" {
			fields = append(fields, s)
		}
	}
	return gridftp.ParseHostPorts(strings.Join(fields, " "))
}

// StripedPassive sends SPAS and returns one address per stripe (a server
// that does not stripe gives one). Unusable addresses (0.0.0.0) are
// reached at the control connection's address, as Passive does.
func (c *Conn) StripedPassive(ctx context.Context) ([]netip.AddrPort, error) {
	rep, err := c.Do(ctx, "SPAS")
	c.dropData() // the server's data channel is the new ports now
	if err != nil {
		return nil, err
	}
	return c.stripedAddrs(rep)
}

// stripedAddrs reads a SPAS reply as StripedPassive describes.
func (c *Conn) stripedAddrs(rep gridftp.Reply) ([]netip.AddrPort, error) {
	aps, err := ParseStripedPassive(rep)
	if err != nil {
		return nil, err
	}
	r, rerr := netip.ParseAddrPort(c.c.RemoteAddr().String())
	for i, ap := range aps {
		if ap.Addr().IsUnspecified() && rerr == nil {
			aps[i] = netip.AddrPortFrom(r.Addr().Unmap(), ap.Port())
		}
	}
	return aps, nil
}

// StripedPort sends SPOR with addrs: the server's stripes send to them.
func (c *Conn) StripedPort(ctx context.Context, addrs []netip.AddrPort) error {
	if len(addrs) == 0 {
		return fmt.Errorf("%w: SPOR without addresses", gridftp.ErrBadAddress)
	}
	_, err := c.Do(ctx, "%s", SPORCommand(addrs))
	return err
}

// SPORCommand is the SPOR command for addrs: IPv4 addresses in the
// h1,h2,h3,h4,p1,p2 form every server parses, IPv6 ones in EPRT's form,
// which GCT's and ferry's parsers take too.
func SPORCommand(addrs []netip.AddrPort) string {
	f := make([]string, len(addrs))
	for i, ap := range addrs {
		if ap.Addr().Unmap().Is4() {
			f[i] = gridftp.FormatHostPort(ap)
		} else {
			f[i] = fmt.Sprintf("|2|%s|%d|", ap.Addr(), ap.Port())
		}
	}
	return "SPOR " + strings.Join(f, " ")
}

// Stripes reports how many stripes a server offers: the addresses it
// answers SPAS with (1 for a server that does not stripe, and for one
// that refuses SPAS). The passive ports it opened close at the next data
// channel setup.
func (c *Conn) Stripes(ctx context.Context) (int, error) {
	aps, err := c.StripedPassive(ctx)
	var refused *gridftp.Error
	switch {
	case errors.As(err, &refused):
		return 1, nil
	case err != nil:
		return 0, err
	}
	return len(aps), nil
}

// Mover is one data mover of a striped ferry front end, as SITE MOVERS
// reports it.
type Mover struct {
	Index  int
	Addr   string // host:port
	Up     bool
	Reason string // why it is down
}

// ParseMovers reads a reply to SITE MOVERS: a 200 with one line per
// mover, " <index> <host:port> up" or " <index> <host:port> down <reason>".
func ParseMovers(rep gridftp.Reply) ([]Mover, error) {
	if rep.Code != gridftp.CodeOK || len(rep.Lines) < 2 {
		return nil, fmt.Errorf("SITE MOVERS: unexpected reply %d %q", rep.Code, rep.Text())
	}
	var ms []Mover
	for _, l := range rep.Lines[1 : len(rep.Lines)-1] {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		var m Mover
		var err error
		if len(f) < 3 || (f[2] != "up" && f[2] != "down") {
			err = errors.New("want index, host:port, up or down")
		} else if m.Index, err = strconv.Atoi(f[0]); err == nil {
			_, _, err = net.SplitHostPort(f[1])
		}
		if err != nil {
			return nil, fmt.Errorf("SITE MOVERS: line %q: %v", strings.TrimSpace(l), err)
		}
		m.Addr, m.Up = f[1], f[2] == "up"
		if !m.Up {
			m.Reason = strings.Join(f[3:], " ")
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// Movers asks a ferry front end for its data movers (SITE MOVERS); nil
// for a server that refuses the command: it is no striped ferry front end
// (GCT's, whose data nodes only Stripes counts, or any other).
func (c *Conn) Movers(ctx context.Context) ([]Mover, error) {
	rep, err := c.Do(ctx, "SITE MOVERS")
	var refused *gridftp.Error
	switch {
	case errors.As(err, &refused) && refused.Reply.Code >= 500:
		return nil, nil
	case err != nil:
		return nil, err
	}
	return ParseMovers(rep)
}
