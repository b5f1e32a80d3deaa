package gridftp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// AddrIP is the IP of a connection's address (IPv4 unmapped); invalid
// for an address that names none.
func AddrIP(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap.Addr().Unmap()
}

// ErrBadAddress reports a malformed PORT, EPRT, PASV or SPAS address.
var ErrBadAddress = errors.New("gridftp: bad host-port")

// ParseHostPort parses the RFC 959 form "h1,h2,h3,h4,p1,p2".
func ParseHostPort(s string) (netip.AddrPort, error) {
	f := strings.Split(strings.TrimSpace(s), ",")
	if len(f) != 6 {
		return netip.AddrPort{}, fmt.Errorf("%w: %q", ErrBadAddress, truncate(s))
	}
	var b [6]byte
	for i, p := range f {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 8)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("%w: %q", ErrBadAddress, truncate(s))
		}
		b[i] = byte(n)
	}
	port := uint16(b[4])<<8 | uint16(b[5])
	if port == 0 {
		return netip.AddrPort{}, fmt.Errorf("%w: port 0", ErrBadAddress)
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[:4])), port), nil
}

// FormatHostPort formats an IPv4 address as "h1,h2,h3,h4,p1,p2".
func FormatHostPort(ap netip.AddrPort) string {
	a := ap.Addr().Unmap().As4()
	p := ap.Port()
	return fmt.Sprintf("%d,%d,%d,%d,%d,%d", a[0], a[1], a[2], a[3], p>>8, p&0xff)
}

// ParseEPRT parses the RFC 2428 form "|1|132.235.1.2|6275|" (any delimiter).
func ParseEPRT(s string) (netip.AddrPort, error) {
	s = strings.TrimSpace(s)
	if len(s) < 4 {
		return netip.AddrPort{}, fmt.Errorf("%w: %q", ErrBadAddress, truncate(s))
	}
	f := strings.Split(s[1:len(s)-1], s[:1])
	if len(f) != 3 || s[len(s)-1] != s[0] {
		return netip.AddrPort{}, fmt.Errorf("%w: %q", ErrBadAddress, truncate(s))
	}
	ip, err := netip.ParseAddr(f[1])
	port, err2 := strconv.ParseUint(f[2], 10, 16)
	if err != nil || err2 != nil || port == 0 || (f[0] == "1") != ip.Is4() || (f[0] != "1" && f[0] != "2") {
		return netip.AddrPort{}, fmt.Errorf("%w: %q", ErrBadAddress, truncate(s))
	}
	return netip.AddrPortFrom(ip, uint16(port)), nil
}

// ParsePassive extracts the address from a 227 reply text
// "Entering Passive Mode (h1,h2,h3,h4,p1,p2)".
func ParsePassive(text string) (netip.AddrPort, error) {
	i := strings.IndexByte(text, '(')
	j := strings.LastIndexByte(text, ')')
	if i >= 0 && j > i {
		return ParseHostPort(text[i+1 : j])
	}
	// Some servers omit the parentheses: "Entering Passive Mode 1,2,3,4,5,6."
	k := strings.IndexAny(text, "0123456789")
	if k < 0 {
		return netip.AddrPort{}, fmt.Errorf("%w: %q", ErrBadAddress, truncate(text))
	}
	return ParseHostPort(strings.TrimRight(text[k:], ". "))
}

// ParseExtPassive extracts the port from a 229 reply text "(|||port|)".
func ParseExtPassive(text string) (uint16, error) {
	i := strings.IndexByte(text, '(')
	j := strings.LastIndexByte(text, ')')
	if i < 0 || j < i+5 {
		return 0, fmt.Errorf("%w: %q", ErrBadAddress, truncate(text))
	}
	f := strings.Split(text[i+1:j], text[i+1:i+2])
	if len(f) != 5 {
		return 0, fmt.Errorf("%w: %q", ErrBadAddress, truncate(text))
	}
	p, err := strconv.ParseUint(f[3], 10, 16)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("%w: %q", ErrBadAddress, truncate(text))
	}
	return uint16(p), nil
}

// ParseHostPorts parses the space-separated list of SPOR or of SPAS
// lines: h1,h2,h3,h4,p1,p2 entries, or, as GCT also takes them, EPRT's
// |1|IP|PORT| or |2|IP|PORT| (the only form for IPv6).
func ParseHostPorts(s string) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for _, f := range strings.Fields(s) {
		parse := ParseHostPort
		if f[0] < '0' || f[0] > '9' {
			parse = ParseEPRT
		}
		ap, err := parse(f)
		if err != nil {
			return nil, err
		}
		out = append(out, ap)
	}
	if len(out) == 0 || len(out) > MaxStreams {
		return nil, fmt.Errorf("%w: %d addresses", ErrBadAddress, len(out))
	}
	return out, nil
}
