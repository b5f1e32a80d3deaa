package netpolicy_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"ferry/internal/netpolicy"
	"ferry/internal/peertest"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		networks string
		local    bool
		allowed  []string
		refused  map[string]string // address → a word of the reason
	}{
		{
			networks: "", local: false,
			allowed: []string{"192.0.2.7", "10.1.2.3", "172.16.0.1", "192.168.1.1", "8.8.8.8", "2001:db8::1", "fd00::2", "100.100.100.201"},
			refused: map[string]string{
				"169.254.169.254": "link-local", "169.254.0.1": "link-local", "fe80::1": "link-local", "fe80::1%eth0": "link-local",
				"fd00:ec2::254": "metadata", "100.100.100.200": "metadata",
				"127.0.0.1": "loopback", "127.8.9.10": "loopback", "::1": "loopback",
				"::ffff:127.0.0.1": "loopback", "::ffff:169.254.169.254": "link-local", "64:ff9b::a9fe:a9fe": "link-local",
				"0.0.0.0": "unspecified", "::": "unspecified", "224.0.0.1": "multicast", "ff02::1": "multicast",
				"255.255.255.255": "broadcast",
			},
		},
		{
			networks: "", local: true,
			allowed: []string{"127.0.0.1", "::1", "10.0.0.1"},
			refused: map[string]string{"169.254.169.254": "link-local", "0.0.0.0": "unspecified"},
		},
		{
			networks: "10.0.0.0/8, 192.0.2.5,!10.9.0.0/16", local: true,
			allowed: []string{"10.1.1.1", "192.0.2.5"},
			refused: map[string]string{"10.9.1.1": "operator refuses 10.9.0.0/16", "192.0.2.6": "outside",
				"127.0.0.1": "outside", "8.8.8.8": "outside", "2001:db8::1": "outside"},
		},
		{
			// An operator may open a built-in refusal only by naming it.
			networks: "0.0.0.0/0,::/0,169.254.10.0/24,127.0.0.1", local: false,
			allowed: []string{"169.254.10.9", "127.0.0.1", "8.8.8.8"},
			refused: map[string]string{"169.254.169.254": "link-local", "127.0.0.2": "loopback", "::1": "loopback"},
		},
	} {
		p, err := netpolicy.New(tc.networks, tc.local)
		if err != nil {
			t.Fatalf("New(%q): %v", tc.networks, err)
		}
		for _, s := range tc.allowed {
			if err := p.Check(netip.MustParseAddr(s)); err != nil {
				t.Errorf("%q local=%v: %s refused: %v", tc.networks, tc.local, s, err)
			}
		}
		for s, why := range tc.refused {
			err := p.Check(netip.MustParseAddr(s))
			var de *netpolicy.DeniedError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), why) {
				t.Errorf("%q local=%v: %s: %v, want a refusal saying %q", tc.networks, tc.local, s, err, why)
			}
		}
	}
	var none *netpolicy.Policy
	if err := none.Check(netip.MustParseAddr("169.254.169.254")); err != nil {
		t.Errorf("a nil policy refused: %v", err)
	}
}

func TestNewRefusesMalformedLists(t *testing.T) {
	for _, s := range []string{"10.0.0.0/33", "example.org", "10.0.0.0/8,,", "!", "fe80::1%eth0", "::ffff:10.0.0.0/104"} {
		if _, err := netpolicy.New(s, false); err == nil {
			t.Errorf("New(%q) accepted", s)
		}
	}
}

func TestDial(t *testing.T) {
	addr := peertest.Serve(t, "", "")
	_, port, _ := net.SplitHostPort(addr)
	local, _ := netpolicy.New("", true)
	remote, _ := netpolicy.New("", false)
	for _, tc := range []struct {
		p      *netpolicy.Policy
		addr   string
		denied bool
	}{
		{local, addr, false},
		{local, "localhost:" + port, false},
		{remote, addr, true},
		{remote, "localhost:" + port, true}, // a name that resolves to loopback
		{remote, "[::ffff:127.0.0.1]:" + port, true},
		{nil, addr, false},
	} {
		c, err := tc.p.Dial(t.Context(), "tcp", tc.addr)
		var de *netpolicy.DeniedError
		if got := errors.As(err, &de); got != tc.denied || !tc.denied && err != nil {
			t.Errorf("Dial %s: %v; want denied %v", tc.addr, err, tc.denied)
		}
		if c != nil {
			c.Close()
		}
	}
	if err := remote.CheckHost(t.Context(), "localhost"); err == nil {
		t.Error("CheckHost(localhost) allowed loopback on a policy that refuses it")
	}
}

// dnsServer answers every A query with the address in a, and AAAA queries
// with nothing: a name server whose answer can change, as a rebinding
// attacker's does.
type dnsServer struct {
	a atomic.Pointer[netip.Addr]
}

func startDNS(t *testing.T, first netip.Addr) (*dnsServer, *net.Resolver) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	s := &dnsServer{}
	s.a.Store(&first)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out := s.answer(buf[:n]); out != nil {
				pc.WriteTo(out, from)
			}
		}
	}()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
	return s, r
}

// answer builds the reply to query q: its header and question, and one A
// record for an A question.
func (s *dnsServer) answer(q []byte) []byte {
	if len(q) < 12 {
		return nil
	}
	end := 12
	for end < len(q) && q[end] != 0 {
		end += int(q[end]) + 1
	}
	end += 5 // the root label, QTYPE, QCLASS
	if end > len(q) {
		return nil
	}
	out := append([]byte(nil), q[:end]...)
	binary.BigEndian.PutUint16(out[2:], 0x8180) // a response, recursion available, no error
	binary.BigEndian.PutUint16(out[8:], 0)      // no authority
	binary.BigEndian.PutUint16(out[10:], 0)     // no additional records
	if binary.BigEndian.Uint16(q[end-4:]) != 1 {
		binary.BigEndian.PutUint16(out[6:], 0)
		return out
	}
	binary.BigEndian.PutUint16(out[6:], 1)
	a := s.a.Load().As4()
	out = append(out, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4)
	return append(out, a[:]...)
}

// TestDialChecksWhatTheNameResolvesToNow: a name that resolved to an
// allowed address when it was given and to a metadata address at dial
// time is refused when the connection is made.
func TestDialChecksWhatTheNameResolvesToNow(t *testing.T) {
	dns, r := startDNS(t, netip.MustParseAddr("192.0.2.10"))
	p, err := netpolicy.New("", false)
	if err != nil {
		t.Fatal(err)
	}
	p.Resolver = r
	if err := p.CheckHost(t.Context(), "data.example.test"); err != nil {
		t.Fatalf("CheckHost while the name resolves to 192.0.2.10: %v", err)
	}
	dns.a.Store(new(netip.MustParseAddr("169.254.169.254")))
	if err := p.CheckHost(t.Context(), "data.example.test"); err == nil {
		t.Fatal("CheckHost allowed a name that resolves to 169.254.169.254")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err = p.Dial(ctx, "tcp", "data.example.test:80")
	var de *netpolicy.DeniedError
	if !errors.As(err, &de) || de.Addr != netip.MustParseAddr("169.254.169.254") {
		t.Fatalf("Dial after the name moved to 169.254.169.254: %v; want a refusal of that address", err)
	}
}
