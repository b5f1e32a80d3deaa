package engine

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLinkView: the ends' addresses prove a link near whatever its round
// trip (one host; one broadcast subnet of this host); otherwise the
// round trip, the least of its samples, decides. Point-to-point subnets
// (the delay line's TUN devices, bench/wan) prove nothing.
func TestLinkView(t *testing.T) {
	ip := netip.MustParseAddr
	h := hostNets{
		own:  []netip.Addr{ip("127.0.0.1"), ip("192.168.1.10"), ip("10.77.1.10"), ip("2001:db8::10")},
		lans: []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("2001:db8::/64")},
	}
	noisy := 7 * time.Millisecond // one round trip on loopback under load
	for _, tc := range []struct {
		name string
		a, b netip.Addr
		rtt  time.Duration
		near string
		wan  bool
		why  string
	}{
		{"loopback, a noisy round trip", ip("127.0.0.1"), ip("127.0.0.1"), noisy, "both ends on the same host", false, "a local link (both ends on the same host)"},
		{"loopback, two addresses", ip("127.0.0.2"), ip("::1"), noisy, "both ends on the same host", false, ""},
		{"this host's own address and loopback", ip("192.168.1.10"), ip("127.0.0.1"), noisy, "both ends on the same host", false, ""},
		{"one remote host", ip("203.0.113.5"), ip("203.0.113.5"), 60 * time.Millisecond, "both ends on the same host", false, ""},
		{"one subnet", ip("192.168.1.20"), ip("192.168.1.30"), noisy, "both ends on one subnet, 192.168.1.0/24", false, "a local link (both ends on one subnet, 192.168.1.0/24)"},
		{"one subnet and this host", ip("127.0.0.1"), ip("192.168.1.30"), noisy, "both ends on one subnet, 192.168.1.0/24", false, ""},
		{"one subnet, IPv6", ip("2001:db8::20"), ip("2001:db8::30"), noisy, "both ends on one subnet, 2001:db8::/64", false, ""},
		{"a point-to-point subnet proves nothing", ip("10.77.1.13"), ip("10.77.1.15"), 60 * time.Millisecond, "", true, "a wide-area link (round trip 60ms, the least of 4 samples)"},
		{"this host and a remote one", ip("127.0.0.1"), ip("203.0.113.5"), 60 * time.Millisecond, "", true, ""},
		{"remote, the least sample short", ip("198.51.100.1"), ip("203.0.113.5"), 300 * time.Microsecond, "", false, "a local link (round trip 300µs, the least of 4 samples, under 5ms)"},
		{"a tunnel: no address", netip.Addr{}, ip("127.0.0.1"), noisy, "", true, ""},
		{"a tunnel, short", netip.Addr{}, ip("127.0.0.1"), time.Millisecond, "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Settings{RTT: tc.rtt, RTTSamples: 4, Near: near(tc.a, tc.b, h)}
			if s.Near != tc.near || s.wan() != tc.wan {
				t.Fatalf("near %q, wide-area %v; want %q, %v", s.Near, s.wan(), tc.near, tc.wan)
			}
			if note := linkNote(s); tc.why != "" && note != tc.why {
				t.Errorf("link %q, want %q", note, tc.why)
			}
			if why := tune(Options{}, sameFiles(1, 2<<30), s, false).Why; !strings.Contains(why, linkNote(s)) {
				t.Errorf("why %q does not say the link", why)
			}
		})
	}
}

// TestLocalNets: this host's addresses, read from its interfaces, hold
// loopback's; each broadcast subnet holds one of them, and none is
// loopback's.
func TestLocalNets(t *testing.T) {
	h := localNets()
	if !slices.Contains(h.own, netip.MustParseAddr("127.0.0.1")) {
		t.Errorf("127.0.0.1 not among this host's addresses: %+v", h)
	}
	for _, p := range h.lans {
		if p.Addr().IsLoopback() || !slices.ContainsFunc(h.own, p.Contains) {
			t.Errorf("broadcast subnet %v: loopback, or no address of this host in it: %+v", p, h)
		}
	}
}
