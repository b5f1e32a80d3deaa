package engine

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"ferry/gridftp/client"
	"ferry/internal/plural"
)

// wideArea is the round trip from which the link is treated as a WAN:
// more streams per file and more files in flight pay off there.
const wideArea = 5 * time.Millisecond

// morePings is how many more round trips each end's session measures when
// its login's say the link is wide and the addresses prove nothing: a
// busy host makes one longer, never shorter, and the least decides.
const morePings = 2

// hostNets is what this host knows of its own network: its addresses,
// and the subnets it reaches over a broadcast link.
type hostNets struct {
	own []netip.Addr
	// lans are the subnets of its Ethernet-like links (Ethernet, Wi-Fi,
	// bridges, veth): their hosts reach each other with no router
	// between. Point-to-point links (TUN devices, WireGuard, PPP) are
	// left out: their peers may be anywhere, as the delay line's
	// namespaces are (bench/wan).
	lans []netip.Prefix
}

// localNets reads this host's addresses and subnets; what it cannot read
// it leaves out, proving less.
func localNets() hostNets {
	var h hostNets
	ifs, _ := net.Interfaces()
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(n.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			h.own = append(h.own, ip)
			bits, _ := n.Mask.Size()
			lan := ifc.Flags&net.FlagBroadcast != 0 && ifc.Flags&net.FlagPointToPoint == 0
			if lan && !ip.IsLinkLocalUnicast() && !ip.IsLoopback() {
				h.lans = append(h.lans, netip.PrefixFrom(ip, bits).Masked())
			}
		}
	}
	return h
}

// near says why two servers, at addresses a and b (invalid: unknown, as
// over a tunnel), are provably near each other, whatever round trip was
// measured: both on one host (loopback, this host's own addresses, or
// one address), or both on one of this host's broadcast subnets (or on
// this host); "" when the addresses prove nothing.
func near(a, b netip.Addr, h hostNets) string {
	if !a.IsValid() || !b.IsValid() {
		return ""
	}
	here := func(x netip.Addr) bool { return x.IsLoopback() || slices.Contains(h.own, x) }
	if a == b || here(a) && here(b) {
		return "both ends on the same host"
	}
	for _, p := range h.lans {
		if (here(a) || p.Contains(a)) && (here(b) || p.Contains(b)) {
			return "both ends on one subnet, " + p.String()
		}
	}
	return ""
}

// judgeLink sets the settings' view of the link between the sessions s
// and d: whether they are provably near (Settings.Near), and the longer
// of their round trips, each the least of its samples, measured again
// (morePings) where the link looks wide and nothing proves it near.
func judgeLink(ctx context.Context, set *Settings, s, d *client.Conn, h hostNets) error {
	sa, _ := s.PeerIP()
	da, _ := d.PeerIP()
	set.Near = near(sa, da, h)
	if set.Near == "" {
		errs := make(chan error, 2)
		for _, c := range []*client.Conn{s, d} {
			go func() { errs <- ping(ctx, c) }()
		}
		for range 2 {
			if err := <-errs; err != nil {
				return err
			}
		}
	}
	far := s
	if d.RTT() > s.RTT() {
		far = d
	}
	set.RTT, set.RTTSamples = far.RTT(), far.RTTSamples()
	return nil
}

// ping measures c's round trip again, morePings times, while it says the
// link is wide.
func ping(ctx context.Context, c *client.Conn) error {
	for range morePings {
		if c.RTT() < wideArea {
			return nil
		}
		if err := c.Ping(ctx); err != nil {
			return fmt.Errorf("%s: round trip: %w", c.Addr(), err)
		}
	}
	return nil
}

// wan reports whether the settings' link is a wide-area one: not
// provably near, and a round trip from wideArea.
func (s Settings) wan() bool { return s.Near == "" && s.RTT >= wideArea }

// linkNote says the link in words, for Settings.Why: "a local link (both
// ends on the same host)", "a wide-area link (round trip 61ms, the least
// of 4 samples)".
func linkNote(s Settings) string {
	trip := fmt.Sprintf("round trip %v, the least of %s", s.RTT.Round(rttRound(s.RTT)), plural.Count(s.RTTSamples, "sample"))
	switch {
	case s.Near != "":
		return "a local link (" + s.Near + ")"
	case s.wan():
		return "a wide-area link (" + trip + ")"
	}
	return "a local link (" + trip + ", under " + wideArea.String() + ")"
}

// rttRound is how finely a round trip is said: to the millisecond from
// one, to 10 µs below.
func rttRound(rtt time.Duration) time.Duration {
	if rtt >= time.Millisecond {
		return time.Millisecond
	}
	return 10 * time.Microsecond
}
