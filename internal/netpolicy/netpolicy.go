// Package netpolicy decides which IP addresses a connection that a user
// asked for may go to, so that a service dialling addresses on its users'
// behalf cannot be turned on its own host or network.
//
// A Policy is an operator's list of networks (CIDR prefixes or single
// addresses, a leading "!" refusing one) over built-in refusals of what no
// user should reach through a service: unspecified addresses (they reach
// the host itself), link-local ones (where cloud metadata services
// answer), the metadata addresses outside them, multicast and reserved
// ones, and loopback unless the service itself listens on loopback. The
// longest prefix that holds an address decides; at equal length the
// operator's entry wins over a built-in one, so an operator can open one
// of them by naming it. Without a list every other address is allowed.
//
// Names are checked when they are given (CheckHost) and, since a name may
// resolve elsewhere later, every address a connection is made to is
// checked as it is made (Dial).
package netpolicy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// Policy says which addresses connections may go to. A nil *Policy allows
// every address.
type Policy struct {
	// Resolver resolves names for CheckHost and Dial; nil:
	// net.DefaultResolver.
	Resolver *net.Resolver

	rules   []rule
	allowed string // the operator's list as given; "" for the default
}

// rule is one prefix of a policy.
type rule struct {
	prefix   netip.Prefix
	allow    bool
	operator bool   // from the operator's list, not built in
	why      string // a refusal's reason
}

// beats reports whether r decides over o, when both hold an address: the
// longer prefix does, and at equal length the operator's entry.
func (r *rule) beats(o *rule) bool {
	if r.prefix.Bits() != o.prefix.Bits() {
		return r.prefix.Bits() > o.prefix.Bits()
	}
	return r.operator && !o.operator
}

// builtin are the refusals that hold unless the operator's list names the
// prefix (or a longer one inside it).
var builtin = []struct{ prefix, why string }{
	{"0.0.0.0/8", "an unspecified address reaches this host itself"},
	{"::/128", "an unspecified address reaches this host itself"},
	{"169.254.0.0/16", "link-local addresses, where cloud metadata services answer, are never allowed"},
	{"fe80::/10", "link-local addresses, where cloud metadata services answer, are never allowed"},
	{"fd00:ec2::254/128", "cloud metadata services are never allowed"},
	{"100.100.100.200/32", "cloud metadata services are never allowed"},
	{"224.0.0.0/4", "multicast addresses are never allowed"},
	{"ff00::/8", "multicast addresses are never allowed"},
	{"240.0.0.0/4", "reserved and broadcast addresses are never allowed"},
}

// loopback are refused unless the service listens on loopback itself.
var loopback = []string{"127.0.0.0/8", "::1/128"}

const loopbackWhy = "loopback addresses are allowed only when the service itself listens on loopback"

// nat64 is the well-known NAT64 prefix, whose addresses stand for the IPv4
// address in their last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// New makes the policy of the operator's list networks (comma-separated
// CIDR prefixes or addresses, "!" before one to refuse it; "" for the
// default: every address but the built-in refusals). local says that the
// service listens on loopback, so that loopback addresses are not refused
// (a service on one machine with its endpoints).
func New(networks string, local bool) (*Policy, error) {
	p := &Policy{allowed: strings.Join(strings.Fields(networks), "")}
	for _, b := range builtin {
		p.rules = append(p.rules, rule{prefix: netip.MustParsePrefix(b.prefix), why: b.why})
	}
	if !local {
		for _, s := range loopback {
			p.rules = append(p.rules, rule{prefix: netip.MustParsePrefix(s), why: loopbackWhy})
		}
	}
	if p.allowed == "" {
		for _, s := range []string{"0.0.0.0/0", "::/0"} {
			p.rules = append(p.rules, rule{prefix: netip.MustParsePrefix(s), allow: true})
		}
		return p, nil
	}
	for _, item := range strings.Split(p.allowed, ",") {
		deny := strings.HasPrefix(item, "!")
		pf, err := parsePrefix(strings.TrimPrefix(item, "!"))
		if err != nil {
			return nil, err
		}
		p.rules = append(p.rules, rule{prefix: pf, allow: !deny, operator: true,
			why: "the operator refuses " + pf.String()})
	}
	return p, nil
}

// parsePrefix reads a CIDR prefix or a single address.
func parsePrefix(s string) (netip.Prefix, error) {
	if pf, err := netip.ParsePrefix(s); err == nil {
		if pf.Addr().Is4In6() {
			return netip.Prefix{}, fmt.Errorf("network %q: write an IPv4 network as IPv4", s)
		}
		return pf.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("network %q: want a CIDR prefix (10.0.0.0/8, 2001:db8::/32) or an address, with ! to refuse it", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// DeniedError is an address that a policy refuses, and why.
type DeniedError struct {
	Addr netip.Addr
	Why  string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("address %s is not allowed: %s", e.Addr, e.Why)
}

// Check returns a *DeniedError when the policy refuses a, else nil. An
// IPv4-mapped or NAT64 address is judged as the IPv4 address it carries
// too.
func (p *Policy) Check(a netip.Addr) error {
	if p == nil {
		return nil
	}
	a = a.WithZone("")
	if nat64.Contains(a) {
		b := a.As16()
		if err := p.Check(netip.AddrFrom4([4]byte(b[12:]))); err != nil {
			return &DeniedError{Addr: a, Why: err.(*DeniedError).Why}
		}
	}
	v := a.Unmap()
	var best *rule
	for i := range p.rules {
		if r := &p.rules[i]; r.prefix.Contains(v) && (best == nil || r.beats(best)) {
			best = r
		}
	}
	switch {
	case best == nil && !v.IsValid():
		return &DeniedError{Addr: a, Why: "it is not an IP address"}
	case best == nil:
		return &DeniedError{Addr: a, Why: "it is outside the networks allowed here (" + p.allowed + ")"}
	case !best.allow:
		return &DeniedError{Addr: a, Why: best.why}
	}
	return nil
}

// CheckHost resolves host (a name or an address) and returns a
// *DeniedError when the policy refuses one of its addresses. A name that
// does not resolve is not refused here: Dial checks what it resolves to
// when it does.
func (p *Policy) CheckHost(ctx context.Context, host string) error {
	if p == nil {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return p.Check(a)
	}
	addrs, err := p.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if err := p.Check(a); err != nil {
			return err
		}
	}
	return nil
}

// Dial connects to addr (host:port) as net.Dialer.DialContext does, but
// only to addresses the policy allows: each address the name resolves to
// is checked as the connection is made to it. A refused address fails
// with an error that holds a *DeniedError.
func (p *Policy) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{}
	if p != nil {
		d.Resolver = p.Resolver
		d.ControlContext = func(_ context.Context, _, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &DeniedError{Why: fmt.Sprintf("%q is not an IP address and port", address)}
			}
			return p.Check(ap.Addr())
		}
	}
	return d.DialContext(ctx, network, addr)
}

func (p *Policy) resolver() *net.Resolver {
	if p.Resolver != nil {
		return p.Resolver
	}
	return net.DefaultResolver
}
