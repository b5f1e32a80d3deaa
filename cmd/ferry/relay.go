package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	neturl "net/url"
	"strings"

	"github.com/spf13/cobra"

	"ferry/connect/ca"
	"ferry/connect/relay"
	"ferry/service/api"
	"ferry/service/domain"
	"ferry/service/secret"
)

// relayFlags are ferry server's settings of the relay for connect agents.
type relayFlags struct{ listen, address string }

func (f *relayFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "relay-listen", "", "a port of its own for the relay for ferry connect agents, HOST:PORT (default: the API's, --listen)")
	fl.StringVar(&f.address, "relay-address", "", "the relay's address as agents and GridFTP servers reach it, IPv4 or IPv4:PORT: "+
		"passive listeners for agents announce the IP; with --relay-listen agents connect to it (default: the address of --relay-listen, or else of --listen)")
}

// start starts this process's relay: on the API's listener, apiLn, where
// GET /relay is upgraded, and with --relay-listen on a port of its own.
// It returns the relay and the URL agents and the other processes reach it
// at: base's /relay route, or the relay's own port. resumed wakes the
// workers.
func (f relayFlags) start(st domain.Store, c *ca.CA, process string, apiLn net.Listener, base string, log *slog.Logger, resumed func()) (*relay.Relay, string, error) {
	r := &relay.Relay{Store: st, CA: c, Process: process, Bind: ipOf(apiLn.Addr()), Logger: log, Resumed: resumed}
	url := strings.TrimSuffix(base, "/") + api.Prefix + "/relay"
	var own net.Listener
	if f.listen != "" {
		ln, err := net.Listen("tcp", f.listen)
		if err != nil {
			return nil, "", fmt.Errorf("--relay-listen: %w", err)
		}
		own, r.Bind, url = ln, ipOf(ln.Addr()), "tcp://"+ln.Addr().String()
	}
	r.Public = r.Bind
	if f.address != "" {
		ap, err := parseHostPort(f.address)
		if err != nil || !ap.Addr().Is4() || ap.Addr().IsUnspecified() {
			if own != nil {
				own.Close()
			}
			return nil, "", errors.New("--relay-address: want the IPv4 or IPv4:PORT at which agents and GridFTP servers reach the relay")
		}
		r.Public = ap.Addr()
		if own != nil {
			url = "tcp://" + netip.AddrPortFrom(ap.Addr(), cmp.Or(ap.Port(), uint16(own.Addr().(*net.TCPAddr).Port))).String()
		}
	}
	if !r.Public.Is4() || r.Public.IsUnspecified() {
		log.Warn("the relay has no IPv4 address to announce: agents get no passive listeners for senders that cannot listen for them (--relay-address)")
		r.Public = netip.Addr{}
	}
	if u, err := neturl.Parse(url); err == nil {
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil && ip.IsUnspecified() {
			log.Warn("agents and the other processes cannot reach this process's relay at an unspecified address: give --public-url (or --relay-address)", "url", url)
		}
	}
	if own != nil {
		go r.Serve(own)
	}
	return r, url, nil
}

// parseHostPort reads IP:PORT, or IP with port 0.
func parseHostPort(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
	}
	ip, err := netip.ParseAddr(s)
	return netip.AddrPortFrom(ip.Unmap(), 0), err
}

// ipOf is the IP of a TCP address; not valid for any other.
func ipOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// caContext binds the sealed CA to its place in the store.
const caContext = "connect CA"

// serviceCA is the connect CA all the service's processes share: the
// store keeps it, sealed with box (the key of --key-file). The first
// process to start makes it: from the CA that earlier versions kept under
// dataDir, if there is one, or anew.
func serviceCA(ctx context.Context, st domain.Store, box *secret.Box, dataDir string, log *slog.Logger) (*ca.CA, error) {
	c, err := ca.LoadDir(dataDir)
	onDisk := err == nil
	if errors.Is(err, fs.ErrNotExist) {
		c, err = ca.Generate()
	}
	if err != nil {
		return nil, err
	}
	sealed, err := box.SealBytes(c.PEM(), caContext)
	if err != nil {
		return nil, err
	}
	stored, err := st.InitCA(ctx, sealed)
	if err != nil {
		return nil, err
	}
	plain, err := box.OpenBytes(stored, caContext)
	if err != nil {
		return nil, fmt.Errorf("the connect CA in the database is sealed with another key: give every ferry server of the service the same --key-file (%w)", err)
	}
	shared, err := ca.Parse(plain)
	if err != nil {
		return nil, err
	}
	if onDisk && shared.Pin() != c.Pin() {
		log.Warn("the connect CA under --data is not the service's: agents paired with it must pair again", "dir", dataDir)
	}
	return shared, nil
}
