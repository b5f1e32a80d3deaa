package tunnel

import (
	"net/netip"
	"testing"
)

func TestListenAdmits(t *testing.T) {
	a := netip.MustParseAddr
	named := Listen{From: []netip.Addr{a("192.0.2.1"), a("2001:db8::1")}}
	for _, c := range []struct {
		name string
		l    Listen
		ip   netip.Addr
		want bool
	}{
		{"named", named, a("192.0.2.1"), true},
		{"named, IPv4 in IPv6", named, a("::ffff:192.0.2.1"), true},
		{"named IPv6", named, a("2001:db8::1"), true},
		{"another", named, a("192.0.2.2"), false},
		{"none named", Listen{}, a("192.0.2.1"), false},
		{"any", Listen{Any: true}, a("198.51.100.7"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.l.Admits(c.ip); got != c.want {
				t.Fatalf("%+v admits %v: %v, want %v", c.l, c.ip, got, c.want)
			}
		})
	}
}
